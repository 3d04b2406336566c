"""Where a 16 MiB NOT's time goes on a CPU driver (lavapipe), with numpy in the same run
(issue 12; benchmarks/NOTES.md, "lavapipe (issue 12)").

Times issue 12's three comparisons, then the flat NOT kernel that dmlgpu runs against small
kernels compiled here (glslangValidator) that isolate the driver's costs: an empty kernel
(invocation overhead), stores only, loads only, and a plain 16-byte-vector NOT, each over
workgroup sizes and grids. Kernel times are the device's timestamps (`time_dispatches`).

    python benchmarks/lavapipe_breakdown.py [MiB]
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

import dmlgpu
from dmlgpu.kernels import variants as kernels, spirv
from dmlgpu_tools.bench import wall_seconds
from dmlgpu.runtime import Program

HEAD = """#version 450
layout(local_size_x_id = 0) in;
layout(push_constant) uniform Params { uint in_offset0; uint in_offset1; uint out_offset; uint count; } p;
layout(std430, binding = 0) readonly buffer In0Vecs { uvec4 in0_v[]; };
layout(std430, binding = 1) buffer OutVecs { uvec4 out_v[]; };
layout(std430, binding = 1) buffer OutWords { uint out_w[]; };
uint unit() { return (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * gl_WorkGroupSize.x
                     + gl_LocalInvocationID.x; }
"""
KERNELS = {  # one 16-byte unit per invocation, exact grid
    "empty": "void main() { if (unit() == 0xFFFFFFFFu) out_w[0] = 1u; }",
    "stores only": "void main() { uint u = unit(); out_v[p.out_offset / 4u + u] = uvec4(u); }",
    "loads only": "void main() { uvec4 v = in0_v[p.in_offset0 / 4u + unit()];"
                  " if (v == uvec4(1u, 2u, 3u, 4u)) out_w[0] = 1u; }",
    "plain NOT": "void main() { uint u = unit(); if (u < p.count / 16u)"
                 " out_v[p.out_offset / 4u + u] = ~in0_v[p.in_offset0 / 4u + u]; }",
    "plain NOT, grid-stride loop": "void main() { uint step_ = gl_NumWorkGroups.x * gl_NumWorkGroups.y"
                 " * gl_WorkGroupSize.x; for (uint u = unit(); u < p.count / 16u; u += step_)"
                 " out_v[p.out_offset / 4u + u] = ~in0_v[p.in_offset0 / 4u + u]; }",
}


def compile_kernels(folder) -> dict:
    modules = {}
    for i, (name, body) in enumerate(KERNELS.items()):
        source, module = os.path.join(folder, f"k{i}.comp"), os.path.join(folder, f"k{i}.spv")
        with open(source, "w") as f:
            f.write(HEAD + body + "\n")
        subprocess.run(["glslangValidator", "-V", "--quiet", "--target-env", "vulkan1.1", "-o", module, source],
                       check=True)
        with open(module, "rb") as f:
            modules[name] = f.read()
    return modules


def main():
    nbytes = (int(sys.argv[1]) if len(sys.argv) > 1 else 16) << 20
    device = dmlgpu.default_device()
    x = np.random.default_rng(0).integers(0, 2**32, nbytes // 4, dtype=np.uint32)
    o = np.empty_like(x)
    print(f"{device.name} ({device.type}; {device.driver}), {os.cpu_count()} CPUs, "
          f"LP_NUM_THREADS={os.environ.get('LP_NUM_THREADS')}, {nbytes >> 20} MiB uint32, numpy {np.__version__}")

    with device:
        t, u = dmlgpu.Tensor.from_numpy(x), dmlgpu.Tensor.empty(x.shape, x.dtype)

    def resident():
        dmlgpu.bit_not(t, out=u)
        device.synchronize()
    pairs = (("(a) bit_not(T, out=O) + synchronize", resident, "np.invert(x, out=o)", lambda: np.invert(x, out=o)),
             ("(b) bit_not(x)", lambda: dmlgpu.bit_not(x), "np.invert(x)", lambda: np.invert(x)),
             ("(c) Tensor.from_numpy(x)", lambda: dmlgpu.Tensor.from_numpy(x), "x.copy()", lambda: x.copy()))
    for name, ours, peer_name, peer in pairs:
        a, b = wall_seconds(ours, repeats=7), wall_seconds(peer, repeats=7)
        print(f"  {name:38s} {a * 1e3:8.2f} ms   {peer_name:22s} {b * 1e3:6.2f} ms   ratio {b / a:.3f}")

    src, dst = device.upload(x), device.allocate(nbytes)
    units = nbytes // 16

    def kernel_ms(name, module, workgroup, grid, check):
        program = Program(f"{name}@{workgroup}", module, np.array([workgroup], np.uint32), len(kernels.PUSH_FIELDS))
        launch = device.launch(program, grid, [src, dst], [src.arena_offset // 4, 0, dst.arena_offset // 4, nbytes],
                               [(src, 0, nbytes)], [(dst, 0, nbytes)], name)
        if check:
            device.enqueue(launch)
            assert np.array_equal(dst.read().view(np.uint32), ~x), name
        return 1e3 * float(np.median(device.time_dispatches(launch, 5)))

    print("  kernels (device timestamps, median of 5):")
    flat = spirv.load("bit_not-flat")
    ours = kernels.grid(units, kernels.CPU_UNITS_PER_INVOCATION if device.is_cpu else 1)
    print(f"    dmlgpu flat NOT, workgroup {kernels.WORKGROUP_SIZE}, grid {ours} (what dmlgpu runs): "
          f"{kernel_ms('flat', flat, kernels.WORKGROUP_SIZE, ours, True):.2f} ms")
    for groups in (64, 256, 1024, 4096):  # the grid-stride loop over fewer groups (L13)
        print(f"    dmlgpu flat NOT, workgroup {kernels.WORKGROUP_SIZE}, grid ({groups}, 1, 1): "
              f"{kernel_ms('flat', flat, kernels.WORKGROUP_SIZE, (groups, 1, 1), True):.2f} ms")
    with tempfile.TemporaryDirectory() as folder:
        modules = compile_kernels(folder)
    for name, module in modules.items():
        for workgroup in (64, 256):
            grids = [(units // workgroup, 1, 1)]
            if "loop" in name:
                grids += [(g, 1, 1) for g in (8, 256)]
            for grid in grids:
                ms = kernel_ms(name, module, workgroup, grid, "NOT" in name)
                print(f"    {name:30s} workgroup {workgroup:4d} groups {grid[0]:6d}: {ms:8.2f} ms")


if __name__ == "__main__":
    main()
