#!/usr/bin/env bash
# Install csis and bake the example catalogue (examples/docker) on the local
# Docker daemon, then build again to show that nothing is due.
#   CSIS=/path/to/csis  use that binary instead of installing
#   WORK=DIR            where the example is copied to (default: a temp dir)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/csis-target}"
# The base image is made while csis compiles (debootstrap waits on the
# network and the disk, the compile on the cores), its output shown once
# it is done; where sudo would ask for a password, after the compile.
base=""
if [ "$(id -u)" = 0 ] || sudo -n true 2>/dev/null; then
  base_log=$(mktemp)
  "$here/make-base.sh" >"$base_log" 2>&1 &
  base=$!
  trap 'kill "$base" 2>/dev/null || true' EXIT
fi
if [ -z "${CSIS:-}" ]; then
  # Only the docker runtime: no AWS SDK to compile, no s3/gs store client,
  # no Okta PAM client (`csis --version` lists what a binary carries; the
  # default features carry all).
  cargo install --locked --path "$repo" --no-default-features --features docker
  CSIS=$(command -v csis || echo "$HOME/.cargo/bin/csis")
fi
if [ -z "$base" ]; then
  "$here/make-base.sh"
elif wait "$base"; then
  cat "$base_log"; rm -f "$base_log"
else
  cat "$base_log" >&2; rm -f "$base_log"
  echo "making the base image failed (examples/make-base.sh)" >&2; exit 1
fi
trap - EXIT
work="${WORK:-$(mktemp -d)/catalogue}"
rm -rf "$work"; mkdir -p "$(dirname "$work")"; cp -r "$here/docker" "$work"
echo "== the tree is in $work"
set -x
"$CSIS" -C "$work" validate
"$CSIS" -C "$work" plan //images/...
"$CSIS" -C "$work" build //images/...
"$CSIS" -C "$work" build //images/...       # converged: nothing is due
