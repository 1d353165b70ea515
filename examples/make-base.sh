#!/usr/bin/env bash
# Make the example's base image `csis-example/debian:12` on the local Docker
# daemon: a Debian 12 minbase root filesystem from debootstrap, imported with
# `docker import` (no registry needed). Does nothing when it exists.
set -euo pipefail
ref="${1:-csis-example/debian:12}"
if docker image inspect "$ref" >/dev/null 2>&1; then
  echo "base image $ref is present"; exit 0
fi
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
command -v debootstrap >/dev/null || {
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap
}
root=$(mktemp -d)
trap 'as_root rm -rf "$root"' EXIT
echo "debootstrap: Debian 12 minbase into $root (a minute or two)"
as_root debootstrap --variant=minbase --include=python3 bookworm "$root" >/dev/null
as_root tar -C "$root" -c . | docker import - "$ref" >/dev/null
echo "imported $ref"
