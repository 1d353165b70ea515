#!/usr/bin/env python3
"""`csis plan //... --json` of two csis binaries side by side, alternating,
on a tree of `cargo bench --bench noop -- --tree DIR N` (which writes
DIR-ninja beside it), and ninja's no-op on the same graph: median wall and
CPU (user + system) milliseconds.

    benches/plan_vs_ninja.py BEFORE AFTER DIR RUNS

Per run: BEFORE (on a copy of DIR, DIR-before, its own parse cache warm); AFTER with its parse cache (.csis/cache/parse.bin) warm;
AFTER after one image file of 100 images changed (a comment added or
removed); AFTER with the parse cache removed (it parses every file and
writes the cache again); ninja -C DIR-ninja.
"""
import os, statistics, subprocess, sys, time

before, after, tree, runs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
ninja_dir = tree + "-ninja"
wall, cpu = {}, {}


def timed(key, cmd):
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    assert status == 0, cmd
    wall.setdefault(key, []).append((time.perf_counter() - t0) * 1000)
    cpu.setdefault(key, []).append((ru.ru_utime + ru.ru_stime) * 1000)


plan = ["-C", tree, "plan", "//...", "--json"]
# BEFORE plans a copy of its own: two binaries whose parse caches differ in
# form would each find the other's cache unreadable and parse every file
before_tree = tree + "-before"
if not os.path.isdir(before_tree):
    subprocess.run(["cp", "-a", tree, before_tree], check=True)
    subprocess.run(["rm", "-f", os.path.join(before_tree, ".csis/cache/parse.bin")], check=True)
before_plan = ["-C", before_tree, "plan", "//...", "--json"]
subprocess.run([before] + before_plan, stdout=subprocess.DEVNULL, check=True)
edited = os.path.join(tree, "images/part-0000.yaml")
text = open(edited).read()
cache = os.path.join(tree, ".csis/cache/parse.bin")
subprocess.run([after] + plan, stdout=subprocess.DEVNULL, check=True)
for r in range(runs):
    timed("before", [before] + before_plan)
    timed("after", [after] + plan)
    open(edited, "w").write(text + ("# edited\n" if r % 2 == 0 else ""))
    timed("after, one file edited", [after] + plan)
    if os.path.exists(cache):
        os.remove(cache)
    timed("after, no parse cache", [after] + plan)
    timed("ninja", ["ninja", "-C", ninja_dir])
open(edited, "w").write(text)
print(f"{tree}: {runs} runs, load average {' '.join(open('/proc/loadavg').read().split()[:3])}")
nw, nc = statistics.median(wall["ninja"]), statistics.median(cpu["ninja"])
for k in wall:
    w, c = statistics.median(wall[k]), statistics.median(cpu[k])
    print(f"  {k:24s} wall {w:7.1f} ms (x{w / nw:.2f} ninja)   cpu {c:7.1f} ms (x{c / nc:.2f} ninja)")
