#!/bin/sh
# A script an image's bash modification runs on the bake machine.
set -eu
echo "hello from a csis bake" | sudo tee /etc/motd >/dev/null
