"""dmlgpu's exceptions cross process boundaries (Dask workers, multiprocessing) intact."""
import pickle

import numpy as np
import pytest

import dmlgpu
from dmlgpu import errors

CASES = {
    "validation": errors.ValidationError("DML_OPERATOR_ELEMENT_WISE_BIT_XOR", "BTensor", "Sizes", (2, 3),
                                         "must equal ATensor.Sizes (2, 4)"),
    "validation-no-tensor": errors.ValidationError("dmlgpu", None, "feature_level", 1, "allowed: None"),
    "data-type": errors.DataTypeError("DML_OPERATOR_ELEMENT_WISE_SIGN", "InputTensor", "DataType", "FLOAT64",
                                      "allowed: FLOAT32, FLOAT16"),
    "device": errors.DeviceError("no Vulkan device 3 could be opened"),
    "device-memory": errors.DeviceMemoryError("out of device memory"),
}


@pytest.mark.parametrize("name", CASES)
def test_errors_pickle_round_trip(name):
    error = CASES[name]
    error.__notes__ = ["raised on a worker"]  # what add_note() sets (Python 3.11+)
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error)
    assert (str(copy), copy.args, vars(copy)) == (str(error), error.args, vars(error))


def test_a_data_type_rejection_is_a_type_error_and_a_validation_error():
    assert issubclass(errors.DataTypeError, errors.ValidationError) and issubclass(errors.DataTypeError, TypeError)
    rejections = [
        lambda: dmlgpu.sign(np.ones(3)),                                   # the table's rule (validate)
        lambda: dmlgpu.bit_not(np.zeros(3, np.complex64)),                 # no DirectML data type
        lambda: dmlgpu.bit_xor(np.zeros(3, np.uint8), np.zeros(3, np.uint16)),  # DirectML does not promote
        lambda: dmlgpu.bit_xor(np.zeros(3, np.uint8), 1.5),                # a float scalar with integers
        lambda: dmlgpu.bit_not(np.zeros(3, np.uint8), out=np.zeros(3, np.uint16)),
        lambda: dmlgpu.bit_count(np.zeros(3, np.uint8), dtype=np.int8),
        lambda: dmlgpu.Tensor.from_numpy(np.zeros(3, np.complex64)),
    ]
    for reject in rejections:
        try:
            reject()
        except TypeError as error:
            assert isinstance(error, errors.DataTypeError), error
        else:
            raise AssertionError("not rejected")
