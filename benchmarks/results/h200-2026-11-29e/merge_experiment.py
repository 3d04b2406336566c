"""Experiment: where the last workgroup's merge of a FLOAT32 SUM spends its time (spec 8 = EXP):
0 product, 2 counted no merge, 3 merge without acc_result, 4 icache warm (every workgroup runs
acc_result before counting), 5 merge's params prefetched into shared, 6 = 4 + 5, 7 merge without
lane_states, 8 merge without tree, 9 the tree's levels under the subgroup size by subgroupShuffleDown
(the same pairs), 10 = 9 + 5, 11 = 10 with the state's writer fencing its own store before the
barrier (no workgroup-wide memoryBarrierBuffer). Run from the tree with
reduce-merge-experiment.patch applied: python merge_experiment.py benchmarks. The first call
(merge-dissection-1.log) ran variants 0, 2-8 over 1, 64 and 256 MiB in 3 rounds; the second
(merge-dissection-2.log) the list below."""
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
    sizes = [1 << 20, 16 << 20, 64 << 20, 256 << 20] if gpu else [1 << 20, 16 << 20]
    out = {}
    srcs = {}
    for nb in sizes:
        n = nb // 4
        x = np.random.default_rng(1).standard_normal(n).astype(np.float32)
        srcs[nb] = (n, device.upload(x), np.float32(math.fsum(x.astype(np.float64))))
    variants = [("base", 0), ("nomerge", 2), ("prefetch", 5), ("shuffle", 9), ("shuffle+prefetch", 10), ("shuf+pre+fence", 11)]
    for rnd in range(4):
        for nb in sizes:
            n, src, want = srcs[nb]
            fl = R.vulkan_read_seconds(device, src, nb)
            out[f"r{rnd} {nb} floor"] = fl
            print(f"r{rnd} {nb} floor", round(fl[0] * 1e6, 2), fl[1], flush=True)
            for name, e in variants:
                device._operators.clear()
                desc = ReduceOperatorDesc(TensorDesc(DataType.FLOAT32, (n,)), TensorDesc(DataType.FLOAT32, (1,)), ReduceFunction.SUM, (0,))
                c = device.create_operator(desc)
                p = c._own_program
                spec = np.array(list(p.spec) + [0] * (9 - len(p.spec)), np.uint32)
                spec[8] = e
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
