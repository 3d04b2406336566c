"""dmlgpu: DirectML's element-wise operators, with DirectML's semantics, on any Vulkan device.

The operator table in `dmlgpu.table.operators` drives everything: each row gives a descriptor class
(`ElementWise<Name>OperatorDesc`), a numpy front-end function named after its `short` name,
validation, kernel selection and the tests. Semantics follow DirectML's documentation (raw-bit
bitwise operators, SIGN(NaN) = 0).

`dir(dmlgpu)` shows the public names (`__all__`); the subpackages (`dmlgpu.dask`, ...) are
imported by name.
"""
from .runtime import debug_layer  # noqa: F401 -- first: the validation layer's set-up precedes Kompute
from .runtime.installation import missing_generated

try:  # first, the modules the build writes from the table (absent from a source tree never built)
    from .front.functions import *  # noqa: F401,F403 -- one function per table row (functions.__all__)
except ModuleNotFoundError as error:
    why = missing_generated(error)
    if why is None:
        raise
    raise why from error
from .describe.graph_descs import __all__ as _graph_names
from .describe.operator_descs import __all__ as _descriptor_names
from .front.functions import __all__ as _function_names
from ._version import __version__
from .describe.bindings import Binding
from .api.command_list import CommandList
from .kernels.compiled_operator import CompiledOperator
from .describe.operator_descs import *  # noqa: F401,F403 -- one descriptor class per table row (descs.__all__)
from .api.device import Buffer, Device, default_device, devices, set_cache_limits
from .table.dtypes import DataType
from .errors import DataTypeError, DeviceError, DeviceMemoryError, ValidationError
from .table.feature_levels import FeatureLevel
from .table.operators import AxisDirection, ReduceFunction  # REDUCE's and TOP_K1's attributes
from .describe.graph_descs import *  # noqa: F401,F403 -- DML_GRAPH_DESC and its node and edge descriptors
from .compiler.compiled_graph import CompiledGraph
from .front.creation import asarray, empty, full, ones, zeros
from .front.fuse import fuse
from .search.hamming import HammingIndex, hamming_knn
from .front.reductions import (argmax, argmin, logsumexp, max, mean, min, norm, prod, reduce,  # noqa: A004, F401
                                sum, top_k)  # numpy's (and scipy.special's) names
from .front.tensor import Tensor
from .describe.tensor_desc import TensorDesc, calc_buffer_tensor_size
from .describe.validation import validate

__all__ = [
    "AxisDirection", "Binding", "Buffer", "CommandList", "CompiledGraph", "CompiledOperator", "DataType",
    "DataTypeError", "Device", "DeviceError", "DeviceMemoryError", "FeatureLevel", "ReduceFunction", "Tensor",
    "TensorDesc", "ValidationError",
    "calc_buffer_tensor_size", "default_device", "devices", "fuse", "set_cache_limits", "validate",
    *_descriptor_names, *_function_names, *_graph_names, "argmax", "argmin", "logsumexp", "max", "mean", "min",
    "norm", "prod", "reduce", "sum", "top_k", "HammingIndex", "hamming_knn", "asarray", "empty", "full", "ones",
    "zeros",
]


def __dir__() -> list[str]:
    """What `dir(dmlgpu)` (and so an IDE's completion) shows: the public names and the version,
    not the modules the package imports to make them."""
    return sorted([*__all__, "__version__"])
