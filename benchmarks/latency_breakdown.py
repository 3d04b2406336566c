"""Where the time of one small device-resident operation goes, submit to result.

    python benchmarks/latency_breakdown.py

Rows: a kp Sequence holding one barrier (submit + fence wait alone), one tiny dispatch
recorded, dmlgpu's CompiledOperator.execute (the hot path), the Tensor API, and PyTorch's tiny
op + synchronize when PyTorch sees a GPU.
"""
import numpy as np

import dmlgpu
from dmlgpu import Binding, DataType, Tensor, TensorDesc
from dmlgpu.bench import wall_seconds


def main():
    device = dmlgpu.default_device()
    kp, manager = device._kp, device._manager
    desc = TensorDesc(DataType.UINT32, [256])
    compiled = device.create_operator(dmlgpu.ElementWiseBitNotOperatorDesc(desc, desc))
    a, b = device.allocate(1024), device.allocate(1024)
    bindings = [Binding(a, 0, 1024)], [Binding(b, 0, 1024)]
    compiled.execute(*bindings)
    ranges = compiled.check(*bindings)
    _, algorithm, push = compiled._launch(ranges)
    empty = manager.sequence()
    empty.record(kp.OpMemoryBarrier([a._tensor], 0x40, 0x20, 0x800, 0x800))  # one trivial command
    one = manager.sequence()
    one.record(kp.OpAlgoDispatch(algorithm, push))
    t_in, t_out = Tensor.from_numpy(np.arange(256, dtype=np.uint32)), Tensor.empty((256,), np.uint32)
    rows = {"kp: one barrier eval": lambda: empty.eval(),
            "kp: one dispatch eval": lambda: one.eval(),
            "dmlgpu CompiledOperator.execute": lambda: compiled.execute(*bindings),
            "dmlgpu bit_not(Tensor, out=Tensor)": lambda: dmlgpu.bit_not(t_in, out=t_out)}
    try:
        import torch
        if torch.cuda.is_available():
            x = torch.zeros(256, dtype=torch.int32, device="cuda")
            y = torch.empty_like(x)
            rows["torch bitwise_not + synchronize"] = lambda: (torch.bitwise_not(x, out=y), torch.cuda.synchronize())
            rows["torch synchronize alone"] = torch.cuda.synchronize
    except ImportError:
        pass
    print(f"{device.name}:")
    for name, fn in rows.items():
        print(f"  {name:40s} {wall_seconds(fn, repeats=3000) * 1e6:7.1f} us")


if __name__ == "__main__":
    main()
