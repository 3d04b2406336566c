"""dmlgpu.fuse: functions of arrays traced into one fused dispatch, bit for bit against numpy
and dmlgpu.table.reference; compiled once per signature; unsupported constructs named at trace time."""
from __future__ import annotations

import numpy as np
import pytest

import dmlgpu
from dmlgpu import testing
from dmlgpu.table.dtypes import ALL, UINTS
from dmlgpu.table.reference import REFERENCES

from conftest import POISON, assert_clean_exit
from test_graphs import SHAPE


@dmlgpu.fuse
def unpack(w):
    return w & 15, w >> 4


def same(a, b):
    return testing.same_bits(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("n", [1, 5, 16, 1000])
def test_int4_unpack_numpy_and_tensor(rng, n):
    w = rng.integers(0, 256, n, dtype=np.uint8)
    lo, hi = unpack(w)
    assert isinstance(lo, np.ndarray) and same(lo, w & 15) and same(hi, w >> 4)
    lo_t, hi_t = unpack(dmlgpu.Tensor.from_numpy(w))
    assert isinstance(lo_t, dmlgpu.Tensor) and same(lo_t.numpy(), w & 15) and same(hi_t.numpy(), w >> 4)
    assert unpack.graph(w).dispatches == 1


@pytest.mark.parametrize("dtype", ALL, ids=lambda t: t.name.lower())
def test_every_operator_in_one_function(rng, dtype):
    """NOT, XOR, AND, OR, both shifts where the type allows, SIGN where it does, BIT_COUNT to
    uint8 feeding an 8-bit XOR; a broadcast row; a Python int constant."""
    def reference(x, y, r):
        ref = REFERENCES
        t = ref["bit_or"](ref["bit_and"](ref["bit_xor"](x, r), ref["bit_not"](ref["bit_not"](y))), x)
        if dtype in UINTS:
            t = ref["bit_shift_right"](ref["bit_shift_left"](t, np.full_like(t, 3)), np.full_like(t, 1))
        if dtype in dmlgpu.table.operators.SIGN.newest.input_types:
            t = ref["bit_xor"](ref["sign"](t), t)
        c = ref["bit_count"](t, np.uint8)
        return t, ref["bit_xor"](c, np.full_like(c, 0x5A))

    @dmlgpu.fuse
    def f(x, y, r):
        t = ((x ^ r) & ~~y) | x
        if dtype in UINTS:
            t = (t << 3) >> 1
        if dtype in dmlgpu.table.operators.SIGN.newest.input_types:
            t = dmlgpu.sign(t) ^ t
        return t, dmlgpu.bit_count(t, dtype=np.uint8) ^ 0x5A

    x = testing.sample(dtype, SHAPE, rng)
    y = testing.sample(dtype, SHAPE, rng)
    r = testing.sample(dtype, SHAPE[1:], rng)
    got = f(x, y, r)
    expected = reference(x, y, np.broadcast_to(r, SHAPE))
    assert same(got[0], expected[0]) and same(got[1], expected[1])
    assert f.graph(x, y, r).dispatches == 1


def test_compiled_once_per_signature(rng):
    @dmlgpu.fuse
    def f(x, k):
        return x ^ k

    a = rng.integers(0, 100, 10, dtype=np.uint16)
    for _ in range(3):
        assert same(f(a, 7), a ^ np.uint16(7))
    assert f.signatures == 1
    f(a, 9)
    f(a[:5].copy(), 7)
    f(a.astype(np.uint32), 7)
    assert f.signatures == 4
    assert f.graph(a, 7) is f.graph(a.copy(), 7)


def test_ufuncs_and_tensor_views(rng):
    @dmlgpu.fuse
    def f(x, y):
        return np.bitwise_and(np.invert(x), y), np.left_shift(x, 2)

    x = rng.integers(0, 2**32, (6, 8), dtype=np.uint32)
    y = rng.integers(0, 2**32, (6, 8), dtype=np.uint32)
    tx = dmlgpu.Tensor.from_numpy(x)
    got = f(tx.T, dmlgpu.Tensor.from_numpy(y.T.copy()))
    assert same(got[0].numpy(), ~x.T & y.T) and same(got[1].numpy(), x.T << 2)


UNSUPPORTED = {
    "+": (lambda x: x + 1, "operator +"),
    "<": (lambda x: x < 1, "operator <"),
    "if": (lambda x: ~x if x else x, "truth value"),
    "index": (lambda x: x[0], "indexing"),
    "np.add": (lambda x: np.add(x, x), "numpy.add"),
    "argument": (lambda x: x, "argument unchanged"),
    "scalar result": (lambda x: 3, "int"),
    "out=": (lambda x: dmlgpu.bit_not(x, out=x), "out="),
    "sum": (lambda x: dmlgpu.sum(x ^ 1), "dmlgpu.reduce"),
    "top_k": (lambda x: dmlgpu.top_k(~x, 2), "dmlgpu.top_k"),
}


@pytest.mark.parametrize("name", list(UNSUPPORTED))
def test_unsupported_constructs_raise_type_error_naming_them(name):
    function, words = UNSUPPORTED[name]
    with pytest.raises(TypeError, match=words.replace("+", r"\+")):
        dmlgpu.fuse(function)(np.arange(4, dtype=np.uint32))


def test_broadcasting_an_intermediate_is_named(rng):
    @dmlgpu.fuse
    def f(x, row):
        return (~row) ^ x

    with pytest.raises(TypeError, match="intermediate"):
        f(np.zeros((3, 4), np.uint32), np.zeros(4, np.uint32))


def test_mixed_dtypes_are_a_validation_error():
    @dmlgpu.fuse
    def f(x, y):
        return x ^ y

    with pytest.raises(dmlgpu.ValidationError):
        f(np.zeros(4, np.uint32), np.zeros(4, np.uint16))


def test_zero_dimensional_arguments():
    @dmlgpu.fuse
    def f(x, y):
        return x ^ y, ~x

    x, y = np.array(0x5A, np.uint8), np.arange(5, dtype=np.uint8)
    got = f(x, y)
    assert same(got[0], x ^ y) and same(got[1], ~x) and got[1].shape == ()


def _poisoned_blocks(device, nbytes, count=4):
    """Free `count` blocks of `nbytes` filled with POISON: the next new buffers of that size
    (the pool's quick list, newest first) are those blocks, so an element a call leaves
    unwritten shows."""
    buffers = [device.upload(np.full(nbytes, POISON, np.uint8)) for _ in range(count)]
    device.synchronize()
    for b in buffers:
        b.release()


def test_repeated_calls_with_new_results_reuse_the_prepared_dispatch(device, rng):
    """A call with the same Tensors again makes its new results through the first call's
    prepared dispatches (no binding check, no new dispatch prepared): every result is right,
    bit for bit, in poisoned memory, and earlier results, still held, are left alone."""
    n = 1000
    w = rng.integers(0, 256, n, dtype=np.uint8)
    tw = dmlgpu.Tensor.from_numpy(w)
    f = dmlgpu.fuse(lambda x: (x & 15, x >> 4))
    f(tw)  # the first call: traced, checked, prepared
    graph = f.graph(tw)
    calls = []
    check, launches = graph.check, graph.launches
    graph.check = lambda *a: calls.append("check") or check(*a)
    graph.launches = lambda *a: calls.append("launches") or launches(*a)
    held = []
    for _ in range(4):
        _poisoned_blocks(device, n)
        lo, hi = f(tw)
        held.append((lo, hi))
        assert isinstance(lo, dmlgpu.Tensor) and lo.shape == (n,) and lo.dtype == np.uint8
    assert calls == [], "a repeated call checked or prepared its dispatches again"
    assert len({id(t.buffer) for pair in held for t in pair}) == 8  # each call's own buffers
    for lo, hi in held:
        assert same(lo.numpy(), w & 15) and same(hi.numpy(), w >> 4)


def test_repeated_calls_of_a_graph_of_several_dispatches_and_scalars(device, rng):
    """Two output shapes (two dispatches) and a Python scalar argument: the scalar is part of
    what a repeated call is found by (0.0 and -0.0 differ in their bits)."""
    @dmlgpu.fuse
    def f(x, y, s):
        return x ^ s, ~(y & s)

    x = testing.sample(dmlgpu.DataType.FLOAT32, (4, 5), rng)
    y = testing.sample(dmlgpu.DataType.FLOAT32, (7,), rng)
    tx, ty = dmlgpu.Tensor.from_numpy(x), dmlgpu.Tensor.from_numpy(y)
    assert f.graph(tx, ty, 1.5).dispatches == 2
    xor, and_, not_ = REFERENCES["bit_xor"], REFERENCES["bit_and"], REFERENCES["bit_not"]
    for s in (1.5, -0.0, 0.0, -0.0, 1.5, 0.0):
        _poisoned_blocks(device, 256)
        a, b = f(tx, ty, s)
        scalar = np.float32(s)
        assert same(a.numpy(), xor(x, np.full_like(x, scalar))), s
        assert same(b.numpy(), not_(and_(y, np.full_like(y, scalar)))), s
    assert f.signatures == 3


def test_a_repeated_call_after_its_input_was_released_is_refused(device, rng):
    f = dmlgpu.fuse(lambda x: ~x)
    t = dmlgpu.Tensor.from_numpy(rng.integers(0, 2**32, 64, dtype=np.uint32))
    f(t)
    f(t)
    t.buffer.release()
    with pytest.raises(dmlgpu.ValidationError, match="released"):
        f(t)


THREADS = """
import threading
import numpy as np
import dmlgpu
w = np.random.default_rng(0).integers(0, 256, 1000, dtype=np.uint8)
tw = dmlgpu.Tensor.from_numpy(w)
f = dmlgpu.fuse(lambda x: (x & 15, x >> 4))
bad = []
def work():
    for _ in range(40):
        lo, hi = f(tw)
        if not (np.array_equal(lo.numpy(), w & 15) and np.array_equal(hi.numpy(), w >> 4)):
            bad.append(1)
threads = [threading.Thread(target=work) for _ in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
assert not bad, len(bad)
print("done")
"""


def test_repeated_calls_from_several_threads(tmp_path):
    """Threads calling one fused function with the same Tensor (the first call of each may race
    the others' to trace, compile and keep the call): every result right, under the
    validation layer."""
    assert_clean_exit(THREADS, tmp_path)


def test_scalars_read_from_outside_are_part_of_the_signature():
    """Issue 32, row 7: a fused function that reads a Python scalar from its closure, from its
    module's globals or through a helper function follows the scalar's current value (before,
    the trace froze the first one: 7 != 9 at 16 places); numpy scalars too; a value reached
    through a container is read once (documented), and the same Tensors' repeated call (the hot
    path) follows too."""
    from test_faults import ok, run
    out = ok(run("""
        import numpy as np
        import dmlgpu
        x = (np.arange(64, dtype=np.uint64) * 2654435761 % 2**32).astype(np.uint32)
        t = dmlgpu.Tensor.from_numpy(x)

        def closure(k):
            f = dmlgpu.fuse(lambda a: a & k)
            first = f(x)
            k = 9  # the cell changes after the first trace
            return first, f(x), f(t).numpy(), f.signatures
        first, later, tensor, signatures = closure(7)
        assert np.array_equal(first, x & 7) and np.array_equal(later, x & 9) and np.array_equal(tensor, x & 9)
        assert signatures == 3  # numpy with 7, numpy with 9, a Tensor with 9

        MASK = 0xF0
        masked = dmlgpu.fuse(lambda a: (a & MASK) ^ (a >> 3))
        SHIFT = np.uint32(2)
        def helper(a):
            return a << SHIFT
        helped = dmlgpu.fuse(lambda a: helper(a) | a)
        for value in (0xF0, 0x0F, 0xF0):
            MASK, SHIFT = value, np.uint32(value % 5)
            for _ in range(2):  # the second: the same Tensors' hot path
                assert np.array_equal(masked(t).numpy(), (x & value) ^ (x >> 3)), value
                assert np.array_equal(helped(t).numpy(), (x << np.uint32(value % 5)) | x), value
            assert np.array_equal(masked(x), (x & value) ^ (x >> 3))
        assert masked.signatures == 4  # (Tensor, numpy) x (0xF0, 0x0F)

        params = {"k": 3}
        boxed = dmlgpu.fuse(lambda a: a ^ params["k"])
        assert np.array_equal(boxed(x), x ^ 3)
        params["k"] = 5  # through a container: read once, at the trace
        assert np.array_equal(boxed(x), x ^ 3)
        print("ok")
        """, timeout=120))
    assert out.startswith("ok"), out
