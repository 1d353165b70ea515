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
#
# Each line the watcher prints is stamped when it arrives, by bash's
# `$EPOCHREALTIME` in a `read` loop on its stdout (no process started per
# line), and the rename by the same clock; nothing polls while the watcher
# works (the script sleeps through each edit and reads the stamps after),
# so the measurement takes no core from the watcher on a 2-core machine.
# (Before 2026-12-05 this script polled the output with `tail | grep`
# every 2 ms, two processes per poll, which competed with the watcher.)
set -euo pipefail
bin=$1 tree=$2 edits=${3:-6}
file="$tree/images/part-0025.yaml"
orig=$(mktemp)
cp "$file" "$orig"
out=$(mktemp)
stamp() { while IFS= read -r line; do printf '%s %s\n' "$EPOCHREALTIME" "$line"; done; }
fifo=$(mktemp -u)
mkfifo "$fifo"
stamp <"$fifo" >"$out" &
CSIS_TIMING=1 RUST_LOG=info "$bin" -C "$tree" watch //... >"$fifo" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; cp "$orig" "$file"; rm -f "$orig" "$out" "$fifo"' EXIT
# the first plan
for _ in $(seq 1 600); do
  grep -q 'watching' "$out" 2>/dev/null && break
  sleep 0.1
done
sleep 1
for i in $(seq 1 "$edits"); do
  n=$(wc -l <"$out")
  # img-2500's script (the noop tree's images run `echo N > /etc/img`)
  sed "s|echo 2500 > /etc/img|echo 2500 edit-$((i % 2)) > /etc/img|" "$orig" >"$file.tmp"
  t0=$EPOCHREALTIME
  mv "$file.tmp" "$file"
  sleep 3
  t1=$(tail -n +"$((n + 1))" "$out" | grep -m1 -E '^[0-9.]+ changed' | cut -d' ' -f1 || true)
  if [ -z "$t1" ]; then echo "edit $i: no change printed within 3 s"; continue; fi
  echo "edit $i: $(python3 -c "print(round(($t1 - $t0) * 1000, 1))") ms from the rename to the printed change"
done
echo "--- the watcher's output"
grep -E 'timing|changed' "$out" | tail -n $((edits * 4)) | cut -d' ' -f2-
echo "RSS: $(ps -o rss= -p $pid) KiB"
