"""dmlgpu's exceptions cross process boundaries (Dask workers, multiprocessing) intact."""
import pickle

import pytest

from dmlgpu import errors

CASES = {
    "validation": errors.ValidationError("DML_OPERATOR_ELEMENT_WISE_BIT_XOR", "BTensor", "Sizes", (2, 3),
                                         "must equal ATensor.Sizes (2, 4)"),
    "validation-no-tensor": errors.ValidationError("dmlgpu", None, "feature_level", 1, "allowed: None"),
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
