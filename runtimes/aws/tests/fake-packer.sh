#!/bin/sh
# Stand-in for the packer executable in the bake tests (the only thing not
# talking to moto): checks its arguments and environment, and on `build`
# writes the manifest naming the AMI the test registered in moto
# ($CSIS_FAKE_AMI), the way packer's manifest post-processor does.
set -eu
[ -n "${CSIS_FAKE_PACKER_LOG:-}" ] && echo "$*" >> "$CSIS_FAKE_PACKER_LOG"
if [ "$#" -eq 3 ] && [ "$1" = build ] && [ "$2" = "-on-error=abort" ]; then
  # csis build --keep-failed: the builder instance is left standing
  shift 2; set -- build "$@"
fi
if [ "$#" -ne 2 ] || [ "$2" != "." ]; then
  echo "fake-packer: expected '<command> .', got: $*" >&2; exit 64
fi
ls ./*.pkr.hcl >/dev/null 2>&1 || { echo "fake-packer: no *.pkr.hcl in $(pwd)" >&2; exit 65; }
case "$1" in
  init|validate) echo "fake-packer: $1 ok" ;;
  build)
    if [ -n "${CSIS_FAKE_SLEEP:-}" ]; then
      trap 'echo "fake-packer: interrupted, cleaning up" >&2; exit 130' INT
      sleep "$CSIS_FAKE_SLEEP" & wait $!
    fi
    if [ -n "${CSIS_FAKE_FAIL:-}" ]; then echo "fake-packer: build failed on purpose" >&2; exit 1; fi
    grep -q 'post-processor "manifest"' ./*.pkr.hcl || { echo "fake-packer: no manifest post-processor" >&2; exit 66; }
    [ "${AWS_REGION:-}" = "us-east-2" ] || { echo "fake-packer: AWS_REGION is '${AWS_REGION:-}'" >&2; exit 67; }
    # the owner mark of run_tags (clean_stale_bakes): <host>:<pid> of csis
    case "${PKR_VAR_csis_bake_owner:-}" in
      *:[0-9]*) ;;
      *) echo "fake-packer: PKR_VAR_csis_bake_owner is '${PKR_VAR_csis_bake_owner:-}'" >&2; exit 68 ;;
    esac
    echo "==> amazon-ebs: AMI: $CSIS_FAKE_AMI"
    printf '{"builds":[{"name":"old","builder_type":"amazon-ebs","artifact_id":"%s:ami-0000000000000old0","packer_run_uuid":"u0"},{"name":"x","builder_type":"amazon-ebs","artifact_id":"%s:%s","packer_run_uuid":"u1"}],"last_run_uuid":"u1"}\n' \
      "$AWS_REGION" "$AWS_REGION" "$CSIS_FAKE_AMI" > manifest.json
    ;;
  *) echo "fake-packer: unexpected command $1" >&2; exit 64 ;;
esac
