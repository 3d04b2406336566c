"""dmlgpu.fuse on random programs: each step applies a random table operator (through Tensor's
operators, dmlgpu's functions or numpy's ufuncs) to earlier values, arguments broadcast with
numpy's rules and Python int constants; every value computed is returned. Judged bit for bit
against the same program run step by step through dmlgpu.table.reference."""
from __future__ import annotations

import os

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dmlgpu
from dmlgpu import testing
from dmlgpu.table.dtypes import UINTS, DataType
from dmlgpu.table.operators import BY_SHORT
from dmlgpu.table.reference import REFERENCES

EXAMPLES = 25 if os.environ.get("DMLGPU_HYPOTHESIS_PROFILE", "ci") == "ci" else 1000
SPELLINGS = {  # how a step is written in the traced function
    "bit_not": [lambda a: ~a, lambda a: np.invert(a), lambda a: dmlgpu.bit_not(a)],
    "bit_xor": [lambda a, b: a ^ b, lambda a, b: np.bitwise_xor(a, b), lambda a, b: dmlgpu.bit_xor(a, b)],
    "bit_and": [lambda a, b: a & b, lambda a, b: np.bitwise_and(a, b)],
    "bit_or": [lambda a, b: a | b, lambda a, b: dmlgpu.bit_or(a, b)],
    "bit_shift_left": [lambda a, b: a << b, lambda a, b: np.left_shift(a, b)],
    "bit_shift_right": [lambda a, b: a >> b, lambda a, b: dmlgpu.bit_shift_right(a, b)],
    "sign": [lambda a: dmlgpu.sign(a)],
}


@st.composite
def programs(draw):
    dtype = draw(st.sampled_from([t for t in DataType if t.bits >= 8 and t in BY_SHORT["bit_xor"].newest.input_types]))
    shape = tuple(draw(st.lists(st.integers(1, 6), min_size=1, max_size=3)))
    arg_shapes = [shape] + [shape[draw(st.integers(0, len(shape))):] for _ in range(draw(st.integers(0, 2)))]
    steps = []
    for _ in range(draw(st.integers(1, 10))):
        names = [s for s in SPELLINGS if dtype in BY_SHORT[s].newest.input_types]
        short = draw(st.sampled_from(names))
        spelling = draw(st.integers(0, len(SPELLINGS[short]) - 1))
        operands = [("value", draw(st.integers(0, 10**6)))]  # full shape: intermediates never broadcast
        for _ in BY_SHORT[short].inputs[1:]:
            kind = draw(st.sampled_from(["value", "value", "arg", "int"]))
            if kind == "int" and not dtype.is_float:
                operands.append(("int", draw(st.integers(0, 63 if short.startswith("bit_shift") else 100))))
            elif kind == "arg":
                operands.append(("arg", draw(st.integers(0, len(arg_shapes) - 1))))
            else:
                operands.append(("value", draw(st.integers(0, 10**6))))
        steps.append((short, spelling, operands))
    return dtype, shape, arg_shapes, steps, draw(st.integers(0, 2**32 - 1))


def run(steps, args, apply):
    """The program on `args`: value 0 is argument 0 (of the full shape); each step's first operand
    is an earlier value, so every value has the full shape; a second operand may be an argument
    (broadcast), a Python int or an earlier value."""
    values = [args[0]]
    for short, spelling, operands in steps:
        picked = []
        for kind, x in operands:
            if kind == "int":
                picked.append(x)
            elif kind == "arg":
                picked.append(args[x])
            else:
                picked.append(values[x % len(values)])
        values.append(apply(short, spelling, picked))
    return tuple(values[1:])


def traced(short, spelling, operands):
    return SPELLINGS[short][spelling](*operands)


def referenced(short, spelling, operands):
    arrays = [x for x in operands if not isinstance(x, int)]
    dtype, shape = arrays[0].dtype, np.broadcast_shapes(*(a.shape for a in arrays))
    full = [np.broadcast_to(np.array(x, dtype) if isinstance(x, int) else x, shape).copy() for x in operands]
    return np.asarray(REFERENCES[short](*full))


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
@given(programs())
def test_random_programs_match_the_reference(case):
    dtype, shape, arg_shapes, steps, seed = case
    if dtype not in UINTS:  # shifts take unsigned types only
        steps = [s for s in steps if not s[0].startswith("bit_shift")] or [("bit_not", 0, [("value", 0)])]
    rng = np.random.default_rng(seed)
    args = [testing.sample(dtype, s, rng) for s in arg_shapes]
    fused = dmlgpu.fuse(lambda *a: run(steps, a, traced))
    got = fused(*args)
    expected = run(steps, args, referenced)
    assert len(got) == len(expected)
    for j, (g, e) in enumerate(zip(got, expected)):
        assert testing.same_bits(g, e.reshape(g.shape)), f"result {j}"
    assert fused.graph(*args).dispatches == -(-len(got) // 8)  # at most 8 outputs per dispatch
