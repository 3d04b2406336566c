"""dmlgpu: DirectML's element-wise BIT_NOT, BIT_XOR, SIGN and BIT_COUNT on any Vulkan device.

Semantics follow DirectML's documentation (raw-bit bitwise operators, SIGN(NaN) = 0); the
operator table in `dmlgpu.operators` drives validation, kernel selection and the tests.
"""
from .runtime import debug_layer
from .bindings import Binding
from .command_list import CommandList
from .compiled import CompiledOperator
from .descs import (
    ElementWiseBitCountOperatorDesc,
    ElementWiseBitNotOperatorDesc,
    ElementWiseBitXorOperatorDesc,
    ElementWiseSignOperatorDesc,
)
from .device import Buffer, Device, default_device, devices
from .dtypes import DataType
from .errors import DeviceError, DeviceMemoryError, ValidationError
from .feature_levels import FeatureLevel
from .numpy_api import bit_count, bit_not, bit_xor, sign
from .tensor import Tensor
from .tensor_desc import TensorDesc, calc_buffer_tensor_size
from .validation import validate

__version__ = "0.1.0"
__all__ = [
    "Binding", "Buffer", "CommandList", "CompiledOperator", "DataType", "Device", "DeviceError",
    "DeviceMemoryError", "ElementWiseBitCountOperatorDesc", "ElementWiseBitNotOperatorDesc",
    "ElementWiseBitXorOperatorDesc", "ElementWiseSignOperatorDesc", "FeatureLevel", "Tensor", "TensorDesc",
    "ValidationError", "bit_count", "bit_not", "bit_xor", "calc_buffer_tensor_size",
    "default_device", "devices", "sign", "validate",
]
