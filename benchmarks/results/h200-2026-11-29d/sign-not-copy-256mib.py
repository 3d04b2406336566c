"""Experiment: 256 MiB SIGN / NOT against the raw Vulkan copy (GPU timestamps) and torch (CUDA events), same process."""
import time, json
import numpy as np
import torch
import dmlgpu
from dmlgpu import Binding, DataType, Tensor, TensorDesc
from dmlgpu.runtime import Program, shader_compiler
from dmlgpu_tools.bench_runtime import _floor_launch

COPY = """#version 450
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer In { uvec4 x[]; };
layout(std430, binding = 1) writeonly buffer Out { uvec4 o[]; };
layout(push_constant) uniform P { uint n4, in_at, out_at; } p;
void main() {
    uint stride = gl_NumWorkGroups.x * 64u, i = gl_GlobalInvocationID.x;
    for (; i + 3u * stride < p.n4; i += 4u * stride) {
        uvec4 a[4];
        for (uint k = 0u; k < 4u; ++k) a[k] = x[p.in_at + i + k * stride];
        for (uint k = 0u; k < 4u; ++k) o[p.out_at + i + k * stride] = a[k];
    }
    for (; i < p.n4; i += stride) o[p.out_at + i] = x[p.in_at + i];
}
"""
N = 256 << 20
device = dmlgpu.default_device()
out = {}
x = np.random.default_rng(2).integers(0, 256, size=N, dtype=np.uint8)
src, dst = device.upload(x), device.allocate(N, zero_fill=False)
prog = Program("copy_floor", shader_compiler.spirv(COPY), np.zeros(0, np.uint32), 3)
def copy_launch(groups):
    return device.launch(prog, (groups, 1, 1), [src, dst], np.array([N // 16, src.arena_offset // 16, dst.arena_offset // 16], np.uint32),
                         reads=[(src, 0, N)], writes=[(dst, 0, N)], name="copy")
warm = copy_launch(4224)
end = time.perf_counter() + 2.0
while time.perf_counter() < end:
    device.time_dispatches(warm, 20)
assert (dst.read()[:4096] == x[:4096]).all()
tx = torch.from_numpy(x).cuda()
def cuda_time(fn, n=20):
    for _ in range(3): fn()
    ts = []
    for _ in range(n):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); fn(); e.record(); e.synchronize(); ts.append(s.elapsed_time(e) / 1e3)
    return float(np.median(ts))
for rnd in range(2):
    best = min((float(np.median(device.time_dispatches(copy_launch(g), 20))), g) for g in (1056, 2112, 4224, 8448, 16896, 65536))
    out[f"r{rnd} vulkan copy"] = best
    for name, dt, tdt in (("sign int16", DataType.INT16, torch.int16), ("sign int32", DataType.INT32, torch.int32),
                          ("not uint32", DataType.UINT32, torch.int32), ("sign int8", DataType.INT8, torch.int8)):
        with device:
            a = Tensor.from_numpy(x.view(dt.numpy)); r = Tensor.empty(a.shape, dt.numpy)
        op = "ELEMENT_WISE_SIGN" if name.startswith("sign") else "ELEMENT_WISE_BIT_NOT"
        launch = _floor_launch(device, op, [a], r)
        device.time_dispatches(launch, 10)
        ours = float(np.median(device.time_dispatches(launch, 20)))
        tv, ty = tx.view(tdt), torch.empty(N // tdt.itemsize, dtype=tdt, device="cuda")
        peer = cuda_time(lambda: torch.sign(tv, out=ty)) if name.startswith("sign") else cuda_time(lambda: torch.bitwise_not(tv, out=ty))
        out[f"r{rnd} {name}"] = {"ours_gpu": ours, "torch": peer}
        del a, r, launch
    ty = torch.empty_like(tx)
    out[f"r{rnd} torch copy_"] = cuda_time(lambda: ty.copy_(tx))
    print(rnd, {k: v for k, v in out.items() if k.startswith(f"r{rnd}")}, flush=True)
print(json.dumps(out))
