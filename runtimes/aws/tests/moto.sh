#!/usr/bin/env bash
# Start moto's server for the csis-runtime-aws tests, unless something already
# answers on the port, then wait until it answers. Idempotent.
#
#   runtimes/aws/tests/moto.sh            # 127.0.0.1:${CSIS_MOTO_PORT:-5000}
#
# Needs moto's server (PyPI `moto[server]`): `moto_server` on PATH, or in
# $CSIS_MOTO_VENV/bin, or importable by python3 (`python3 -m moto.server`).
# The AMIs moto seeds are replaced by tests/fixtures/amis.json (MOTO_AMIS_PATH),
# which gives them distinct CreationDates (newest-wins) and vendor owners.
# The tests read CSIS_MOTO_URL (default http://127.0.0.1:5000).
set -euo pipefail
host=127.0.0.1
port="${CSIS_MOTO_PORT:-5000}"
url="http://$host:$port"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
log="${CSIS_MOTO_LOG:-${TMPDIR:-/tmp}/csis-moto-$port.log}"

answers() {
  if command -v curl >/dev/null 2>&1; then
    curl -fsS -o /dev/null --max-time 2 "$url/moto-api/" 2>/dev/null
  else
    (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null
  fi
}

if answers; then
  echo "moto: already answering on $url"
  exit 0
fi

# A python that has moto's server: python3, else $CSIS_MOTO_VENV, else the
# python behind `moto_server` on PATH. moto_server.py (beside this script)
# patches a moto 5.2.1 bug with MOTO_AMIS_PATH, then runs moto's main().
py=""
for cand in python3 "${CSIS_MOTO_VENV:+$CSIS_MOTO_VENV/bin/python}" /var/tmp/moto-venv/bin/python; do
  [ -n "$cand" ] || continue
  if "$cand" -c 'import moto.server' >/dev/null 2>&1; then py="$cand"; break; fi
done
if [ -z "$py" ] && command -v moto_server >/dev/null 2>&1; then
  shebang="$(head -1 "$(command -v moto_server)" | sed 's/^#! *//')"
  if $shebang -c 'import moto.server' >/dev/null 2>&1; then py="$shebang"; fi
fi
if [ -z "$py" ]; then
  echo "moto: no moto server found; install it with: pip install 'moto[server]'" >&2
  exit 1
fi
launch=("$py" "$here/moto_server.py")

export MOTO_AMIS_PATH="${MOTO_AMIS_PATH:-$here/fixtures/amis.json}"
export MOTO_ACCOUNT_ID="${MOTO_ACCOUNT_ID:-123456789012}"
nohup "${launch[@]}" -H "$host" -p "$port" >"$log" 2>&1 &
pid=$!
# Whoever started it may stop it (CI does, at exit).
if [ -n "${CSIS_MOTO_PIDFILE:-}" ]; then echo "$pid" >"$CSIS_MOTO_PIDFILE"; fi
echo "moto: started pid $pid on $url (log $log, MOTO_AMIS_PATH=$MOTO_AMIS_PATH)"

for _ in $(seq 1 150); do
  if answers; then
    echo "moto: answering on $url"
    exit 0
  fi
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "moto: server exited; last lines of $log:" >&2
    tail -20 "$log" >&2 || true
    exit 1
  fi
  sleep 0.2
done
echo "moto: not answering on $url after 30s; see $log" >&2
exit 1
