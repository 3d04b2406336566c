"""Command line: `python -m dmlgpu demo | bench | devices | worker | shaders (variants|abi)`."""
from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dmlgpu")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="documents' examples, a cross-check and timings on the default device")
    sub.add_parser("devices", help="list Vulkan devices and say which is the default")
    sub.add_parser("bench", help="benchmarks against numpy, PyTorch and CuPy (see benchmarks/NOTES.md)",
                   add_help=False)
    sub.add_parser("worker", help="dask worker SCHEDULER with one worker process per device (needs .[dask])",
                   add_help=False)
    shaders = sub.add_parser("shaders", help="what the CMake shader build compiles")
    shaders.add_argument("what", choices=("variants", "abi"))
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["bench"]:
        from .bench import main as bench_main

        return bench_main(argv[1:])
    if argv[:1] == ["worker"]:
        from .dask import worker_main

        return worker_main(argv[1:])
    args = parser.parse_args(argv)

    if args.command == "shaders":
        from . import kernels

        sys.stdout.write(kernels.variant_lines() if args.what == "variants" else kernels.abi_glsl())
        return 0
    if args.command == "devices":
        from .device import DEVICE_TYPES, default_device

        device = default_device()
        for i, props in enumerate(device._manager.list_devices()):
            mark = "*" if i == device.index else " "
            print(f"{mark} {i}: {props['device_name']} ({DEVICE_TYPES.get(props['device_type'], '?')})")
        return 0
    from .demo import run_demo

    return run_demo()


if __name__ == "__main__":
    sys.exit(main())
