#!/usr/bin/env bash
# The original cs-image-system 0.1.1's dry-run emission of one of its AWS
# starters, made here at test time against the test's moto, the way
# ../shared/reference/cs-image-system-0.1.1-emission/standard-aws-on-moto was
# made (the reference holds that one starter only):
#
#   tests/support/original_emission.sh STARTER OUTDIR   # standard-aws, standard-aws-posix, complete
#   tests/support/original_emission.sh --install        # the venv only (.ci/run)
#
# The original comes from PyPI (`cs-image-system==0.1.1`, every plugin, Python
# 3.13) into a venv kept at $CSIS_ORIGINAL_VENV (default
# /var/tmp/csis-original-venv), made once and reused. The starter is copied
# from $CSIS_REFERENCE (default ../shared/reference of the repository), its
# REPLACE-ME ids swapped for ids made in moto ($CSIS_MOTO_URL, required); the
# `complete` starter is first derived to what 0.1.1 can dry-run offline
# (tests/support/original_emission.py `derive` says what goes and why). The
# original runs `run --all` (dry) with a clean environment: every AWS
# endpoint is moto, any other HTTP(S) goes to a dead proxy, the starter's
# TEST age identity from the wheel, the `TF_VAR_<team>_key/_secret` pair its
# okta builders ask for at load, and stand-in aws, packer, tofu,
# ansible-playbook, docker, yq and jq that only answer their version.
#
# OUTDIR/input     the tree as both tools get it (ids swapped; never run in)
# OUTDIR/original  the copy the original ran in: its generated/, meta-state/
# OUTDIR/ids       `placeholder id` lines
# OUTDIR/identity  the starter's TEST age identity
# OUTDIR/aws       the profile files (config, credentials) naming moto's keys
# OUTDIR/bin       the stand-ins
# OUTDIR/log       what the original printed
# Exit 0 when the original's run completed; 3 when the original cannot be
# installed here (no Python 3.13, PyPI out of reach); 1 when its run failed;
# 2 on a wrong call. The reason on stderr.
set -euo pipefail
[ -z "${CSIS_ORIGINAL_TRACE:-}" ] || set -x
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="${CSIS_ORIGINAL_VENV:-/var/tmp/csis-original-venv}"
version=0.1.1

python313() {
  local c
  for c in "${CSIS_ORIGINAL_PYTHON:-}" python3.13 \
    "$(pyenv root 2>/dev/null || echo /nonexistent)"/versions/3.13*/bin/python3; do
    [ -n "$c" ] || continue
    if "$c" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 13))' 2>/dev/null; then
      command -v "$c"; return 0
    fi
  done
  echo "no Python 3.13 (python3.13 on PATH, pyenv's 3.13, or CSIS_ORIGINAL_PYTHON): cs-image-system $version needs it" >&2
  return 1
}

ready() { [ -f "$venv/.csis-ready-$version" ] && [ -x "$venv/bin/cs-image-system" ]; }

install() {
  ready && return 0
  local py; py="$(python313)" || return 3
  mkdir -p "$(dirname "$venv")" || return 3
  # one installer at a time; the mark is written last, so a half-made venv
  # (an interrupted install) is made again, never used
  exec 9>"$venv.lock"
  flock 9
  if ! ready; then
    rm -rf "$venv"
    "$py" -m venv "$venv" >&2 || return 3
    "$venv/bin/python" -m pip install -q "cs-image-system==$version" >&2 || return 3
    touch "$venv/.csis-ready-$version"
  fi
  exec 9>&-
}

if [ "${1:-}" = --install ]; then install || exit 3; exit 0; fi
[ $# -eq 2 ] || { echo "usage: $0 STARTER OUTDIR | --install" >&2; exit 2; }
starter="$1"; out="$2"
url="${CSIS_MOTO_URL:?CSIS_MOTO_URL, the moto of the test, is not set}"
case "$url" in http://127.0.0.1:*|http://localhost:*|http://\[::1\]:*) ;;
  *) echo "CSIS_MOTO_URL must be a loopback address, not $url" >&2; exit 2;; esac
reference="${CSIS_REFERENCE:-$here/../../../shared/reference}"
src="$reference/cs-image-system-0.1.1-starters/$starter"
[ -d "$src" ] || { echo "no starter $src" >&2; exit 2; }
install || { echo "cs-image-system $version cannot be installed into $venv" >&2; exit 3; }
py="$venv/bin/python"
site="$("$py" -c 'import cs_image_system.system as s, os; print(os.path.dirname(s.__file__))')"

rm -rf "$out"; mkdir -p "$out/bin" "$out/aws"
cp -R "$src" "$out/input"; chmod -R u+w "$out/input"
cp "$site/starters/$starter/.age-identity" "$out/identity"
printf '[profile REPLACE-ME-profile]\nregion = us-east-2\n' >"$out/aws/config"
printf '[REPLACE-ME-profile]\naws_access_key_id = testing\naws_secret_access_key = testing\n' >"$out/aws/credentials"

# the stand-ins: the version each executables.yml floor accepts, nothing else
standin() {
  printf '#!/bin/sh\n[ "$1" = %s ] && echo %s\nexit 0\n' "$2" "'$3'" >"$out/bin/$1"
  chmod +x "$out/bin/$1"
}
standin packer version '1700000000,,version,1.14.2'
standin tofu --version '{"terraform_version":"1.10.6"}'
standin aws --version 'aws-cli/2.32.0 Python/3.13.0 Linux'
standin ansible-playbook --version 'ansible-playbook [core 2.18.1]'
standin docker --version 'Docker version 27.0.0, build standin'
standin yq --version 'yq (https://github.com/mikefarah/yq/) version v4.44.0'
standin jq --version 'jq-1.7.1'
ln -s "$(command -v bash)" "$out/bin/bash"

if [ "$starter" = complete ]; then
  "$py" "$here/original_emission.py" derive "$out/input"
  # the absolute /usr/local/bin/<tool> of its executables.yml: the stand-ins
  sed -i "s|/usr/local/bin/|$out/bin/|" "$out/input/cfg/executables.yml"
fi
"$py" "$here/original_emission.py" ids "$starter" "$url" >"$out/ids"
# the ids live in cfg/ (the runtimes' networking, the fixed AMI)
while read -r k v; do
  sed -i "s|$k\\b|$v|g" "$out"/input/cfg/*.yml
done <"$out/ids"

cp -R "$out/input" "$out/original"
cd "$out/original"
if env -i PATH="$out/bin:$venv/bin:/usr/bin:/bin" HOME="$out" LANG=C.UTF-8 \
  AWS_ENDPOINT_URL="$url" AWS_EC2_METADATA_DISABLED=true \
  AWS_CONFIG_FILE="$out/aws/config" AWS_SHARED_CREDENTIALS_FILE="$out/aws/credentials" \
  CSIS_AWS_DIR="$out/aws" \
  HTTP_PROXY=http://127.0.0.1:9 HTTPS_PROXY=http://127.0.0.1:9 \
  http_proxy=http://127.0.0.1:9 https_proxy=http://127.0.0.1:9 \
  NO_PROXY=127.0.0.1,localhost no_proxy=127.0.0.1,localhost \
  CSIS_CONFIG_IDENTITY="$out/identity" \
  TF_VAR_replace_me_team_key=standin TF_VAR_replace_me_team_secret=standin \
  cs-image-system --root-dir . run --all >"$out/log" 2>&1; then
  exit 0
fi
echo "cs-image-system $version's dry run of $starter failed (its log: $out/log):" >&2
tail -5 "$out/log" >&2
exit 1
