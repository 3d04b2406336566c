"""Repeat the Ctrl-C loop probe (tests/runtime/test_interrupts.py LOOP) many times, 8 at once;
report every failure with its output (faulthandler dumps the threads at 50 s)."""
import os, subprocess, sys, time, textwrap
from concurrent.futures import ThreadPoolExecutor
W = sys.argv[1]; reps = int(sys.argv[2]); outdir = sys.argv[3]
sys.path.insert(0, os.path.join(W, "tests", "runtime")); sys.path.insert(0, os.path.join(W, "tests"))
import importlib.util
spec = importlib.util.spec_from_file_location("ti", os.path.join(W, "tests/runtime/test_interrupts.py"))
src = open(os.path.join(W, "tests/runtime/test_interrupts.py")).read()
start = src.index('LOOP = """') + len('LOOP = """'); LOOP = src[start:src.index('"""', start)]
configs = [("dmlgpu's handler", "setitimer", "0"), ("dmlgpu's handler", "thread", "0"), ("program's own", "setitimer", "0"), ("default put back", "setitimer", "1")]
def one(i):
    setup, source, staging = configs[i % len(configs)]
    code = "import faulthandler; faulthandler.dump_traceback_later(50, exit=True)\n" + textwrap.dedent(LOOP.format(setup=setup, source=source, seconds=3))
    t = time.time()
    try:
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd="/", env={**os.environ, "DMLGPU_STAGING": staging})
        rc, so, se = r.returncode, r.stdout, r.stderr
    except subprocess.TimeoutExpired as e:
        rc, so, se = "timeout", str(e.stdout), str(e.stderr)
    dt = time.time() - t
    good = rc == 0 and so.startswith("ok")
    if not good:
        open(os.path.join(outdir, f"cc-fail-{i}.txt"), "w").write(f"{configs[i % len(configs)]} rc={rc} {dt:.1f}s\n{so}\n{se}")
    return i, good, dt, so.strip()[:40]
with ThreadPoolExecutor(8) as ex:
    res = list(ex.map(one, range(reps)))
bad = [r for r in res if not r[1]]
print(f"{len(res)} runs, {len(bad)} failed; times {min(r[2] for r in res):.1f}-{max(r[2] for r in res):.1f} s")
for r in bad: print("FAILED", r)
