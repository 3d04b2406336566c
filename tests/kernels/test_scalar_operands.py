"""A broadcast scalar operand of a two-operand operator keeps the flat layout (the kernel repeats
it across 16-byte vectors), bit for bit against the reference at every width, either side."""
from __future__ import annotations

import numpy as np
import pytest

import dmlgpu
from dmlgpu import Binding, TensorDesc, testing
from dmlgpu.describe.operator_descs import DESC_CLASSES
from dmlgpu.table.operators import OPERATORS
from dmlgpu.table.reference import REFERENCES

from conftest import POISON

CASES = [(op, t) for op in OPERATORS if len(op.inputs) == 2 for t in testing.one_type_per_width(op)]


@pytest.mark.parametrize("op,dtype", CASES, ids=[f"{op.short}-{t.name.lower()}" for op, t in CASES])
@pytest.mark.parametrize("side", [0, 1])
def test_scalar_operand_is_flat_and_exact(device, rng, op, dtype, side):
    n = 1003  # a tail that is not a whole vector
    packed, scalar = TensorDesc(dtype, (n,)), TensorDesc(dtype, (n,), (0,))
    descs = [packed, packed]
    descs[side] = scalar
    compiled = device.create_operator(DESC_CLASSES[op.name](*descs, packed))
    assert compiled.layout == "flat"
    x = testing.sample(dtype, (n,), rng)
    for value in testing.edge_bits(dtype)[:6]:
        s = np.array([value]).view(dtype.numpy)
        arrays, bound = [x, np.broadcast_to(s, (n,))], [x, s]
        if side == 0:
            arrays.reverse()
            bound.reverse()
        nbytes = -(-n * dtype.size // 4) * 4
        out = device.upload(np.full(nbytes + 16, POISON, np.uint8))
        compiled.execute([Binding(device.upload(v)) for v in bound], [Binding(out, 0, nbytes)])
        got = out.read().view(np.uint8)
        expected = np.asarray(REFERENCES[op.short](*[np.ascontiguousarray(v) for v in arrays]))
        assert testing.same_bits(got[:n * dtype.size].view(dtype.numpy), expected), f"scalar {value:#x}"
        assert (got[n * dtype.size:] == POISON).all(), "wrote past the output"


def test_front_end_scalar_runs_flat(device, rng):
    w = dmlgpu.Tensor.from_numpy(rng.integers(0, 256, 4096, dtype=np.uint8))
    assert testing.same_bits(dmlgpu.bit_and(w, 15).numpy(), w.numpy() & 15)
    assert testing.same_bits((w >> 4).numpy(), w.numpy() >> 4)
