"""dmlgpu: DirectML's element-wise operators, with DirectML's semantics, on any Vulkan device.

The operator table in `dmlgpu.table.operators` drives everything: each row gives a descriptor class
(`ElementWise<Name>OperatorDesc`), a numpy front-end function named after its `short` name,
validation, kernel selection and the tests. Semantics follow DirectML's documentation (raw-bit
bitwise operators, SIGN(NaN) = 0).
"""
from .runtime import debug_layer
from .runtime.installation import missing_generated

try:  # first, the modules the build writes from the table (absent from a source tree never built)
    from .front.functions import *  # noqa: F401,F403 -- one function per table row (functions.__all__)
except ModuleNotFoundError as error:
    why = missing_generated(error)
    if why is None:
        raise
    raise why from error
from .describe import operator_descs as descs, graph_descs as graph
from .front import functions, numpy_api, reductions
from .search import hamming
from ._version import __version__
from .describe.bindings import Binding
from .api.command_list import CommandList
from .kernels.compiled_operator import CompiledOperator
from .describe.operator_descs import *  # noqa: F401,F403 -- one descriptor class per table row (descs.__all__)
from .api.device import Buffer, Device, default_device, devices, set_cache_limits
from .table.dtypes import DataType
from .errors import DataTypeError, DeviceError, DeviceMemoryError, ValidationError
from .table.feature_levels import FeatureLevel
from .describe.graph_descs import *  # noqa: F401,F403 -- DML_GRAPH_DESC and its node and edge descriptors
from .compiler.compiled_graph import CompiledGraph
from .front.fuse import fuse
from .search.hamming import HammingIndex, hamming_knn
from .front.reductions import (argmax, argmin, logsumexp, max, mean, min, norm, prod, reduce,  # noqa: A004, F401
                                sum, top_k)  # numpy's (and scipy.special's) names
from .front.tensor import Tensor
from .describe.tensor_desc import TensorDesc, calc_buffer_tensor_size
from .describe.validation import validate

__all__ = [
    "Binding", "Buffer", "CommandList", "CompiledGraph", "CompiledOperator", "DataType", "DataTypeError", "Device",
    "DeviceError", "DeviceMemoryError", "FeatureLevel", "Tensor", "TensorDesc", "ValidationError",
    "calc_buffer_tensor_size", "default_device", "devices", "fuse", "set_cache_limits", "validate", *descs.__all__,
    *functions.__all__, *graph.__all__, "argmax", "argmin", "logsumexp", "max", "mean", "min", "norm", "prod", "reduce",
    "sum", "top_k", "HammingIndex",
    "hamming_knn",
]
