"""Command line: `python -m dmlgpu demo | bench | devices | table | worker | shaders (variants|abi|graph-abi)`, `--version`.

`demo`, `bench` and `table` (the user guide's operator section) live outside the library, in the
`dmlgpu_tools` package shipped beside it: they are imported only when asked for, so neither `import dmlgpu` nor the build's `shaders` step loads
them (nor the optional packages they use).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import __version__
from .kernels import graph_abi as graph_kernel, variants as kernels
from .api.device import devices


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dmlgpu")
    parser.add_argument("--version", action="version", version=f"dmlgpu {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="documents' examples, a cross-check and timings on the default device")
    sub.add_parser("devices", help="list Vulkan devices and say which is the default")
    sub.add_parser("bench", help="benchmarks against numpy, PyTorch and CuPy (see benchmarks/NOTES.md)",
                   add_help=False)
    table = sub.add_parser("table", help="the user guide's operator section (prose and table), printed from the operator table")
    table.add_argument("--readme", metavar="PATH", help="rewrite the section in this file (docs/guide/numpy.md) instead of printing it")
    sub.add_parser("worker", help="dask worker SCHEDULER with one worker process per device (needs .[dask])",
                   add_help=False)
    shaders = sub.add_parser("shaders", help="what the CMake shader build compiles")
    shaders.add_argument("what", choices=("variants", "abi", "graph-abi"))
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["bench"]:
        from dmlgpu_tools.bench import main as bench_main

        return bench_main(argv[1:])
    if argv[:1] == ["worker"]:
        from .dask import worker_main

        return worker_main(argv[1:])
    args = parser.parse_args(argv)

    if args.command == "shaders":
        texts = {"variants": kernels.variant_lines, "abi": kernels.abi_glsl, "graph-abi": graph_kernel.graph_abi_glsl}
        sys.stdout.write(texts[args.what]())
        return 0
    if args.command == "table":
        from dmlgpu_tools import readme

        if args.readme:
            readme.update(Path(args.readme))
        else:
            sys.stdout.write(readme.section())
        return 0
    if args.command == "devices":
        for d in devices():
            mark = "*" if d["default"] else " "
            print(f"{mark} {d['index']}: {d['name']} ({d['type']}, buffers up to {d['max_buffer_bytes']} bytes)")
        return 0
    from dmlgpu_tools.demo import run_demo

    return run_demo()


if __name__ == "__main__":
    sys.exit(main())
