#!/usr/bin/env bash
# Instructions `csis watch` spends per edit, inside `Watcher::replan` (the
# main thread), under valgrind:
#
#   benches/watch_callgrind.sh CSIS TREE OUT
#
# TREE as for benches/watch_e2e.sh (`cargo bench --bench noop -- --tree
# TREE 5000`). Three edits of img-2500's script, each renamed over
# images/part-0025.yaml once the watcher printed the last change; prints
# callgrind's total (divide by 3). `callgrind_annotate --inclusive=yes OUT`
# says where they went.
set -euo pipefail
bin=$1 tree=$2 out=$3
file="$tree/images/part-0025.yaml"
orig=$(mktemp)
log=$(mktemp)
cp "$file" "$orig"
trap 'cp "$orig" "$file"; rm -f "$orig" "$log"' EXIT
valgrind --tool=callgrind --toggle-collect='csis_ops::watch::Watcher::replan*' \
  --callgrind-out-file="$out" "$bin" -C "$tree" watch //... --exit-after 3 >"$log" 2>&1 &
pid=$!
for _ in $(seq 1 1200); do grep -q watching "$log" && break; sleep 0.5; done
sleep 2
for i in 1 2 3; do
  n=$(grep -c changed "$log" || true)
  sed "s|echo 2500 > /etc/img|echo 2500 edit-$((i % 2)) > /etc/img|" "$orig" >"$file.tmp"
  mv "$file.tmp" "$file"
  for _ in $(seq 1 600); do [ "$(grep -c changed "$log" || true)" -gt "$n" ] && break; sleep 0.5; done
  sleep 2
done
wait $pid
grep '^summary' "$out"
