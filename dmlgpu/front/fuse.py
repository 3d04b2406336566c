"""`dmlgpu.fuse`: a Python function of arrays traced into a graph and run as one fused dispatch.

Like `cupy.fuse`: the decorated function is called once per signature with traced values in
place of its array arguments; what it does with dmlgpu's functions, Tensor's operators (derived
from the operator table's `python_operator` column) and numpy's matching ufuncs becomes the
nodes of a `GraphDesc`, compiled with `Device.compile_graph`. Later calls with the same
signature (dtypes, shapes and strides of the arrays, type and value of each Python scalar
argument, and of each Python or numpy scalar the function reads from its closure or its module's
globals) run the compiled graph: numpy arrays are uploaded once and results downloaded once,
Tensors stay on the device, and no Python runs per node. Anything the graph cannot express
(control flow on values, operators outside the table, broadcasting an intermediate result)
raises `TypeError` naming it while tracing.

Scalars from outside the function (`MASK = 0xFF` at module level, a loop variable a closure
captured) become constants of the graph, so their values are part of the signature: a call
after one of them changed traces and compiles again rather than run the old value (looked up
per call in the closure's cells and the globals dict: ~0.2 us a name). The same goes for the
closures and globals of the plain functions the fused function names (helpers), as found at
its first call. Values reached through other objects (`params["k"]`, `self.k`, a list) are
read once, while tracing: pass them as arguments when they change.
"""
from __future__ import annotations

import functools
import inspect
import math
import sys
import threading
from collections import OrderedDict
from typing import Any, Callable, Generic, TypeVar, Union, overload

import numpy as np

from ..describe.bindings import Binding
from .call_plan import output_type
from ..api.device import default_device
from ..table.dtypes import DataType
from ..errors import ValidationError
from ..describe.graph_descs import ConstantDataGraphNodeDesc, GraphDesc, InputGraphEdgeDesc, IntermediateGraphEdgeDesc, OperatorGraphNodeDesc, OutputGraphEdgeDesc
from ..describe.operator_descs import DESC_CLASSES
from ..layout.operands import host_array, is_python_scalar, python_scalar, scalar_key
from ..table.operators import ELEMENT_WISE, OPERATORS
from .tensor import Tensor
from .fuse_outside import outside_names, outside_scalars
from ..describe.tensor_desc import packed_strides, TensorDesc
from ..describe.validation import resolve_feature_level, support_row
from ..table.feature_levels import FeatureLevel

if sys.version_info >= (3, 10):
    from typing import ParamSpec

    #: The fused function's parameters, which `Fused.__call__` takes as they are (for type checkers).
    _P = ParamSpec("_P")
else:  # Python 3.9 has no ParamSpec: a type variable keeps `Generic` working at run time
    _P = TypeVar("_P")
#: What the fused function returns (its annotations, for type checkers).
_R = TypeVar("_R", covariant=True)
#: A feature level, its value, or None for the newest.
Level = Union[FeatureLevel, int, None]

__all__ = ["Fused", "SIGNATURES", "Traced", "fuse"]

#: Compiled signatures kept per fused function, and calls with the same Tensors (each: how its
#: new results are made), least recently used dropped first.
SIGNATURES = 64
_BY_UFUNC = {op.numpy_ufunc: op for op in OPERATORS if op.numpy_ufunc}
_UNSUPPORTED_OPERATORS = {
    "add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%", "pow": "**",
    "matmul": "@", "neg": "unary -", "pos": "unary +", "abs": "abs()", "lt": "<", "le": "<=", "gt": ">",
    "ge": ">=", "eq": "==", "ne": "!=",
}


def _unsupported(what: str):
    raise TypeError(f"dmlgpu.fuse: {what} cannot be traced into a graph (only the operator table's "
                    f"operators: {', '.join(op.short for op in OPERATORS)})")


def _broadcast(shape, strides, target) -> tuple:
    """Element strides of an array of `shape` (and `strides`, None: packed) broadcast to
    `target` (0 where it repeats)."""
    own = packed_strides(shape) if strides is None else strides
    pad = len(target) - len(shape)
    return tuple(0 if d < pad or shape[d - pad] == 1 and size != 1 else own[d - pad]
                 for d, size in enumerate(target))


class _Trace:
    """The graph being built while the fused function runs."""

    def __init__(self, level):
        self.level = level
        self.nodes: list = []
        self.input_edges: list = []
        self.inter_edges: list = []
        self.inputs: list = []  # (DataType, shape, strides) per traced argument

    def apply(self, op, arrays, out, out_dtype, feature_level):
        if op.family != ELEMENT_WISE:
            _unsupported(f"dmlgpu.{op.short} (a reduction or selection: apply it to the fused function's result)")
        if out is not None:
            _unsupported(f"{op.short}(..., out=...)")
        if feature_level is not None and resolve_feature_level(feature_level, op.dml_name) != self.level:
            _unsupported(f"{op.short}(..., feature_level=...) other than the fused function's level")
        row = support_row(op, self.level)
        traced = [x for x in arrays if isinstance(x, Traced)]
        base = traced[0].data_type
        operands = []
        for name, x in zip(op.inputs, arrays):
            if isinstance(x, Traced):
                operands.append(x)
            elif is_python_scalar(x) or isinstance(x, np.generic):
                value = python_scalar(x, base, op.dml_name, name) if is_python_scalar(x) else np.asarray(x)
                operands.append(("constant", value))
            else:
                _unsupported(f"a {type(x).__name__} operand of {op.short} (pass arrays as arguments of the "
                             "fused function)")
        shape = tuple(np.broadcast_shapes(*(x.shape if isinstance(x, Traced) else () for x in operands)))
        dims = shape or (1,)  # a 0-d result is one element (DirectML has no 0-d tensors)
        descs = []
        index = len(self.nodes)
        self.nodes.append(None)
        for j, x in enumerate(operands):
            if isinstance(x, Traced):
                data_type, strides = x.data_type, None
                if x.source is None:  # a function argument: a graph input, broadcast as needed
                    strides = _broadcast(x.shape or (1,), x.strides or None, dims)
                    self.input_edges.append(InputGraphEdgeDesc(x.input_index, index, j))
                elif x.shape != shape:
                    _unsupported(f"broadcasting the intermediate result {x.shape} to {shape} in {op.short}")
                else:
                    self.inter_edges.append(IntermediateGraphEdgeDesc(x.source, 0, index, j))
            else:
                value = x[1]
                data_type = DataType.from_numpy(value.dtype)
                self.nodes.append(ConstantDataGraphNodeDesc(np.ascontiguousarray(value).tobytes()))
                self.inter_edges.append(IntermediateGraphEdgeDesc(len(self.nodes) - 1, 0, index, j))
                strides = (0,) * len(dims)
            descs.append(TensorDesc(data_type, dims, strides))
        out_type = output_type(op, row, None, out_dtype, [d.data_type for d in descs])
        out_desc = TensorDesc(out_type, dims)
        self.nodes[index] = OperatorGraphNodeDesc(DESC_CLASSES[op.name](*descs, out_desc))
        return Traced(self, out_type, shape, None, source=index)


class Traced:
    """A value inside a function being traced by `dmlgpu.fuse` (an argument or a node's result)."""

    __slots__ = ("_trace", "data_type", "shape", "strides", "source", "input_index")

    def __init__(self, trace, data_type, shape, strides, source=None, input_index=None):
        self._trace = trace
        self.data_type = data_type
        self.shape = tuple(shape)
        self.strides = strides
        self.source = source  # node index, or None for an argument
        self.input_index = input_index

    @property
    def dtype(self) -> np.dtype:
        return self.data_type.numpy

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def dmlgpu_traced_call(self, op, arrays, out, out_dtype, feature_level):
        """The numpy front end's hook: a call with a traced operand becomes a node."""
        return self._trace.apply(op, arrays, out, out_dtype, feature_level)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        op = _BY_UFUNC.get(ufunc.__name__)
        if method != "__call__" or op is None or kwargs:
            _unsupported(f"numpy.{ufunc.__name__}" + (f".{method}" if method != "__call__" else "")
                         + (f" with {', '.join(kwargs)}" if kwargs else ""))
        return self._trace.apply(op, inputs, None, None, None)

    def __bool__(self):
        _unsupported("the truth value of a traced array (control flow on values)")

    def __array__(self, *args, **kwargs):
        _unsupported("converting a traced array to numpy")

    def __iter__(self):
        _unsupported("iterating over a traced array")

    def __getitem__(self, key):
        _unsupported("indexing a traced array")

    def __index__(self):
        _unsupported("a traced array used as an integer")

    __int__ = __float__ = __index__

    def __repr__(self):
        return f"<dmlgpu.fuse traced {self.data_type.name} {self.shape}>"


def _operator_method(op, prefix):
    if len(op.inputs) == 1:
        def method(self):
            return self._trace.apply(op, (self,), None, None, None)
    elif prefix == "r":
        def method(self, other):
            return self._trace.apply(op, (other, self), None, None, None)
    else:
        def method(self, other):
            return self._trace.apply(op, (self, other), None, None, None)
    method.__name__ = f"__{prefix}{op.python_operator}__"
    return method


for _op in OPERATORS:
    if _op.python_operator:
        for _prefix in ("", "r") if len(_op.inputs) > 1 else ("",):
            setattr(Traced, f"__{_prefix}{_op.python_operator}__", _operator_method(_op, _prefix))


def _refuse(symbol):
    def method(self, *other):
        _unsupported(f"the operator {symbol}")
    return method


for _name, _symbol in _UNSUPPORTED_OPERATORS.items():
    setattr(Traced, f"__{_name}__", _refuse(_symbol))
    if _name not in ("neg", "pos", "abs", "lt", "le", "gt", "ge", "eq", "ne"):
        setattr(Traced, f"__r{_name}__", _refuse(_symbol))
Traced.__hash__ = object.__hash__


class _Compiled:
    """One signature's compiled graph and how to bind a call's arguments to it."""

    __slots__ = ("graph", "arg_inputs", "outputs", "structure", "device", "views")

    def __init__(self, device, graph, arg_inputs, outputs, structure):
        self.device = device
        self.graph = graph
        self.arg_inputs = arg_inputs  # argument position per graph input
        self.outputs = outputs  # (DataType, shape) per graph output
        self.structure = structure  # "one", "tuple" or "list"
        # (shape, data type, 0, strides) of each result's view: the fields of a new result
        self.views = [(shape, data_type, 0, packed_strides(shape)) for data_type, shape in outputs]

    def returned(self, results: list):
        """The function's return value made of `results` (one per graph output)."""
        if self.structure == "one":
            return results[0]
        return tuple(results) if self.structure == "tuple" else results


def _call_key(device, args) -> tuple | None:
    """What a call with the very same Tensors is found by: the device and each argument's view
    key (buffer serial, offset, shape, strides, data type; serials are never reused) or scalar
    key; None when an argument is numpy data or a numpy scalar, or no argument is a Tensor (the
    results are numpy arrays then)."""
    key = [device]
    tensors = False
    for x in args:
        if isinstance(x, Tensor):
            key.append(x.key)
            tensors = True
        elif is_python_scalar(x):
            key.append(scalar_key(x))
        else:
            return None
    return tuple(key) if tensors else None


class Fused(Generic[_P, _R]):
    """A function compiled by `dmlgpu.fuse`; call it like the function (its signature and return
    type are the function's, for type checkers)."""

    def __init__(self, function: Callable[_P, _R], feature_level: Level = None) -> None:
        functools.update_wrapper(self, function)
        self._function = function
        self._parameters = inspect.signature(function)
        self._level = feature_level
        self._compiled: OrderedDict = OrderedDict()
        # `_call_key` -> (_Compiled, runtime.Results): a call with the same Tensors again makes its
        # new results with no signature, no binding checks and no prepared dispatch.
        self._calls: OrderedDict = OrderedDict()
        self._lock = threading.Lock()
        self._outside = None  # `outside_names`, found at the first call

    def _outside_key(self) -> tuple:
        """The values of the scalars the function reads from outside it (`fuse_outside.outside_names`)."""
        places = self._outside
        if places is None:
            places = self._outside = outside_names(self._function)
        return outside_scalars(places) if places else ()

    def _signature(self, args):
        parts = []
        for x in args:
            if isinstance(x, Tensor):
                parts.append(("T", x.data_type, x.shape, x.strides, x.offset % 16 == 0))
            elif isinstance(x, np.ndarray):
                parts.append(("A", x.dtype.str, x.shape))
            elif is_python_scalar(x):
                parts.append(("S", *scalar_key(x)))
            elif isinstance(x, np.generic):
                parts.append(("S", type(x), x.tobytes()))
            else:
                raise TypeError(f"dmlgpu.fuse: argument of type {type(x).__name__}; allowed: dmlgpu.Tensor, "
                                "numpy.ndarray, Python int/float/bool, numpy scalar")
        return tuple(parts)

    def _trace(self, args, device) -> _Compiled:
        level = resolve_feature_level(self._level, "dmlgpu.fuse")
        trace = _Trace(level)
        traced_args, arg_inputs = [], []
        for position, x in enumerate(args):
            if isinstance(x, (Tensor, np.ndarray)):
                if isinstance(x, np.ndarray):
                    x = np.asarray(host_array(x, "dmlgpu.fuse", f"argument {position}"))
                    data_type, strides = DataType.from_numpy(x.dtype), None
                    if data_type is None:
                        raise ValidationError("dmlgpu.fuse", f"argument {position}", "dtype", x.dtype,
                                              "allowed: the numpy dtypes of DirectML's data types")
                else:
                    if x.offset % 16:
                        raise ValidationError("dmlgpu.fuse", f"argument {position}", "offset", x.offset,
                                              "allowed: a Tensor view starting at a 16-byte boundary")
                    data_type, strides = x.data_type, tuple(x.strides)
                traced_args.append(Traced(trace, data_type, x.shape, strides, input_index=len(arg_inputs)))
                arg_inputs.append(position)
            else:
                traced_args.append(x)
        result = self._function(*traced_args)
        structure = "tuple" if isinstance(result, tuple) else "list" if isinstance(result, list) else "one"
        results = list(result) if structure != "one" else [result]
        output_edges, outputs = [], []
        for j, r in enumerate(results):
            if not isinstance(r, Traced) or r.source is None:
                _unsupported(f"returning {'an argument unchanged' if isinstance(r, Traced) else type(r).__name__} "
                             f"(result {j}); return results of the table's operators")
            output_edges.append(OutputGraphEdgeDesc(r.source, 0, j))
            outputs.append((r.data_type, r.shape))
        desc = GraphDesc(len(arg_inputs), len(results), trace.nodes, trace.input_edges, output_edges,
                         trace.inter_edges)
        return _Compiled(device, device.compile_graph(desc, level), arg_inputs, outputs, structure)

    def _lookup(self, args, device, outside=None) -> _Compiled:
        key = (device, self._signature(args), self._outside_key() if outside is None else outside)
        with self._lock:
            compiled = self._compiled.get(key)
            if compiled is not None:
                self._compiled.move_to_end(key)
                return compiled
        compiled = self._trace(args, device)
        with self._lock:
            self._compiled[key] = compiled
            while len(self._compiled) > SIGNATURES:
                self._compiled.popitem(last=False)
        return compiled

    def graph(self, *args):
        """The `CompiledGraph` that a call with these arguments runs (traced and compiled if new)."""
        return self._lookup(args, default_device()).graph

    @property
    def signatures(self) -> int:
        """How many signatures are compiled (at most SIGNATURES)."""
        return len(self._compiled)

    def _positional(self, args: tuple, kwargs: dict) -> tuple:
        """The arguments of a call with keywords, in the function's parameter order."""
        try:
            bound = self._parameters.bind(*args, **kwargs)
        except TypeError as error:
            raise TypeError(f"dmlgpu.fuse: {self.__name__}(): {error}") from None
        if bound.kwargs:
            raise TypeError(f"dmlgpu.fuse: {self.__name__}(): keyword-only arguments "
                            f"({', '.join(bound.kwargs)}) cannot be traced; give them as positional parameters")
        return bound.args

    def __call__(self, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        if kwargs:
            args = self._positional(args, kwargs)
        device = default_device()
        outside = self._outside_key()
        call = _call_key(device, args)
        if call is not None and outside:
            call = (call, outside)
        if call is not None:  # hot path: the same Tensors as an earlier call
            with self._lock:
                known = self._calls.get(call)
                if known is not None:
                    self._calls.move_to_end(call)
            if known is not None:
                compiled, results = known
                buffers = results()  # None: an input was released (the general path explains)
                if buffers is not None:
                    return compiled.returned([Tensor.from_fields(b, *fields)
                                              for b, fields in zip(buffers, compiled.views)])
        compiled = self._lookup(args, device, outside)
        inputs, keep = [], []
        for position in compiled.arg_inputs:
            x = args[position]
            if isinstance(x, Tensor):
                inputs.append(Binding(x.buffer, x.offset))
            else:
                buffer = device.upload(np.ascontiguousarray(host_array(x, "dmlgpu.fuse", None)))
                keep.append(buffer)
                inputs.append(Binding(buffer))
        results = []
        for data_type, shape in compiled.outputs:
            nbytes = math.prod(shape) * data_type.size
            results.append(Tensor(device.allocate(max(4, -(-nbytes // 4) * 4), zero_fill=False), shape, data_type))
        outputs = [Binding(t.buffer) for t in results]
        compiled.graph.execute(inputs, outputs)
        made = compiled.graph.results(inputs, outputs) if call is not None else None
        if made is not None:
            with self._lock:
                self._calls[call] = (compiled, made)
                while len(self._calls) > SIGNATURES:
                    self._calls.popitem(last=False)
        if not any(isinstance(x, Tensor) for x in args):
            results = [t.numpy() for t in results]
        return compiled.returned(results)


@overload
def fuse(function: Callable[_P, _R], *, feature_level: Level = None) -> Fused[_P, _R]: ...
@overload
def fuse(function: None = None, *, feature_level: Level = None) -> Callable[[Callable[_P, _R]], Fused[_P, _R]]: ...
def fuse(function: Callable[_P, _R] | None = None, *, feature_level: Level = None) -> Any:
    """Decorator: trace `function` into a DirectML graph and run it as one fused dispatch.

    Args:
        function: a function of dmlgpu Tensors, numpy arrays and Python scalars written with
            dmlgpu's functions, Tensor operators (`~ ^ & | << >>`) and numpy's matching ufuncs;
            it returns one result or a tuple/list of results.
        feature_level: the level the graph is validated at (None: the newest).

    Returns:
        A callable compiled once per signature (array dtypes, shapes and strides, scalar
        A callable compiled once per signature (array dtypes, shapes and strides, scalar
        argument types and values, and the values of the scalars `function` and its helpers
        read from their closures and module globals: a change traces again); results are
        Tensors when an argument is a Tensor, else numpy arrays. It takes the function's
        parameters (keywords too) and, for type checkers, has its signature and return type
        (`typing.ParamSpec`).

    Raises:
        TypeError: at trace time, naming what the graph cannot express.
        ValidationError: what DirectML rejects (a data type, a level).
    """
    if function is None:
        return lambda f: Fused(f, feature_level)
    return Fused(function, feature_level)
