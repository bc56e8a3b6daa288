"""Times `tbc compile MODEL -o x.so` for several tbc binaries, levels and
environment switches, the runs alternating, and prints the best and median
wall seconds of each (docs/performance.md, "Compile time").

  .venv/bin/python bench/compile_times.py --runs 3 --models build/dev/models \\
      base=/path/to/old/tbc new=build/dev/tbc --opt=-O2,-O1 resnet50 densenet121
  .venv/bin/python bench/compile_times.py new=build/dev/tbc --env TBC_SET_LANES=0 ...

A label=binary pair names each tbc; --env K=V (repeatable) adds a variant of
each binary with that switch set.  The rest are model names under --models.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--models", default="build/dev/models")
    ap.add_argument("--opt", default="-O2,-O1")
    ap.add_argument("--jobs", default="2")
    ap.add_argument("--env", action="append", default=[])
    ap.add_argument("items", nargs="+", help="label=tbc binaries, then model names")
    a = ap.parse_intermixed_args()
    tbcs = [i.split("=", 1) for i in a.items if "=" in i]
    models = [i for i in a.items if "=" not in i]
    if not tbcs or not models:
        sys.exit("compile_times.py: name at least one label=tbc and one model")
    envs = [("", {})] + [(e, dict([e.split("=", 1)])) for e in a.env]
    out = os.path.join(tempfile.mkdtemp(prefix="tbc-ctime-"), "x.so")
    times = {}
    for _ in range(a.runs):
        for m in models:
            for opt in a.opt.split(","):
                for label, tbc in tbcs:
                    for ename, extra in envs:
                        env = dict(os.environ, **extra)
                        t = time.time()
                        subprocess.run([tbc, "compile", os.path.join(a.models, m + ".onnx"), "-o", out, "--jobs", a.jobs, opt],
                                       env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                        times.setdefault((m, opt, label, ename), []).append(time.time() - t)
    for (m, opt, label, ename), v in times.items():
        v.sort()
        print(f"{m:16s} {opt} {label:8s} {ename:24s} best {v[0]:.2f} median {v[len(v) // 2]:.2f}")


if __name__ == "__main__":
    main()
