#!/usr/bin/env bash
# Wall time of 1, 2, 4, 8 concurrent `csis build`s of disjoint subtrees on one
# tree whose records live on a shared store (moto's S3), each bake a dummy
# bake of a fixed duration; and the store requests per build (each build's
# `store_requests` notice). Beside it the same builds with
# `meta_state: local`, where the tree lock serializes them.
#
# Then one runner building the 8 subtrees in one build (`-j 8`) beside 8
# runners building one each, on the store: wall times of RUNS runs each,
# alternating (issue 23: "one runner as fast as eight").
#
#   CSIS=target/debug/csis CSIS_MOTO_URL=http://127.0.0.1:5613 benches/shared_store.sh [BAKE_SECONDS] [RUNS]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
csis="${CSIS:-$here/target/debug/csis}"
moto="${CSIS_MOTO_URL:-http://127.0.0.1:5000}"
secs="${1:-2}"
runs="${2:-3}"
export AWS_ENDPOINT_URL="$moto" AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_REGION=us-east-1

tree() { # tree DIR STORE
  local d="$1"
  cp -r "$here/tests/fixtures/graph/basic/." "$d/"
  rm -f "$d/playbooks/web.yml" "$d/scripts/app.sh"
  printf 'os_builders:\n  - name: deb12\n    type: debian\n    family: debian\n    family_version: "12"\n    is_default: true\n    runtimes:\n      - image_builder: sim-bake\n' >"$d/cfg/os-builders.yml"
  printf 'runtime_builders:\n  - name: sim\n    type: dummy\n    is_default: true\n    default_machine_type: small\n    bake_seconds: %s\n' "$secs" >"$d/cfg/runtime-builders.yml"
  { echo "images:"; for i in 0 1 2 3 4 5 6 7; do
      printf '  - name: a%s\n    source_image: deb12\n    runtimes: [{image_builder: sim-bake}]\n' "$i"; done; } >"$d/images/images.yaml"
  printf '\nmeta_state: %s\n' "$2" >>"$d/cfg/_config.yml"
}

# The requests each build sent to the store: its `store_requests` notice
# (a JSON line of the event stream under --json).
store_requests() {
  cat "$1"/out.* | grep '"notice":"store_requests"' | sed -n 's/.*"requests":\([0-9]*\).*/\1/p'
}

echo "| concurrent builds | store | wall time | store requests per build (mean, min-max) |"
echo "|---:|---|---:|---|"
for n in 1 2 4 8; do
  for kind in s3 local; do
    d="$(mktemp -d)"
    if [ "$kind" = s3 ]; then
      bucket="csis-bench-$$-$n"
      curl -fsS -X PUT "$moto/$bucket" >/dev/null
      tree "$d" "s3://$bucket/records"
    else
      tree "$d" local
    fi
    "$csis" -C "$d" build --json //os/deb12 >/dev/null 2>&1
    t0=$(date +%s.%N)
    pids=()
    for i in $(seq 0 $((n - 1))); do
      "$csis" -C "$d" build --json "//images/a$i" >"$d/out.$i" 2>"$d/err.$i" &
      pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p"; done
    t1=$(date +%s.%N)
    reqs="-"
    if [ "$kind" = s3 ]; then
      reqs=$(store_requests "$d" | sort -n |
        awk '{s+=$1; a[NR]=$1} END {printf "%.1f, %d-%d", s/NR, a[1], a[NR]}')
    fi
    baked=$(cat "$d"/out.* | grep -c '"event":"finished".*"kind":"bake"' || true)
    [ "$baked" = "$n" ] || { echo "expected $n bakes, got $baked" >&2; exit 1; }
    printf '| %d | %s | %.2f s | %s |\n' "$n" "$kind" "$(echo "$t1 - $t0" | bc)" "$reqs"
    rm -rf "$d"
  done
done

echo
echo "| runners | store | wall times | store requests (sum over the runners) |"
echo "|---|---|---|---:|"
one=() eight=() one_reqs="" eight_reqs=""
for r in $(seq 1 "$runs"); do
  for mode in one eight; do
    d="$(mktemp -d)"
    bucket="csis-bench-$$-$mode-$r"
    curl -fsS -X PUT "$moto/$bucket" >/dev/null
    tree "$d" "s3://$bucket/records"
    "$csis" -C "$d" build --json //os/deb12 >/dev/null 2>&1
    t0=$(date +%s.%N)
    if [ "$mode" = one ]; then
      "$csis" -C "$d" build --json -j 8 //images/a0 //images/a1 //images/a2 //images/a3 \
        //images/a4 //images/a5 //images/a6 //images/a7 >"$d/out.0" 2>"$d/err.0"
    else
      pids=()
      for i in 0 1 2 3 4 5 6 7; do
        "$csis" -C "$d" build --json "//images/a$i" >"$d/out.$i" 2>"$d/err.$i" &
        pids+=($!)
      done
      for p in "${pids[@]}"; do wait "$p"; done
    fi
    t1=$(date +%s.%N)
    baked=$(cat "$d"/out.* | grep -c '"event":"finished".*"kind":"bake"' || true)
    [ "$baked" = 8 ] || { echo "expected 8 bakes, got $baked" >&2; exit 1; }
    reqs=$(store_requests "$d" | awk '{s+=$1} END {print s}')
    w=$(printf '%.2f' "$(echo "$t1 - $t0" | bc)")
    if [ "$mode" = one ]; then one+=("$w"); one_reqs=$reqs; else eight+=("$w"); eight_reqs=$reqs; fi
    rm -rf "$d"
  done
done
printf '| 1 runner, 8 subtrees, -j 8 | s3 | %s s | %s |\n' "${one[*]}" "$one_reqs"
printf '| 8 runners, 1 subtree each | s3 | %s s | %s |\n' "${eight[*]}" "$eight_reqs"
