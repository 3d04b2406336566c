"""Experiment: REDUCE SUM FLOAT32 fixed costs: params in shared memory (spec 7), the merge skipped (spec 8 = 1: no count; 2: counted, no merge); sizes 1 KiB-256 MiB beside the raw read."""
import sys, json, time, math
import numpy as np
import dmlgpu
from dmlgpu import Binding, DataType, TensorDesc
from dmlgpu.describe.operator_descs import ReduceOperatorDesc
from dmlgpu.table.operators import ReduceFunction
from dmlgpu.runtime import Program
sys.path.insert(0, sys.argv[1])
import reduce as R

def main():
    device = dmlgpu.Device()
    gpu = not device.is_cpu
    sizes = [1 << 10, 1 << 20, 16 << 20, 64 << 20, 128 << 20, 256 << 20] if gpu else [1 << 10, 1 << 20, 16 << 20]
    out = {}
    srcs = {}
    for nb in sizes:
        n = nb // 4
        x = np.random.default_rng(1).standard_normal(n).astype(np.float32)
        srcs[nb] = (n, device.upload(x), np.float32(math.fsum(x.astype(np.float64))))
    variants = [("base", 0, 0), ("shared", 1, 0), ("nocount", 0, 1), ("nomerge", 0, 2), ("shared+nocount", 1, 1)]
    for rnd in range(2):
        for nb in sizes:
            n, src, want = srcs[nb]
            fl = R.vulkan_read_seconds(device, src, nb) if nb >= 1024 else (0, 0)
            out[f"r{rnd} {nb} floor"] = fl
            print(f"r{rnd} {nb} floor", round(fl[0] * 1e6, 2), fl[1], flush=True)
            for name, sh, mg in variants:
                device._operators.clear()
                desc = ReduceOperatorDesc(TensorDesc(DataType.FLOAT32, (n,)), TensorDesc(DataType.FLOAT32, (1,)), ReduceFunction.SUM, (0,))
                c = device.create_operator(desc)
                p = c._own_program
                spec = np.array(list(p.spec) + [0] * (9 - len(p.spec)), np.uint32)
                spec[7], spec[8] = sh, mg
                c._own_program = Program(p.name, p.spirv, spec, p.push_words)
                o = device.allocate(16)
                b = [Binding(src)], [Binding(o)]
                c.execute(*b)
                got = np.asarray(o.read()[:4]).view(np.float32)[0]
                launches = c.launches(c.check(*b))
                end = time.perf_counter() + 0.3
                while time.perf_counter() < end:
                    device.time_dispatches(launches, 20)
                t = float(np.median(device.time_dispatches(launches, 30)))
                key = f"r{rnd} {nb} {name}"
                out[key] = (t, bool(got == want))
                print(key, round(t * 1e6, 2), "us", got == want, tuple(c.shape), flush=True)
    print(json.dumps(out))

main()
