#!/usr/bin/env bash
# Install csis and bake the example catalogue (examples/docker) on the local
# Docker daemon, then build again to show that nothing is due.
#   CSIS=/path/to/csis  use that binary instead of installing
#   WORK=DIR            where the example is copied to (default: a temp dir)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/csis-target}"
if [ -z "${CSIS:-}" ]; then
  # Only the docker runtime: no AWS SDK to compile, no s3/gs store client,
  # no Okta PAM client (`csis --version` lists what a binary carries; the
  # default features carry all).
  cargo install --locked --path "$repo" --no-default-features --features docker
  CSIS=$(command -v csis || echo "$HOME/.cargo/bin/csis")
fi
"$here/make-base.sh"
work="${WORK:-$(mktemp -d)/catalogue}"
rm -rf "$work"; mkdir -p "$(dirname "$work")"; cp -r "$here/docker" "$work"
echo "== the tree is in $work"
set -x
"$CSIS" -C "$work" validate
"$CSIS" -C "$work" plan //images/...
"$CSIS" -C "$work" build //images/...
"$CSIS" -C "$work" build //images/...       # converged: nothing is due
