"""Does the cost of a submit grow with the device memory the process holds?

    python benchmarks/submit_floor.py

In the full harness a tiny operation + synchronize reads 2-3x what it reads in a fresh process,
and so does the runtime's `submit_floor` (one dispatch recorded once, submit + fence wait). This
measures that floor and dmlgpu's tiny `bit_not(t, out=o)` + synchronize while the process holds
nothing, 16 GiB in pooled 256 MiB arenas, nothing again (after `empty_cache`), then 16 GiB in a
few dedicated allocations: if the floor follows the number of allocations, fewer and larger
arenas are the cure; if it follows the bytes, the cost is the driver's, per byte held. Then the
same with PyTorch's CUDA context alive in the process (the harness's peers share it).
"""
import numpy as np

import dmlgpu
from dmlgpu import Binding, DataType, Tensor, TensorDesc
from dmlgpu_tools.bench import wall_seconds

GiB, MiB = 1 << 30, 1 << 20


def main():
    device = dmlgpu.default_device()
    t, o = Tensor.from_numpy(np.arange(256, dtype=np.uint32)), Tensor.empty((256,), np.uint32)
    desc = TensorDesc(DataType.UINT32, [256])
    compiled = device.create_operator(dmlgpu.ElementWiseBitNotOperatorDesc(desc, desc))
    launch = compiled.launch(compiled.check([Binding(t.buffer, 0, 1024)], [Binding(o.buffer, 0, 1024)]))

    def report(label):
        floor = float(np.median(device.submit_floor(launch, 300)))
        ours = wall_seconds(lambda: (dmlgpu.bit_not(t, out=o), device.synchronize()), repeats=2000)
        stats = device.memory_stats()
        print(f"{label:48s} floor {floor * 1e6:6.1f} us   bit_not(out=)+sync {ours * 1e6:6.1f} us   "
              f"reserved {stats['reserved_bytes'] / GiB:5.1f} GiB in {stats['arenas']} arenas "
              f"+ {stats.get('dedicated', '?')} dedicated", flush=True)

    report("nothing held")
    piece = device.memory_stats()["arena_bytes"] * 3 // 8  # pooled: at most half an arena
    small = [device.allocate(piece, zero_fill=False) for _ in range(16 * GiB // piece)]
    report(f"16 GiB in {piece >> 20} MiB buffers (pooled arenas)")
    del small
    device.empty_cache()
    report("after empty_cache")
    big_size = min(device.max_buffer_size, 4 * GiB) // MiB * MiB
    big = [device.allocate(big_size, zero_fill=False) for _ in range(16 * GiB // big_size)]
    report(f"16 GiB in {len(big)} dedicated buffers")
    del big
    device.empty_cache()
    report("after empty_cache")
    try:
        import torch
        if torch.cuda.is_available():
            x = torch.zeros(256, dtype=torch.int32, device="cuda")
            y = torch.empty_like(x)

            def peer():
                torch.bitwise_not(x, out=y)
                torch.cuda.synchronize()
            print(f"torch bitwise_not(out=) + synchronize {wall_seconds(peer, repeats=2000) * 1e6:6.1f} us")
            report("a CUDA context in the process, after its work")
            big = torch.empty(1 << 28, dtype=torch.int32, device="cuda")
            for _ in range(200):
                big.bitwise_not_()
            torch.cuda.synchronize()
            report("after 200 large CUDA kernels")
            del big
            torch.cuda.empty_cache()
            report("after torch.cuda.empty_cache")
    except ImportError:
        pass


if __name__ == "__main__":
    main()
