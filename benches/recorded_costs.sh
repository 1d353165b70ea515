#!/usr/bin/env bash
# The scheduler's cost of a bake from the records (issue 23, item 7), on the
# Docker daemon: the makespan of `csis build -j 2 --force-bake all` of a
# catalogue whose bakes take known times, with the records' `bake_seconds`
# (the scheduler runs the longest remaining path first, in seconds) and with
# them stripped from `meta-state/lineage.yaml` (every bake then costs the
# runtime type's default, so the longest path counts bakes, not seconds).
#
#   CSIS=/path/to/csis benches/recorded_costs.sh [RUNS]
#
# The catalogue (examples/docker's configuration, its base image from
# examples/make-base.sh): `z-long` (a shell mod sleeping 16 s), a chain
# `a-1` -> `a-2` -> `a-3` (1 s each) and `b-1`, `b-2`, `b-3` (1 s each),
# all on the vendor base. Counted in bakes, the chain is the longest path;
# in seconds, `z-long` is. Prints each build's wall time and the bound
# max(longest path, total / 2) from the bake_seconds the build recorded.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
csis="${CSIS:-csis}"
runs="${1:-3}"
"$here/examples/make-base.sh" >/dev/null
work=$(mktemp -d)
# the work tree and the images its builds tagged go when the bench ends
trap 'rm -rf "$work"; docker images -q csis-bench/costs | sort -u | xargs -r docker rmi -f >/dev/null 2>&1 || true' EXIT
cp -r "$here/examples/docker/." "$work/"
sed -i 's|repository: csis-example/local|repository: csis-bench/costs|' "$work/cfg/runtime-builders.yml"
img() { # img NAME SOURCE SECONDS
  printf '  - name: %s\n    source_image: %s\n    parent_policy: follow\n    runtimes: [{image_builder: native}]\n    modifications:\n      - name: wait\n        script: ["sleep %s"]\n' "$1" "$2" "$3"
}
{
  echo "images:"
  img z-long debian-12 16
  img a-1 debian-12 1
  img a-2 a-1 1
  img a-3 a-2 1
  img b-1 debian-12 1
  img b-2 debian-12 1
  img b-3 debian-12 1
} >"$work/images/catalogue.yaml"
"$csis" -C "$work" build //images/... >/dev/null
bound() { # from the last record of each series
  /usr/bin/python3 - "$work/meta-state/lineage.yaml" <<'EOF'
import sys, yaml
builds = yaml.safe_load(open(sys.argv[1]))["builds"]
last = {}
for b in builds:
    if b.get("bake_seconds") is not None:
        last[b["series"]] = b["bake_seconds"]
base = last.get("debian-12", 0.0)
chain = base + last["a-1"] + last["a-2"] + last["a-3"]
longest = max(chain, base + last["z-long"], base + max(last[f"b-{i}"] for i in (1, 2, 3)))
total = sum(last.values())
# the base bakes alone, then the images share two slots
bound = max(longest, base + (total - base) / 2)
print(f"{bound:.1f}")
EOF
}
strip_costs() { # drop every record's bake_seconds (often the first key of its item)
  /usr/bin/python3 - "$1" <<'EOF'
import re, sys
out, lift = [], False
for line in open(sys.argv[1]):
    if re.match(r"^- bake_seconds:", line):
        lift = True
        continue
    if re.match(r"^\s+bake_seconds:", line):
        continue
    if lift:
        line = "- " + line[2:]
        lift = False
    out.append(line)
open(sys.argv[1], "w").write("".join(out))
EOF
}
build() {
  local t0 t1
  t0=$(date +%s.%N)
  "$csis" -C "$work" build -j 2 --force-bake all //images/... >/dev/null
  t1=$(date +%s.%N)
  python3 -c "print(f'{$t1 - $t0:.1f}')"
}
for r in $(seq 1 "$runs"); do
  w=$(build); b=$(bound)
  echo "run $r, recorded costs:  makespan ${w} s, bound ${b} s, ratio $(python3 -c "print(round($w / $b, 3))")"
  strip_costs "$work/meta-state/lineage.yaml"
  w=$(build); b=$(bound)
  echo "run $r, no recorded cost: makespan ${w} s, bound ${b} s, ratio $(python3 -c "print(round($w / $b, 3))")"
done
