"""Where a new graph's first call goes, each run in a fresh process (issue 23's first-call target).

    python benchmarks/first_call.py [--runs 3] [--graph int4|chain|both] [--bytes 1048576]
                                    [--out first_call.json]

Each run is a new Python process (as a user's first call is) that times, in order:
- `import numpy`, then `import dmlgpu`;
- the device open (`dmlgpu.default_device()`: Vulkan instance and device, the on-disk
  pipeline cache read and handed to the driver);
- `compile_graph`: validating the graph and planning its dispatches in Python (specialization
  constants, SPIR-V module read);
- the inputs uploaded and outputs allocated;
- the first `execute`: binding checks and the prepared dispatch, whose pipeline creation (the
  shader module and vkCreateComputePipelines: the driver's compilation, or a hit in the
  pipeline cache) is reported apart from `device.pipeline_stats()["pipeline_seconds"]`;
- the first dispatch and its wait (`synchronize`; a CPU driver such as lavapipe compiles the
  pipeline's code here, at its first use);
- the graph's cache hit (`compile_graph` again + execute + wait);
- another new graph's first call in the same process (the same graph at twice the size: a new
  pipeline of the same module), and its pipeline creation: a first call once the process's
  first pipeline is paid (a driver may load its compiler then);
- the close (which writes the pipeline cache to disk).

Modes, each with the driver's own shader caches off (`MESA_SHADER_CACHE_DISABLE=true`,
`__GL_SHADER_DISK_CACHE=0`), so that dmlgpu's cache is what is measured:
- cold: `DMLGPU_CACHE_DIR` a new empty folder per run (nothing compiled before);
- disk: a folder that one earlier process (not timed) filled with the same graph.

Output: one JSON file (every run's phases, in seconds, and their medians per mode), and a table.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

GRAPHS = ("int4", "chain")
PHASES = ("import_numpy", "import_dmlgpu", "device_open", "compile_graph", "buffers", "execute_python",
          "pipeline_creation", "first_dispatch_wait", "first_call", "cache_hit", "next_graph_first_call",
          "next_graph_pipeline_creation", "close")


def child(graph: str, nbytes: int) -> dict:
    """One process's first call of `graph` (run with --child): phases in seconds."""
    times = {}
    start = time.perf_counter()
    import numpy as np
    times["import_numpy"] = time.perf_counter() - start
    mark = time.perf_counter()
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
    import dmlgpu
    from dmlgpu import Binding
    from graph_cases import int4_unpack, output_sizes, seven_step_chain
    times["import_dmlgpu"] = time.perf_counter() - mark

    mark = time.perf_counter()
    device = dmlgpu.default_device()
    times["device_open"] = time.perf_counter() - mark
    opened = device.pipeline_stats()

    rng = np.random.default_rng(0)

    def case(size):
        if graph == "int4":
            return int4_unpack(size), [rng.integers(0, 256, size, dtype=np.uint8)]
        n = size // 4
        return seven_step_chain(n), [rng.integers(0, 2**32, n, dtype=np.uint32) for _ in range(2)]

    desc, data = case(nbytes)
    first = time.perf_counter()
    compiled = device.compile_graph(desc)
    times["compile_graph"] = time.perf_counter() - first

    mark = time.perf_counter()
    ins = [Binding(device.upload(d)) for d in data]
    outs = [Binding(device.allocate(size, zero_fill=False)) for size in output_sizes(desc)]
    device.synchronize()
    times["buffers"] = time.perf_counter() - mark

    before = device.pipeline_stats()
    mark = time.perf_counter()
    compiled.execute(ins, outs)
    executed = time.perf_counter()
    after = device.pipeline_stats()
    times["pipeline_creation"] = after["pipeline_seconds"] - before["pipeline_seconds"]
    times["execute_python"] = executed - mark - times["pipeline_creation"]
    device.synchronize()
    done = time.perf_counter()
    times["first_dispatch_wait"] = done - executed
    times["first_call"] = done - first - times["buffers"]  # compile + execute + wait

    mark = time.perf_counter()
    device.compile_graph(desc).execute(ins, outs)
    device.synchronize()
    times["cache_hit"] = time.perf_counter() - mark

    # Another new graph in the same process (the same module at twice the size: a new pipeline),
    # its buffers made first: what a first call costs once the process's first one is paid.
    desc, data = case(2 * nbytes)
    ins = [Binding(device.upload(d)) for d in data]
    outs = [Binding(device.allocate(size, zero_fill=False)) for size in output_sizes(desc)]
    device.synchronize()
    made = device.pipeline_stats()["pipeline_seconds"]
    mark = time.perf_counter()
    device.compile_graph(desc).execute(ins, outs)
    device.synchronize()
    times["next_graph_first_call"] = time.perf_counter() - mark
    times["next_graph_pipeline_creation"] = device.pipeline_stats()["pipeline_seconds"] - made

    mark = time.perf_counter()
    device.close()
    times["close"] = time.perf_counter() - mark
    return {"times": times, "pipelines_at_open": opened["pipelines_created"],
            "pipelines_before_execute": before["pipelines_created"],
            "pipelines_made_by_execute": after["pipelines_created"] - before["pipelines_created"],
            "disk_cache_status_at_open": opened["status"], "device": device.name, "driver": device.driver}


def run_child(graph: str, nbytes: int, cache_dir: str) -> dict:
    env = dict(os.environ, DMLGPU_CACHE_DIR=cache_dir, MESA_SHADER_CACHE_DISABLE="true", __GL_SHADER_DISK_CACHE="0")
    start = time.perf_counter()
    done = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", graph, "--bytes", str(nbytes)],
                          env=env, capture_output=True, text=True, timeout=600)
    wall = time.perf_counter() - start
    if done.returncode:
        raise RuntimeError(f"child failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["times"]["process_wall"] = wall
    return result


def median(values):
    values = sorted(values)
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="fresh processes per graph and mode")
    parser.add_argument("--graph", choices=(*GRAPHS, "both"), default="both")
    parser.add_argument("--bytes", type=int, default=1 << 20, help="bytes of the graph's first input")
    parser.add_argument("--out", default="first_call.json")
    parser.add_argument("--child", choices=GRAPHS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.bytes)))
        return 0
    graphs = GRAPHS if args.graph == "both" else (args.graph,)
    report = {"bytes": args.bytes, "runs": args.runs, "results": {}}
    with tempfile.TemporaryDirectory(prefix="dmlgpu-first-call-") as tmp:
        for graph in graphs:
            filled = os.path.join(tmp, f"{graph}-disk")
            run_child(graph, args.bytes, filled)  # fills the disk cache (not timed)
            for mode in ("cold", "disk"):
                runs = []
                for r in range(args.runs):
                    folder = os.path.join(tmp, f"{graph}-cold-{r}") if mode == "cold" else filled
                    runs.append(run_child(graph, args.bytes, folder))
                phases = {p: median([run["times"][p] for run in runs]) for p in (*PHASES, "process_wall")}
                report["device"], report["driver"] = runs[0]["device"], runs[0]["driver"]
                report["results"][f"{graph} {mode}"] = {"median_seconds": phases, "runs": runs}
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)
    print(f"{report['device']} ({report['driver']}), {args.bytes} bytes, median of {args.runs} processes, ms")
    names = list(report["results"])
    print(f"{'phase':30s}" + "".join(f"{n:>14s}" for n in names))
    for phase in (*PHASES, "process_wall"):
        print(f"{phase:30s}" + "".join(f"{1e3 * report['results'][n]['median_seconds'][phase]:14.1f}" for n in names))
    for n in names:
        run = report["results"][n]["runs"][0]
        print(f"{n}: pipelines at open {run['pipelines_at_open']}, before execute {run['pipelines_before_execute']}, "
              f"made by execute {run['pipelines_made_by_execute']}; "
              f"disk cache at open: {run['disk_cache_status_at_open']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
