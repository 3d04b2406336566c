"""What a CuPy (or numpy, or PyTorch) user tries first works, or fails with a message that says
what to do instead: making Tensors (`asarray`, `empty`, `zeros`, `ones`, `full`, not `Tensor(data)`),
Tensor's reduction and reshaping methods, printing the values, numpy's functions and DLPack on a
Tensor, a closed device, and errors that name the feature level or cast the user can change."""
import re

import numpy as np
import pytest

import dmlgpu
from dmlgpu import DataType, FeatureLevel, Tensor, ValidationError
from dmlgpu.table import reference


@pytest.fixture
def private():
    device = dmlgpu.Device(dmlgpu.default_device().index, private=True)
    yield device
    device.close()


# -- making Tensors ------------------------------------------------------------------------------
@pytest.mark.parametrize("data, dtype, expected", [
    ([1, 2, 3], None, np.array([1, 2, 3])),                       # numpy's int64 for Python ints
    ([[1, 2], [3, 4]], np.uint8, np.array([[1, 2], [3, 4]], np.uint8)),
    (2.5, np.float32, np.float32(2.5)),                           # a scalar: a 0-d Tensor
    (np.arange(6, dtype=np.int16)[::2], None, np.array([0, 2, 4], np.int16)),  # a view: its values
    (np.array([1, 2], ">u4"), None, np.array([1, 2], np.uint32)),  # big-endian: values kept, native
])
def test_asarray_uploads_what_numpy_makes_of_the_data(data, dtype, expected):
    t = dmlgpu.asarray(data, dtype=dtype)
    assert isinstance(t, Tensor) and t.is_packed
    got = t.numpy()
    assert got.dtype == expected.dtype.newbyteorder("=") and got.shape == np.shape(expected)
    assert (got == expected).all()


def test_asarray_of_a_tensor_is_the_tensor_or_its_copy_on_another_device(private):
    t = dmlgpu.asarray(np.arange(4, dtype=np.uint32))
    assert dmlgpu.asarray(t) is t and dmlgpu.asarray(t, dtype=np.uint32) is t
    moved = dmlgpu.asarray(t, device=private)
    assert moved.device is private and moved.numpy().tolist() == [0, 1, 2, 3]
    with pytest.raises(ValidationError, match=r"DirectML converts no types: t\.view\(dtype\)"):
        dmlgpu.asarray(t, dtype=np.int64)
    with pytest.raises(ValidationError):
        dmlgpu.asarray([True, False])  # no bool in DirectML


def test_empty_zeros_ones_full_fill_as_numpy_does(private):
    assert dmlgpu.zeros((2, 3)).numpy().tolist() == np.zeros((2, 3)).tolist()
    assert dmlgpu.zeros(3).dtype == np.float64 and dmlgpu.empty((2, 2), np.uint8).shape == (2, 2)
    assert dmlgpu.ones(4, np.int8).numpy().tolist() == [1, 1, 1, 1]
    full = dmlgpu.full((3, 5), 7, device=private)
    assert full.device is private and full.dtype == np.full((3, 5), 7).dtype
    assert (full.numpy() == 7).all()
    assert dmlgpu.full((2,), -0.0, np.float32).numpy().view(np.uint32).tolist() == [0x80000000] * 2  # bits kept
    assert dmlgpu.full((), 3, np.uint16).numpy() == 3 and dmlgpu.full((0, 4), 1, np.uint8).size == 0
    with pytest.raises(OverflowError):
        dmlgpu.full((2,), 300, np.uint8)
    with pytest.raises(ValidationError, match="a scalar"):
        dmlgpu.full((2,), [1, 2], np.uint8)


def test_tensor_of_data_points_to_asarray():
    with pytest.raises(TypeError, match=r"not a list: to make a Tensor from data, call dmlgpu\.asarray\(data\)"):
        Tensor([1, 2, 3])
    buffer = dmlgpu.default_device().allocate(16)
    with pytest.raises(TypeError, match="needs the shape and the data type"):
        Tensor(buffer, (4,))


# -- methods ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["sum", "prod", "min", "max", "argmin", "argmax"])
@pytest.mark.parametrize("axis, keepdims", [(None, False), (0, False), (1, True), ((0, 1), False)])
def test_reduction_methods_are_the_functions(method, axis, keepdims):
    x = np.random.default_rng(1).integers(0, 1 << 16, (3, 5), dtype=np.uint32)
    t = dmlgpu.asarray(x)
    got = getattr(t, method)(axis=axis, keepdims=keepdims)
    assert isinstance(got, Tensor)
    expected = getattr(dmlgpu, method)(x, axis=axis, keepdims=keepdims)
    assert got.shape == expected.shape and (got.numpy() == expected).all()
    if method in ("min", "max", "argmin", "argmax") and not isinstance(axis, tuple):
        assert (got.numpy() == getattr(np, method)(x, axis=axis, keepdims=keepdims)).all()


def test_ravel_is_a_view_where_it_can_be_and_flatten_a_copy():
    t = dmlgpu.asarray(np.arange(12, dtype=np.uint16).reshape(3, 4))
    flat = t.ravel()
    assert flat.buffer is t.buffer and flat.shape == (12,)
    assert t.T.ravel().tolist() == np.arange(12).reshape(3, 4).T.ravel().tolist()
    assert t.T.ravel().buffer is not t.buffer  # not C-ordered: a copy, as numpy's
    copied = t.flatten()
    assert copied.buffer is not t.buffer and copied.tolist() == list(range(12))
    assert dmlgpu.asarray(np.uint8(5)).ravel().shape == (1,)


# -- printing ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("x", [
    np.arange(12, dtype=np.uint8).reshape(3, 4),
    np.array([1.5, -0.0, np.nan, np.inf], np.float32),
    np.array(7, np.int64),
    np.arange(3000, dtype=np.uint32).reshape(30, 100),          # past threshold: numpy's summary
    np.arange(2 * 3 * 2000, dtype=np.int16).reshape(2, 3, 2000),
], ids=["small", "floats", "0-d", "summary", "summary-3d"])
def test_repr_and_str_show_numpys_text(x):
    t = dmlgpu.asarray(x)
    assert str(t) == str(x)
    body = np.array2string(x, separator=", ", prefix="Tensor(")
    assert repr(t) == f"Tensor({body}, dtype={x.dtype.name}, device={t.device.index})"


def test_print_options_apply_and_a_closed_device_prints(private):
    x = np.linspace(0, 1, 7, dtype=np.float32)
    t = dmlgpu.asarray(x, device=private)
    with np.printoptions(precision=2, threshold=4, edgeitems=1):
        assert str(t) == str(x) and "..." in str(t)
    private.close()
    assert repr(t) == "Tensor(<its device was closed>, shape=(7,), dtype=float32)"
    assert "closed" in str(t)


# -- numpy, DLPack, a closed device -------------------------------------------------------------------
@pytest.mark.parametrize("call, names", [
    (np.sum, "dmlgpu.sum(t) (or t.sum())"), (np.max, "dmlgpu.max(t) (or t.max())"),
    (np.argmax, "dmlgpu.argmax(t)"), (lambda t: np.partition(t, 1), "dmlgpu.top_k(t, k)"),
    (np.add.reduce, "dmlgpu.sum(t) (or t.sum())"), (np.minimum.reduce, "dmlgpu.min(t)"),
    (np.mean, "numpy.mean does not run on a dmlgpu.Tensor: call dmlgpu.mean(t)"),
    (np.linalg.norm, "numpy.linalg.norm does not run on a dmlgpu.Tensor: call dmlgpu.norm(t)"),
    (np.median, "numpy.median has no dmlgpu counterpart"), (np.concatenate, "call t.numpy()"),
])
def test_numpy_functions_name_what_computes_them(call, names):
    t = dmlgpu.asarray(np.arange(6, dtype=np.uint32))
    with pytest.raises(TypeError) as error:
        call(t) if call is not np.concatenate else call([t, t])
    assert names in str(error.value)


def test_numpy_layout_functions_run_as_the_tensor_methods():
    """np.transpose/reshape/ravel/copy/shape/ndim/size take a Tensor as CuPy's arrays are taken
    (dask's blockwise calls them on chunks): Tensors out, views where the methods give views."""
    x = np.arange(24, dtype=np.uint16).reshape(2, 3, 4)
    t = dmlgpu.asarray(x)
    for got, want in ((np.transpose(t), x.T), (np.transpose(t, (1, 0, 2)), np.transpose(x, (1, 0, 2))),
                      (np.reshape(t, (4, 6)), x.reshape(4, 6)), (np.reshape(t, -1), x.ravel()),
                      (np.ravel(t), x.ravel()), (np.copy(t), x)):
        assert isinstance(got, dmlgpu.Tensor) and got.numpy().tolist() == want.tolist()
    assert np.transpose(t).buffer is t.buffer and np.copy(t).buffer is not t.buffer
    assert (np.shape(t), np.ndim(t), np.size(t), np.size(t, 1)) == ((2, 3, 4), 3, 24, 3)
    with pytest.raises(TypeError, match="order='C' only"):
        np.ravel(t, order="F")


def test_dlpack_consumers_are_told_to_download():
    t = dmlgpu.asarray(np.arange(6, dtype=np.uint8))
    with pytest.raises(BufferError, match=r"download it with t\.numpy\(\) \(torch\.from_numpy\(t\.numpy\(\)\)"):
        np.from_dlpack(t)
    # Libraries that walk an object as nested sequences (torch.as_tensor before DLPack) meet a 0-d
    # element's len(): it says the same.
    with pytest.raises(TypeError, match=r"torch\.as_tensor, cannot take a Tensor: download it with t\.numpy\(\)"):
        len(t[0])


def test_torch_as_tensor_says_to_download():
    torch = pytest.importorskip("torch")
    t = dmlgpu.asarray(np.arange(6, dtype=np.uint8))
    with pytest.raises((BufferError, TypeError), match=r"t\.numpy\(\)"):
        torch.as_tensor(t)


def test_a_closed_devices_tensors_say_the_device_was_closed(private):
    t = dmlgpu.asarray(np.arange(6, dtype=np.uint8), device=private)
    name = private.name
    private.close()
    with pytest.raises(ValidationError, match=re.escape(f"a buffer of closed device {name}") + ".*its device was closed"):
        t.numpy()
    with pytest.raises(ValidationError, match="closed"):
        ~t
    with pytest.raises(ValidationError, match="its device was closed"):
        Tensor(t.buffer, (6,), DataType.UINT8)


# -- errors that say what to change -------------------------------------------------------------------
def test_a_type_a_newer_level_takes_names_that_level_and_it_works():
    x = np.array([-2, 0, 3], np.int8)
    with pytest.raises(dmlgpu.DataTypeError, match=r"allowed at DML_FEATURE_LEVEL_2_0: FLOAT32, FLOAT16; "
                       r"DML_FEATURE_LEVEL_2_1 and newer take INT8: pass "
                       r"feature_level=dmlgpu\.FeatureLevel\.LEVEL_2_1 \(or newer\)"):
        dmlgpu.sign(x, feature_level=FeatureLevel.LEVEL_2_0)
    assert dmlgpu.sign(x, feature_level=FeatureLevel.LEVEL_2_1).tolist() == [-1, 0, 1]


def test_dimensions_a_newer_level_takes_name_that_level():
    d = dmlgpu.TensorDesc(DataType.FLOAT32, [1, 1, 1, 1, 1])
    with pytest.raises(ValidationError, match=r"exactly 4; DML_FEATURE_LEVEL_3_0 and newer take 5 dimensions"):
        dmlgpu.validate(dmlgpu.ElementWiseSignOperatorDesc(d, d), FeatureLevel.LEVEL_2_1)
    dmlgpu.validate(dmlgpu.ElementWiseSignOperatorDesc(d, d), FeatureLevel.LEVEL_3_0)


def test_a_type_no_level_takes_names_the_cast_and_it_gives_directmls_answer():
    amounts = np.array([-1, 1, 40], np.int32)
    with pytest.raises(dmlgpu.DataTypeError, match=r"no feature level takes INT32 here: reinterpret its bits with "
                       r"\.view\(numpy\.uint32\)"):
        dmlgpu.bit_shift_left(amounts, 1)
    viewed = amounts.view(np.uint32)
    assert (dmlgpu.bit_shift_left(viewed, 1) == reference.bit_shift_left(viewed, np.uint32(1))).all()
    with pytest.raises(dmlgpu.DataTypeError, match=r"no feature level takes FLOAT64 here: cast with "
                       r"\.astype\(numpy\.float32\) \(which may round\)"):
        dmlgpu.sign(np.array([-2.0, 0.5]))
    with pytest.raises(dmlgpu.DataTypeError, match=r"no feature level takes INT8 here: cast with \.astype\(numpy\.int32\)"):
        dmlgpu.sum(np.array([1, 2], np.int8))


def test_a_level_is_named_only_where_the_user_chose_it_or_passing_one_is_the_remedy():
    """With no feature_level (the newest), a rejection says what is allowed and the cast, naming no
    level (no level takes more than the newest); a level the user chose is named, and where a newer
    one takes the type, the message says which to pass. Every message still names operator,
    tensor, field, value given and what is allowed."""
    with pytest.raises(dmlgpu.DataTypeError) as error:
        dmlgpu.sum(np.array([1, 2], np.int8))
    assert str(error.value) == ("DML_OPERATOR_REDUCE: InputTensor.DataType is INT8; allowed: FLOAT32, FLOAT16, "
                                "INT64, INT32, UINT64, UINT32; no feature level takes INT8 here: cast with "
                                ".astype(numpy.int32)")
    assert (error.value.operator, error.value.tensor, error.value.field, error.value.value) == \
        ("DML_OPERATOR_REDUCE", "InputTensor", "DataType", DataType.INT8)
    defaults = [lambda: dmlgpu.sign(np.array([0.5])), lambda: dmlgpu.mean(np.arange(3)),
                lambda: dmlgpu.bit_shift_left(np.arange(3, dtype=np.int32), 1),
                lambda: dmlgpu.bit_count(np.arange(3, dtype=np.uint8), dtype=np.uint16),
                lambda: dmlgpu.validate(dmlgpu.ElementWiseBitNotOperatorDesc(
                    *[dmlgpu.TensorDesc(DataType.UINT8, [1] * 9)] * 2))]
    for call in defaults:
        with pytest.raises(ValidationError) as error:
            call()
        assert "DML_FEATURE_LEVEL" not in str(error.value) and "; allowed: " in str(error.value), str(error.value)
    with pytest.raises(dmlgpu.DataTypeError) as error:  # chosen, and a newer level is the remedy
        dmlgpu.sign(np.array([1], np.int8), feature_level=FeatureLevel.LEVEL_2_0)
    assert "allowed at DML_FEATURE_LEVEL_2_0: FLOAT32, FLOAT16; DML_FEATURE_LEVEL_2_1 and newer take INT8: pass " \
        "feature_level=dmlgpu.FeatureLevel.LEVEL_2_1 (or newer)" in str(error.value)
    with pytest.raises(dmlgpu.DataTypeError) as error:  # chosen, no level helps: the level is still the user's
        dmlgpu.sign(np.array([0.5]), feature_level=FeatureLevel.LEVEL_2_0)
    assert "allowed at DML_FEATURE_LEVEL_2_0: FLOAT32, FLOAT16; no feature level takes FLOAT64" in str(error.value)


def test_an_output_type_no_level_takes_names_the_types_to_ask_for():
    with pytest.raises(dmlgpu.DataTypeError, match=r"ask for numpy\.uint32 or numpy\.uint8 \(dtype= or out=\)"):
        dmlgpu.bit_count(np.arange(4, dtype=np.uint8), dtype=np.uint16)
