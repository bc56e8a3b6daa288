#!/usr/bin/env python3
"""Old against new: compiled artifacts alternated, for a machine whose speed drifts.

Runs `tbc-bench` on each artifact in turn, ROUNDS times; each turn keeps the
fastest of --runs runs.  Prints, per artifact, the fastest and median turn and
the median over turns of its time divided by the first artifact's in the same
turn, which a drift of the machine's speed between turns cancels out of.

usage: .venv/bin/python bench/ab.py BUILD_DIR A.so B.so ... --inputs NAME=X.npy,... [--threads 1] [--rounds 10] [--runs 5]
"""
import argparse
import os
import statistics
import subprocess


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("artifacts", nargs="+")
    ap.add_argument("--inputs", required=True, help="comma-separated NAME=FILE.npy, as tbc-bench takes them")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    bench = os.path.join(a.build, "bench", "tbc-bench")
    times = [[] for _ in a.artifacts]
    for _ in range(a.rounds):
        for i, so in enumerate(a.artifacts):
            out = subprocess.run([bench, so, *a.inputs.split(","), "--threads", str(a.threads), "--runs", str(a.runs)],
                                 capture_output=True, text=True, check=True).stdout
            times[i].append(float(out.split("min_ms")[1].split()[0]))
    for so, t in zip(a.artifacts, times):
        ratios = [x / y for x, y in zip(t, times[0])]
        print(f"{so}: fastest {min(t):.3f} ms, median turn {statistics.median(t):.3f} ms, "
              f"median ratio to {a.artifacts[0]} {statistics.median(ratios):.3f} "
              f"(turns {min(ratios):.2f} .. {max(ratios):.2f})")


if __name__ == "__main__":
    main()
