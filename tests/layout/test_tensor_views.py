"""Tensor as a device array: shapes checked in every constructor, numpy's properties, basic
indexing, transposes and reshapes as zero-copy views, and views as operator inputs and outputs
(every operator; views starting at and off 16-byte boundaries), compared with the same views of a
numpy array and bit for bit with `dmlgpu.table.reference`."""
import copy
import weakref

import numpy as np
import pytest

import dmlgpu
from dmlgpu import DataType, Tensor, ValidationError, testing
from dmlgpu.table.operators import OPERATORS

from conftest import POISON, poisoned

BASE = (4, 5, 6)
KEYS = {
    "int": 1,
    "negative-int": -1,
    "two-ints": (1, 2),
    "all-ints": (3, 4, 5),
    "numpy-int": np.int64(2),
    "slice": np.s_[1:],
    "column": np.s_[:, 1],
    "step": np.s_[::2],
    "steps": np.s_[1::2, ::3, 1::4],
    "ellipsis-int": np.s_[..., 1],
    "newaxis": np.s_[None, 1, ..., None],
    "middle-newaxis": np.s_[:, None, 2:4],
    "empty": np.s_[1:1],
    "empty-inner": np.s_[:, 5:2],
    "stop-past-end": np.s_[2:99, -3:],
    "nothing": (),
    "ellipsis": ...,
}
TYPES = [DataType.UINT8, DataType.INT16, DataType.FLOAT32, DataType.UINT64]


def _ids(value):
    return getattr(value, "short", None) or getattr(value, "name", None) or str(value)


def _element_strides(x: np.ndarray):
    return tuple(s // x.itemsize for s in x.strides)


def assert_same_view(t: Tensor, x: np.ndarray, base: Tensor):
    """`t` presents `x`'s elements, as a view of `base`'s buffer."""
    assert t.shape == x.shape and t.ndim == x.ndim and t.size == x.size and t.nbytes == x.nbytes
    assert t.dtype == x.dtype and t.buffer is base.buffer
    assert all(a == b for n, a, b in zip(x.shape, t.strides, _element_strides(x)) if n > 1), (t.strides, x.strides)
    assert testing.same_bits(t.numpy(), x)


@pytest.mark.parametrize("key", KEYS.values(), ids=KEYS.keys())
@pytest.mark.parametrize("data_type", TYPES, ids=_ids)
def test_indexing_matches_numpy(rng, data_type, key):
    x = testing.sample(data_type, BASE, rng)
    t = Tensor.from_numpy(x)
    assert_same_view(t[key], x[key], t)
    if x[key].ndim:  # a view of a view
        assert_same_view(t[key][..., :1], x[key][..., :1], t)


def test_properties_and_len(rng):
    x = testing.sample(DataType.UINT32, BASE, rng)
    t = Tensor.from_numpy(x)
    assert (t.ndim, t.size, t.nbytes, t.itemsize, len(t), t.strides, t.offset) == (3, 120, 480, 4, 4, (30, 6, 1), 0)
    view = t[1:, ::2]
    assert (view.shape, view.strides, view.offset, view.nbytes, len(view)) == ((3, 3, 6), (30, 12, 1), 120, 216, 3)
    assert not view.is_packed and t.is_packed and t[1].is_packed
    zero_d = t[1, 2, 3]
    assert zero_d.shape == () and zero_d.size == 1 and zero_d.numpy() == x[1, 2, 3]
    with pytest.raises(TypeError, match="len"):
        len(zero_d)
    rows = list(t)
    assert len(rows) == 4 and all(testing.same_bits(r.numpy(), x[i]) for i, r in enumerate(rows))
    assert repr(view).endswith(", dtype=uint32, strides=(30, 12, 1), offset=120, device=0)")


def test_fields_are_read_only_and_keys_tell_views_apart(rng):
    """The front end finds repeated calls by Tensor keys: a view is fixed once made, and two
    Tensors share a key exactly when they view the same elements of one buffer the same way."""
    t = Tensor.from_numpy(testing.sample(DataType.UINT32, BASE, rng))
    for field, value in (("shape", (120,)), ("strides", (1, 1, 1)), ("offset", 4),
                         ("data_type", DataType.INT32), ("buffer", t.buffer), ("key", None)):
        with pytest.raises(AttributeError):
            setattr(t, field, value)
    assert Tensor(t.buffer, BASE, DataType.UINT32).key == t.key == t[...].key
    assert weakref.ref(t)() is t  # still weakly referable
    copied = copy.copy(t)  # a copy of the data, as CuPy's (not another name for the same view)
    assert copied.buffer is not t.buffer and testing.same_bits(copied.numpy(), t.numpy())
    other = Tensor.from_numpy(t.numpy())
    assert len({t.key, t.T.key, t[1:].key, t.reshape(120).key, other.key,
                Tensor(t.buffer, BASE, DataType.INT32).key}) == 6


def test_indexing_errors_are_clear():
    t = Tensor.from_numpy(np.zeros(BASE, np.uint8))
    for key in (np.s_[::-1], np.s_[:, 3:0:-1]):
        with pytest.raises(ValidationError, match="positive steps .*unsigned"):
            t[key]
    for key in ([0, 1], np.array([0]), True, 1.0, "a", (0, [1])):
        with pytest.raises(ValidationError, match="basic indexing"):
            t[key]
    with pytest.raises(IndexError, match="index 4 is out of bounds for axis 0 with size 4"):
        t[4]
    with pytest.raises(IndexError, match="index -7 is out of bounds for axis 1"):
        t[0, -7]
    with pytest.raises(IndexError, match="too many indices"):
        t[0, 0, 0, 0]
    with pytest.raises(IndexError, match="single ellipsis"):
        t[..., ...]
    with pytest.raises(ValueError, match="step cannot be zero"):
        t[::0]


@pytest.mark.parametrize("shape", [(-2,), (2.5,), ("3",), (True,), (2, None), [np.float64(2)], -1, 1.5, None])
def test_shapes_are_checked_in_every_constructor(shape):
    with pytest.raises(ValidationError, match="shape"):
        Tensor.empty(shape, np.uint8)
    with pytest.raises(ValidationError, match="shape"):
        Tensor(dmlgpu.default_device().allocate(64), shape, DataType.UINT8)


def test_constructor_checks_the_view_against_its_buffer():
    buffer = dmlgpu.default_device().allocate(16)
    assert Tensor.empty(5, np.uint8).shape == (5,)
    assert Tensor.empty([2, np.int64(3)], np.uint8).shape == (2, 3)
    assert Tensor(buffer, (4,), DataType.UINT32).numpy().tolist() == [0, 0, 0, 0]
    with pytest.raises(ValidationError, match="past its buffer's 16"):
        Tensor(buffer, (5,), DataType.UINT32)
    with pytest.raises(ValidationError, match="past its buffer"):
        Tensor(buffer, (2,), DataType.UINT32, offset=12)
    with pytest.raises(ValidationError, match="offset is 2; allowed: a non-negative multiple of the element size"):
        Tensor(buffer, (2,), DataType.UINT32, offset=2)
    with pytest.raises(ValidationError, match="strides"):
        Tensor(buffer, (2, 2), DataType.UINT8, strides=(1,))
    with pytest.raises(ValidationError, match="strides"):
        Tensor(buffer, (2,), DataType.UINT8, strides=(-1,))
    with pytest.raises(ValidationError, match="dtype"):
        Tensor.empty((2,), np.bool_)


@pytest.mark.parametrize("axes", [(), (None,), ((1, 0, 2),), (2, 0, 1), (-1, 0, 1), ([0, 2, 1],)])
def test_transpose_is_a_view(rng, axes):
    x = testing.sample(DataType.INT16, BASE, rng)
    t = Tensor.from_numpy(x)
    assert_same_view(t.transpose(*axes), x.transpose(*axes), t)
    assert_same_view(t.T, x.T, t)
    assert_same_view(t[1:, ::2].T, x[1:, ::2].T, t)


@pytest.mark.parametrize("axes", [(0, 1), (0, 0, 1), (0, 1, 3), ("a", 0, 1), (1.0, 0, 2)])
def test_bad_axes(axes):
    with pytest.raises(ValidationError, match="axes"):
        Tensor.empty(BASE, np.uint8).transpose(*axes)


RESHAPES = [
    ("packed", lambda x: x, (-1,)), ("packed", lambda x: x, (6, -1)), ("packed", lambda x: x, (2, 1, 10, 6)),
    ("row", lambda x: x[1], (30,)), ("rows", lambda x: x[1:3], (2, 30)), ("cols", lambda x: x[:, :, ::2], (20, 3)),
    ("cols-split", lambda x: x[:, :, ::2], (4, 5, 3, 1)), ("transposed", lambda x: x.T, (-1,)),
    ("transposed-split", lambda x: x.T, (3, 2, 5, 4)), ("sliced", lambda x: x[:, 1:4], (-1,)),
    ("zero-d", lambda x: x[1, 2, 3, ...], (1, 1)), ("empty", lambda x: x[:0], (0, 7)), ("newaxis", lambda x: x[None, 1], (5, 6)),
]


@pytest.mark.parametrize("name, view, shape", RESHAPES, ids=[f"{r[0]}-{r[2]}" for r in RESHAPES])
def test_reshape_is_a_view_when_numpy_s_is(rng, name, view, shape):
    x = testing.sample(DataType.FLOAT32, BASE, rng)
    t = Tensor.from_numpy(x)
    expected = view(x).reshape(shape)
    got = view(t).reshape(shape)
    assert got.shape == expected.shape and testing.same_bits(got.numpy(), expected)
    assert view(t).reshape(*shape).shape == expected.shape
    numpy_made_a_view = np.shares_memory(expected, x) or expected.size == 0
    assert (got.buffer is t.buffer) == numpy_made_a_view, "a copy where numpy views, or the reverse"
    if got.buffer is not t.buffer:
        assert got.is_packed and got.offset % 16 == 0


@pytest.mark.parametrize("shape", [(7, -1), (-1, -1), (121,), (2, -2), (2.0, 60)])
def test_bad_reshape(shape):
    with pytest.raises(ValidationError, match="shape"):
        Tensor.empty(BASE, np.uint8).reshape(shape)


def test_copy_keeps_raw_bits_and_realigns(rng):
    x = testing.sample(DataType.FLOAT16, (9, 10), rng)  # NaN payloads, signalling NaNs, -0
    t = Tensor.from_numpy(x)
    for view, expected in ((t, x), (t[1:, 3::2], x[1:, 3::2]), (t[2, 1:], x[2, 1:])):
        copied = view.copy()
        assert copied.buffer is not t.buffer and copied.is_packed and copied.offset % 16 == 0
        assert testing.same_bits(copied.numpy(), expected)


# -- views through the operators --------------------------------------------------------------
def _view_cases():
    for op, in_type, out_type in testing.all_cases():
        if in_type in TYPES:
            for name in ("int", "column", "steps", "slice", "newaxis", "stop-past-end", "all-ints"):
                label = in_type.name.lower() + ("" if op.same_type else "-" + out_type.name.lower())
                yield pytest.param(op, in_type, out_type, name, id=f"{op.short}-{label}-{name}")


@pytest.mark.parametrize("op, in_type, out_type, name", list(_view_cases()))
def test_views_as_inputs_and_out(rng, op, in_type, out_type, name):
    key = KEYS[name]
    bases = [testing.sample(in_type, BASE, rng) for _ in op.inputs]
    tensors = [Tensor.from_numpy(b) for b in bases]
    views = [t[key] for t in tensors]
    expected = testing.reference(op, [b[key] for b in bases], out_type)
    got = testing.front_end(op, views, out_type)  # fresh output
    assert got.is_packed and got.offset % 16 == 0 and testing.same_bits(got.numpy(), expected)
    transposed = testing.front_end(op, [v.T for v in views], out_type)
    assert testing.same_bits(transposed.numpy(), testing.reference(op, [b[key].T for b in bases], out_type))
    into = Tensor.empty(expected.shape, out_type.numpy)  # given output, inputs perhaps misaligned
    assert testing.front_end(op, views, out_type, out=into) is into and testing.same_bits(into.numpy(), expected)
    for k, b in enumerate(bases):
        assert testing.same_bits(tensors[k].numpy(), b), "an input changed"

    out_base = Tensor.from_numpy(poisoned(BASE, out_type.numpy))
    out = out_base[key]
    want = poisoned(BASE, out_type.numpy)
    # an out off a 16-byte boundary (DirectML binds at 16-byte multiples) is bound from the one
    # below and written from its element offset
    assert testing.front_end(op, views, out_type, out=out) is out
    want[key] = expected
    assert testing.same_bits(out_base.numpy(), want), "wrong elements, or bytes outside out changed"


@pytest.mark.parametrize("op", [op for op in OPERATORS if op.in_place], ids=_ids)
@pytest.mark.parametrize("key", [np.s_[2:], np.s_[:, 4::2], np.s_[..., 4:]], ids=["rows", "columns", "inner"])
def test_in_place_on_a_view(rng, op, key):
    data_type = DataType.UINT32
    bases = [testing.sample(data_type, (6, 8), rng) for _ in op.inputs]
    tensors = [Tensor.from_numpy(b) for b in bases]
    views = [t[key] for t in tensors]
    expected_view = testing.reference(op, [b[key] for b in bases], data_type)
    target = views[-1]
    assert target.offset % 16 == 0
    assert testing.front_end(op, views, data_type, out=target) is target
    expected = bases[-1].copy()
    expected[key] = expected_view
    assert testing.same_bits(tensors[-1].numpy(), expected)


@pytest.mark.parametrize("data_type", [DataType.UINT8, DataType.INT16, DataType.FLOAT32, DataType.UINT64],
                         ids=lambda t: t.name.lower())
def test_outputs_off_a_16_byte_boundary(rng, data_type):
    """An out starting off a 16-byte boundary (odd element offsets, sub-word types, lengths
    around a word and a vector) is bound from the boundary below and written from its element
    offset by the strided kernel: its elements are right and every byte around it is kept."""
    raw = f"u{data_type.size}"
    x, y = (testing.sample(data_type, (64,), rng) for _ in range(2))
    t, u = Tensor.from_numpy(x), Tensor.from_numpy(y)
    x, y = x.view(raw), y.view(raw)  # the expected bits
    base = Tensor.from_numpy(poisoned((64,), data_type.numpy))
    want = poisoned((64,), data_type.numpy).view(raw)
    for start, n in ((1, 1), (3, 5), (5, 17), (7, 40), (2, 3)):
        got = dmlgpu.bit_xor(t[:n], u[3:3 + n], out=base[start:start + n])
        assert testing.same_bits(got.numpy().view(raw), x[:n] ^ y[3:3 + n])
        want[start:start + n] = x[:n] ^ y[3:3 + n]
        assert testing.same_bits(base.numpy().view(raw), want)
    strided = base[1::3]
    dmlgpu.bit_not(t[:strided.shape[0]], out=strided)
    want[1::3] = ~x[:want[1::3].shape[0]]
    assert testing.same_bits(base.numpy().view(raw), want)


def test_misaligned_outputs_in_place_and_beside_their_inputs(rng):
    x = testing.sample(DataType.UINT8, (32,), rng)
    t = Tensor.from_numpy(x)
    view = t[1:]
    view ^= 1  # in place, off a 16-byte boundary
    x[1:] ^= 1
    assert testing.same_bits(t.numpy(), x)
    dmlgpu.bit_not(t[:8], out=t[11:19])  # the input lies in the output's aligned-down binding
    x[11:19] = ~x[:8]
    assert testing.same_bits(t.numpy(), x)
    with pytest.raises(ValidationError, match="overlapping"):
        dmlgpu.bit_not(t[:8], out=t[3:11])
    assert testing.same_bits(t.numpy(), x), "work ran before the error"


def test_views_that_share_bytes_are_hazards():
    t = Tensor.from_numpy(np.arange(64, dtype=np.uint32).reshape(4, 16))
    with pytest.raises(ValidationError, match="overlaps"):
        dmlgpu.bit_not(t[::2], out=t[1:3])  # disjoint elements, overlapping ranges: DirectML's rule


def test_repeated_calls_tell_views_apart(rng):
    x = testing.sample(DataType.UINT8, (16, 16), rng)
    t = Tensor.from_numpy(x)
    out = Tensor.empty((16, 16), np.uint8)
    for view, expected in ((t, x), (t.T, x.T), (t, x), (t.T, x.T)):  # same buffer, offset and shape
        dmlgpu.bit_not(view, out=out)
        assert testing.same_bits(out.numpy(), ~expected)
    for target, expected in ((out, ~x), (out.T, ~x.T), (out, ~x)):
        dmlgpu.bit_not(t, out=target)
        assert testing.same_bits(out.numpy(), expected)


def test_empty_and_zero_d_views(rng):
    x = testing.sample(DataType.INT8, BASE, rng)
    t = Tensor.from_numpy(x)
    empty = dmlgpu.sign(t[:, 5:])
    assert empty.shape == (4, 0, 6) and empty.numpy().shape == (4, 0, 6)
    got = dmlgpu.bit_xor(t[1, 2, 3], t[2])
    assert testing.same_bits(got.numpy(), testing.reference(OPERATORS[1], [x[1, 2, 3], x[2]], DataType.INT8))


def test_repeated_fresh_results_tell_views_apart(rng):
    """New results of repeated calls skip validation: the views' strides and offsets are part
    of what is remembered, and a misaligned input's result keeps its own offset."""
    x = testing.sample(DataType.UINT32, (8, 8), rng)
    t = Tensor.from_numpy(x)
    views = ((t[:4, :4], x[:4, :4]), (t.T[:4, :4], x.T[:4, :4]), (t[1:, 1:], x[1:, 1:]), (t[2, 3:], x[2, 3:]))
    for _ in range(3):
        for view, expected in views:
            result = ~view
            assert result.is_packed and result.offset % 16 == 0
            assert testing.same_bits(result.numpy(), ~expected)
            assert testing.same_bits((view ^ view).numpy(), np.zeros_like(expected))
