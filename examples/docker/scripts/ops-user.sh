#!/bin/sh
# An operator account for the catalogue's images.
set -eu
id -u ops >/dev/null 2>&1 || useradd --create-home --shell /bin/bash ops
