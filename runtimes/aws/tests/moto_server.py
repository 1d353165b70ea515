"""moto's server for the csis-runtime-aws tests (started by moto.sh).

moto 5.2.1 parses the CreationDate of every MOTO_AMIS_PATH entry in place, so
the second EC2 backend it builds (a reset, another region or account) fails
with "Parser must be a string ... not datetime" and answers HTTP 500 from then
on. moto >= 5.2.5 checks for that itself; for older ones this wrapper makes the
parse idempotent, then runs moto's own server main()."""
import sys

try:
    import moto.ec2.models.amis as _amis

    _orig = _amis.parse_timestamp

    def _parse_once(value):
        return _orig(value) if isinstance(value, str) else value

    _amis.parse_timestamp = _parse_once
except Exception as e:  # an unexpected moto layout: run it unpatched
    print(f"moto_server.py: not patched ({e})", file=sys.stderr)

from moto.server import main

if __name__ == "__main__":
    sys.exit(main())
