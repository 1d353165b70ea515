#!/usr/bin/env bash
# `csis watch` end to end: from an editor's save to the printed change.
#
#   benches/watch_e2e.sh CSIS TREE [EDITS]
#
# TREE is a converged tree of `cargo bench --bench noop -- --tree TREE 5000`
# (files of 100 images under images/part-NNNN.yaml). Starts `CSIS_TIMING=1
# csis -C TREE watch //...`, waits for its first plan, then makes EDITS
# (default 6) edits of img-2500's script 3 s apart, each written to a
# temporary file and renamed over images/part-0025.yaml (as editors save),
# and prints the watcher's timing lines and, per edit, the time from the
# rename to the line that says what changed (the watcher's own clock is in
# its timing lines; this one includes the OS's event and the print).
set -euo pipefail
bin=$1 tree=$2 edits=${3:-6}
file="$tree/images/part-0025.yaml"
orig=$(mktemp)
cp "$file" "$orig"
out=$(mktemp)
CSIS_TIMING=1 RUST_LOG=info "$bin" -C "$tree" watch //... >"$out" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; cp "$orig" "$file"; rm -f "$orig" "$out"' EXIT
# the first plan
for _ in $(seq 1 600); do
  grep -q 'watching' "$out" 2>/dev/null && break
  sleep 0.1
done
sleep 1
lines_before() { wc -l <"$out"; }
for i in $(seq 1 "$edits"); do
  n=$(lines_before)
  # img-2500's script (the noop tree's images run `echo N > /etc/img`)
  sed "s|echo 2500 > /etc/img|echo 2500 edit-$((i % 2)) > /etc/img|" "$orig" >"$file.tmp"
  t0=$(date +%s%N)
  mv "$file.tmp" "$file"
  for _ in $(seq 1 2000); do
    if tail -n +"$((n + 1))" "$out" | grep -q 'changed'; then break; fi
    sleep 0.002
  done
  t1=$(date +%s%N)
  echo "edit $i: $(((t1 - t0) / 1000000)) ms from the rename to the printed change"
  sleep 3
done
echo "--- the watcher's output"
grep -E 'timing|changed' "$out" | tail -n $((edits * 4))
echo "RSS: $(ps -o rss= -p $pid) KiB"
