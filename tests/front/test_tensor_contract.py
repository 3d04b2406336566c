"""What a numpy, CuPy or PyTorch user expects of a Tensor and a Device: one device per index,
no comparison by identity, scalars out of one element, raw-bit views, assignment through views,
pickles and copies that carry the data."""
import copy
import inspect
import operator
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import dmlgpu
from dmlgpu import DataType, Tensor, ValidationError, testing
from dmlgpu.front import numpy_api
from dmlgpu.front import tensor as tensor_module
from dmlgpu.table.operators import OPERATORS

from conftest import POISON


def _poisoned(shape, dtype=np.uint32) -> Tensor:
    return Tensor.from_numpy(np.full(shape, POISON, np.uint8).view(dtype) if dtype != np.uint8
                             else np.full(shape, POISON, np.uint8))


def run_script(code: str, timeout=300):
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                            timeout=timeout)
    assert result.returncode == 0, result.stderr[-4000:]
    return result.stdout


# -- Device: one per index -----------------------------------------------------------------------
def test_device_of_an_index_is_one_object(device):
    assert dmlgpu.Device(device.index) is dmlgpu.Device(device.index) is dmlgpu.default_device()
    assert dmlgpu.Device() is device
    with dmlgpu.Device(device.index) as entered:
        assert entered is device and dmlgpu.default_device() is device
        a = Tensor.from_numpy(np.arange(8, dtype=np.uint8))
    with dmlgpu.Device(device.index):
        b = Tensor.from_numpy(np.ones(8, np.uint8))
    assert testing.same_bits((a ^ b).numpy(), np.arange(8, dtype=np.uint8) ^ 1)  # they combine


def test_private_device_is_asked_for_and_kept_apart(device):
    private = dmlgpu.Device(device.index, private=True)
    try:
        assert private is not device and private.private and not device.private
        t = Tensor.from_numpy(np.arange(4, dtype=np.uint8), device=private)
        with pytest.raises(ValidationError, match="Tensors of one device"):
            t ^ Tensor.from_numpy(np.arange(4, dtype=np.uint8))
        assert testing.same_bits(t.to(device).numpy(), np.arange(4, dtype=np.uint8))
    finally:
        private.close()


def test_thousand_with_blocks_leave_memory_flat():
    out = run_script("""
        import resource, dmlgpu
        def rss():
            with open("/proc/self/statm") as f:
                return int(f.read().split()[1]) * resource.getpagesize()
        with dmlgpu.Device(0):
            pass
        before = rss()
        devices = set()
        for _ in range(1000):
            with dmlgpu.Device(0) as d:
                devices.add(id(d))
        print(len(devices), (rss() - before) >> 20)
    """)
    count, grown_mib = map(int, out.split())
    assert count == 1 and grown_mib < 8, out


def test_closing_the_default_device_leaves_the_front_end_usable():
    out = run_script("""
        import numpy as np, dmlgpu
        first = dmlgpu.default_device()
        t = dmlgpu.Tensor.from_numpy(np.arange(4, dtype=np.uint8))
        first.close()
        try:
            t.numpy()
        except dmlgpu.ValidationError:
            print("old tensor refused")
        x = np.arange(4, dtype=np.uint8)
        assert (dmlgpu.bit_not(x) == ~x).all()
        second = dmlgpu.default_device()
        assert second is not first and not second.closed and dmlgpu.Device(0) is second
        assert (dmlgpu.Tensor.from_numpy(x) ^ 1).numpy().tolist() == (x ^ 1).tolist()
        print("ok")
    """)
    assert out.split() == ["old", "tensor", "refused", "ok"]


# -- no answer by identity -----------------------------------------------------------------------
def test_equality_is_refused_with_a_pointer():
    t = Tensor.from_numpy(np.arange(4, dtype=np.uint8))
    for compare in (operator.eq, operator.ne):
        for other in (t, 1, np.arange(4, dtype=np.uint8)):
            with pytest.raises(TypeError, match=r"LOGICAL_EQUALS.*t\.numpy\(\)"):
                compare(t, other)
    with pytest.raises(TypeError, match="unhashable"):
        hash(t)
    assert {t.key: 1}[t[...].key] == 1  # views are told apart (memo keys) by `.key`


@pytest.mark.parametrize("dtype, value, truth", [
    (np.uint8, 0, False), (np.uint8, 7, True), (np.int64, -1, True), (np.float32, -0.0, False),
    (np.float32, np.nan, True), (np.float16, 0.5, True)])
def test_truth_of_one_element(dtype, value, truth):
    for shape in ((), (1,), (1, 1)):
        t = Tensor.from_numpy(np.full(shape, value, dtype))
        assert bool(t) is truth is bool(np.full(shape, value, dtype))


@pytest.mark.parametrize("shape", [(2,), (0,), (3, 0)])
def test_truth_of_several_or_no_elements_is_a_value_error(shape):
    with pytest.raises(ValueError):
        bool(np.zeros(shape, np.uint8))
    with pytest.raises(ValueError, match="ambiguous"):
        bool(Tensor.from_numpy(np.zeros(shape, np.uint8)))


# -- scalars and lists ---------------------------------------------------------------------------
NUMPY_TYPES = [d for d in DataType if d != DataType.UNKNOWN and d.bits % 8 == 0]


@pytest.mark.parametrize("data_type", NUMPY_TYPES, ids=lambda d: d.name)
def test_item_tolist_int_float_match_numpy(data_type, rng):
    x = testing.sample(data_type, (3, 4), rng)
    t = Tensor.from_numpy(x)
    for got, want in ((t.tolist(), x.tolist()), (t[1].tolist(), x[1].tolist()), (t[2, 3].tolist(), x[2, 3].tolist())):
        assert type(got) is type(want) and testing.same_bits(np.array(got, x.dtype), np.array(want, x.dtype))
    assert all(type(v) is type(x.flat[0].item()) for row in t.tolist() for v in row)
    one = t[1, 2]
    assert type(one.item()) is type(x[1, 2].item()) and testing.same_bits(np.array(one.item(), x.dtype),
                                                                           np.array(x[1, 2].item(), x.dtype))
    if not np.isnan(x[1, 2]):
        assert int(one) == int(x[1, 2]) and float(one) == float(x[1, 2])
    with pytest.raises(ValueError, match="size 1"):
        t.item()
    with pytest.raises(TypeError, match="one element"):
        int(t)


def test_index_of_a_0d_integer_tensor():
    t = Tensor.from_numpy(np.array([5, 2], np.int16))
    assert operator.index(t[0]) == 5 and list(range(t[1])) == [0, 1] and [9, 8, 7][t[1]] == 7
    for bad in (t, t[0:1], Tensor.from_numpy(np.float32(1))):
        with pytest.raises(TypeError, match="index"):
            operator.index(bad)


# -- raw-bit views -------------------------------------------------------------------------------
@pytest.mark.parametrize("key", [np.s_[...], np.s_[1:], np.s_[:, 8:], np.s_[::2], np.s_[2]], ids=str)
@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.float32, np.uint64, np.float16])
def test_view_matches_numpy(rng, key, dtype):
    x = testing.sample(DataType.UINT32, (4, 16), rng)
    t = Tensor.from_numpy(x)[key]
    try:
        expected = x[key].view(dtype)
    except ValueError:
        with pytest.raises(ValidationError, match="numpy's rules"):
            t.view(dtype)
        return
    got = t.view(dtype)
    assert got.buffer is t.buffer and got.shape == expected.shape and got.dtype == expected.dtype
    assert testing.same_bits(got.numpy(), expected)


def test_view_refuses_what_numpy_refuses():
    x = np.arange(12, dtype=np.uint8).reshape(3, 4)
    t = Tensor.from_numpy(x)
    for bad_view in (t.T, t[:, :3], t[1, 1:]):  # strided last axis; 3 bytes; an odd offset
        with pytest.raises(ValidationError):
            bad_view.view(np.uint16)
    for bad in (x.T, x[:, :3], x[1, 1:]):
        with pytest.raises(ValueError):
            bad.view(np.uint16)


# -- assignment through views --------------------------------------------------------------------
@pytest.mark.parametrize("key, value", [
    (np.s_[...], 7), (np.s_[1], 3), (np.s_[1:3, 4:8], np.arange(4, dtype=np.uint32)),
    (np.s_[:, 4::2], np.arange(24, dtype=np.uint32).reshape(4, 6)), (np.s_[2, 3], np.uint64(9)),
    (np.s_[:, 8:], 2.9), (np.s_[0], np.arange(16, dtype=np.int64)), (np.s_[3:3], 5)], ids=str)
def test_setitem_from_host_data_matches_numpy(key, value):
    expected = np.full((4, 16), 0xA5A5A5A5, np.uint32)  # poisoned
    t = Tensor.from_numpy(expected)
    expected[key] = value
    t[key] = value
    assert testing.same_bits(t.numpy(), expected)


def test_setitem_from_tensors():
    x = np.arange(64, dtype=np.uint32).reshape(4, 16)
    t = Tensor.from_numpy(x)
    t[1:3] = Tensor.from_numpy(np.full(16, 5, np.uint32))  # broadcast
    x[1:3] = 5
    t[3] = Tensor.from_numpy(np.arange(16, dtype=np.uint32).reshape(1, 1, 16))  # leading 1s dropped
    x[3] = np.arange(16, dtype=np.uint32)
    t[1:] = t[:-1]  # overlapping rows of the same buffer: numpy's answer
    x[1:] = x[:-1].copy()
    t[:, 4::4] = t[:, :3]  # a strided target
    x[:, 4::4] = x[:, :3].copy()
    assert testing.same_bits(t.numpy(), x)
    with pytest.raises(ValidationError, match="the target's data type"):
        t[0] = Tensor.from_numpy(np.zeros(16, np.int32))
    with pytest.raises(ValidationError, match="broadcasts to the target's"):
        t[0] = Tensor.from_numpy(np.zeros(3, np.uint32))
    assert testing.same_bits(t.numpy(), x)


def test_setitem_at_any_offset():
    """Assignment into strided views and from Tensors starting off a 16-byte boundary: the
    target is bound from the boundary below and written from its element offset."""
    t = Tensor.from_numpy(np.full(64, POISON, np.uint8))
    with pytest.raises(OverflowError):
        t[:] = 300  # numpy's rule for an int that does not fit
    assert (t.numpy() == POISON).all()
    expected = np.full(64, POISON, np.uint8)
    t[1::2] = 0  # strided, starting at byte 1
    expected[1::2] = 0
    t[1:5] = Tensor.from_numpy(np.arange(7, 11, dtype=np.uint8))
    expected[1:5] = np.arange(7, 11)
    t[9:13] = np.arange(4, dtype=np.uint8)  # packed host data: one write at any offset
    expected[9:13] = np.arange(4)
    assert t.numpy().tolist() == expected.tolist()


@pytest.mark.parametrize("op", [op for op in OPERATORS if op.python_operator and len(op.inputs) == 2],
                         ids=lambda op: op.python_operator)
def test_in_place_operators_on_views(op, rng):
    """`t[key] op= u` is `t[key] = t[key].__iop__(u)`: written in place, then assigned to itself."""
    x = testing.sample(DataType.UINT32, (4, 16), rng)
    y = testing.sample(DataType.UINT32, (16,), rng) & 0xF
    t, u = Tensor.from_numpy(x), Tensor.from_numpy(y)
    python = getattr(operator, f"__i{op.python_operator}__")
    for key in (np.s_[:2], np.s_[1], np.s_[:, 4:8], np.s_[2, 4]):
        n = x[key].shape[-1] if x[key].ndim else 1
        operand, operand_np = (u[:n], y[:n]) if x[key].ndim else (u[0], y[0])
        expected = x.copy()
        expected[key] = testing.reference(op, [x[key], operand_np], DataType.UINT32)
        view = t[key]
        view = python(view, operand)
        t[key] = view
        assert testing.same_bits(t.numpy(), expected), key
        x = expected


def test_xor_of_a_slice_in_place():
    t = Tensor.from_numpy(np.arange(8, dtype=np.uint8))
    t[:4] ^= 1
    assert t.tolist() == [1, 0, 3, 2, 4, 5, 6, 7]


# -- pickles and copies carry the data -----------------------------------------------------------
@pytest.mark.parametrize("key", [np.s_[...], np.s_[1:, ::3], np.s_[2, 5]], ids=str)
def test_pickle_and_deepcopy_carry_the_data(device, rng, key):
    x = testing.sample(DataType.FLOAT32, (4, 16), rng)
    t = Tensor.from_numpy(x)[key]
    for made in (pickle.loads(pickle.dumps(t)), copy.deepcopy(t), copy.copy(t)):
        assert made.buffer is not t.buffer and made.device is device and made.is_packed
        assert testing.same_bits(made.numpy(), x[key])
    private = dmlgpu.Device(device.index, private=True)
    try:
        with private:  # lands on the current device
            for made in (pickle.loads(pickle.dumps(t)), copy.deepcopy(t)):
                assert made.device is private and testing.same_bits(made.numpy(), x[key])
    finally:
        private.close()


def test_to_takes_devices_only(device):
    t = Tensor.from_numpy(np.arange(4, dtype=np.uint8))
    assert t.to(device) is t and t.to(dmlgpu.Device(device.index)) is t
    for bad in ("cpu", 0, None, np):
        with pytest.raises(TypeError, match=r"\.numpy\(\)"):
            t.to(bad)


# -- the smaller checks --------------------------------------------------------------------------
def test_released_or_foreign_buffers_are_refused(device):
    buffer = device.allocate(16)
    buffer.release()
    with pytest.raises(ValidationError, match="released"):
        Tensor(buffer, (4,), DataType.UINT32)
    with pytest.raises(TypeError, match=r"Buffer, not a ndarray: to make a Tensor from data, call dmlgpu\.asarray"):
        Tensor(np.zeros(16, np.uint8), (4,), DataType.UINT32)


def test_reshape_sizes_do_not_wrap():
    empty = Tensor.empty((0,), np.uint8)
    for shape in ((2**32, 2**32), (2**63, 2), (-1, 2**64)):
        with pytest.raises(ValidationError, match="shape"):
            empty.reshape(shape)
    assert empty.reshape(0, 5).shape == (0, 5)


def test_more_than_32_dimensions_are_broadcast_not_numpy_errors():
    """numpy's broadcast helper stops at 32 dimensions (a raw RuntimeError); dmlgpu's does not,
    and what does not merge into DirectML's 8 is a ValidationError."""
    x = np.arange(2, dtype=np.uint8).reshape((2,) + (1,) * 39)
    y = np.full((1,) * 63 + (1,), 3, np.uint8)
    assert testing.same_bits(dmlgpu.bit_xor(x, y), x ^ y)
    t = Tensor.from_numpy(x)
    assert testing.same_bits((t ^ Tensor.from_numpy(y)).numpy(), x ^ y)
    assert testing.same_bits(dmlgpu.bit_xor(np.zeros((0,) + (3,) * 39, np.uint8), 1), np.zeros((0,) + (3,) * 39, np.uint8))
    with pytest.raises(ValidationError, match="DimensionCount"):
        dmlgpu.bit_not(Tensor.empty((2,) * 12, np.uint8).transpose(*reversed(range(12))))


def test_operators_are_defined_with_tensor_from_the_table():
    expected = set()
    for op in OPERATORS:
        if op.python_operator:
            names = [""] if len(op.inputs) == 1 else ["", "r", "i"]
            expected |= {f"__{p}{op.python_operator}__" for p in names}
    for name in expected:  # declared by tools/generate_functions.py in Tensor's base (tests/test_typing.py)
        method = getattr(Tensor, name)
        assert method.__qualname__ == f"TensorOperators.{name}" and method.__module__ == "dmlgpu.front.tensor_operators"
    assert "setattr" not in inspect.getsource(numpy_api) and "install_front_end" not in dir(tensor_module)
    assert "numpy_api" not in inspect.getsource(tensor_module)
