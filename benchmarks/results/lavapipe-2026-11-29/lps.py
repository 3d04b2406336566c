import sys, math, numpy as np
import dmlgpu
from dmlgpu import Binding, DataType, TensorDesc
from dmlgpu.describe.operator_descs import ReduceOperatorDesc
from dmlgpu.table.operators import ReduceFunction
import dmlgpu.kernels.compiled_selection as cs
rdev = dmlgpu.default_device()
rows = {}
keep = []
for k in (14, 16, 18, 20, 22, 24):
    n = 1 << k
    host = np.random.default_rng(k).standard_normal(n).astype(np.float32)
    src = rdev.upload(host); keep.append(src)
    exact = np.float32(math.fsum(host.astype(np.float64)))
    for mode, walk in (("one", 1 << 40), ("two", 1 << 16)):
        cs.DOUBLE_FIRST_WALK = walk
        desc = ReduceOperatorDesc(TensorDesc(DataType.FLOAT32, (n,), strides=(1,) if mode == "two" else None), TensorDesc(DataType.FLOAT32, (1,)), ReduceFunction.SUM, (0,))
        compiled = rdev.create_operator(desc)
        out = rdev.allocate(16); keep.append(out)
        b = [Binding(src)], [Binding(out)]
        compiled.execute(*b)
        got = out.read()[:4].view(np.float32)[0]
        assert got == exact, (k, mode, got, exact)
        l = compiled.launches(compiled.check(*b))
        keep.append(compiled)
        rows[(k, mode)] = (l if len(l) > 1 else l[0], len(l), compiled.shape)
res = {key: [] for key in rows}
for r in range(5):
    for key, (l, _, _) in rows.items():
        res[key].append(float(np.median(rdev.time_dispatches(l, 7))))
for key, v in res.items():
    print(f"2^{key[0]} {key[1]} launches {rows[key][1]} {rows[key][2]} min {min(v)*1e3:.3f} med {np.median(v)*1e3:.3f} ms")
