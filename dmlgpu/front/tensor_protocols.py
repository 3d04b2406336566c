"""How a Tensor meets numpy and other libraries: `TensorProtocols`, a base of `dmlgpu.Tensor`.

- Printing: `repr` and `str` show the values as numpy prints them, with numpy's print options
  (past the `threshold` option, only the corners numpy's summary shows are downloaded).
- numpy's ufuncs named in the table's `numpy_ufunc` column run on the device (`__array_ufunc__`);
  numpy's functions (`__array_function__`, NEP 18) run where `ARRAY_FUNCTIONS` has them (the layout
  functions: transpose, reshape, ravel, copy, shape, ndim, size), else raise
  TypeError naming the dmlgpu function that computes them on the device (`NUMPY_COUNTERPARTS`), or
  saying to download first: no hidden device-to-host copies (`np.asarray(t)` raises too).
- DLPack is refused with a BufferError saying to download with `.numpy()`: Vulkan memory has no
  DLPack device type (`torch.as_tensor(t)`, `np.from_dlpack(t)` pass the error on).

The methods use what every Tensor has (`numpy()`, indexing, `buffer`, `device`); the class holds
no state of its own.
"""
from __future__ import annotations

from typing import Any, Callable, NoReturn

import numpy as np

from . import resident as ops
from ..table.operators import OPERATORS

__all__ = ["ARRAY_FUNCTIONS", "NUMPY_COUNTERPARTS", "TensorProtocols", "UFUNC_OPERATORS"]

#: numpy ufunc name -> operator, from the table's `numpy_ufunc` column.
UFUNC_OPERATORS = {op.numpy_ufunc: op for op in OPERATORS if op.numpy_ufunc}
#: numpy function name (below `numpy.`: "sum", "linalg.norm") -> what computes it on a Tensor:
#: `np.sum(t)` raises TypeError naming it.
NUMPY_COUNTERPARTS = {
    "sum": "dmlgpu.sum(t) (or t.sum())", "prod": "dmlgpu.prod(t) (or t.prod())",
    "min": "dmlgpu.min(t) (or t.min())", "amin": "dmlgpu.min(t) (or t.min())",
    "max": "dmlgpu.max(t) (or t.max())", "amax": "dmlgpu.max(t) (or t.max())",
    "argmin": "dmlgpu.argmin(t) (or t.argmin())", "argmax": "dmlgpu.argmax(t) (or t.argmax())",
    "mean": "dmlgpu.mean(t)", "linalg.norm": "dmlgpu.norm(t) (vector norms: ord None, 1 or 2)",
    "partition": "dmlgpu.top_k(t, k)", "argpartition": "dmlgpu.top_k(t, k)",
}
#: numpy function -> its implementation on Tensors (`__array_function__`, NEP 18): the layout
#: functions, as the Tensor's own methods (views where numpy's are, no data through the host), so
#: that code written for arrays (dask's blockwise transpose and reshape among it) takes Tensors as
#: CuPy's arrays are taken; every other numpy function raises TypeError.
ARRAY_FUNCTIONS: dict[Callable[..., Any], Callable[..., Any]] = {
    np.transpose: lambda a, axes=None: a.transpose() if axes is None else a.transpose(tuple(axes)),
    np.reshape: lambda a, *args, **kwargs: a.reshape(_new_shape(args, kwargs)),
    np.ravel: lambda a, order="C": a.ravel() if order == "C" else _order_refused("ravel", order),
    np.copy: lambda a, order="K", subok=False: a.copy(),
    np.shape: lambda a: a.shape,
    np.ndim: lambda a: a.ndim,
    np.size: lambda a, axis=None: a.size if axis is None else a.shape[axis],
}
#: What the error of a DLPack export says (torch.as_tensor, np.from_dlpack and their kin).
_NO_DLPACK = ("a dmlgpu.Tensor lives in Vulkan device memory, which DLPack has no device type for, so "
              "no other library can take it over: download it with t.numpy() (torch.from_numpy(t.numpy()), "
              "cupy.asarray(t.numpy()))")


def _new_shape(args: tuple, kwargs: dict) -> Any:
    """np.reshape's shape (positional, `shape=` or numpy 1.x's `newshape=`); C order only."""
    shape = args[0] if args else kwargs.get("shape", kwargs.get("newshape"))
    order = args[1] if len(args) > 1 else kwargs.get("order", "C")
    if order != "C":
        _order_refused("reshape", order)
    return shape


def _order_refused(name: str, order: Any) -> NoReturn:
    raise TypeError(f"numpy.{name} on a dmlgpu.Tensor takes order='C' only (given {order!r})")


class TensorProtocols:
    """Printing, numpy's protocols and DLPack, as a base of `dmlgpu.Tensor`."""

    __slots__ = ()

    def __array__(self, dtype=None, copy=None):
        """Refused: `np.asarray(tensor)` raises TypeError; call `.numpy()`.

        As CuPy (which points to `.get()`) and PyTorch for device tensors: a download waits for
        the device and copies the data, and an implicit one inside numpy (np.asarray, np.sum,
        a loop mixing arrays and Tensors) hides that cost where nobody sees it.
        """
        raise TypeError("dmlgpu.Tensor does not convert to a numpy array implicitly "
                        "(a hidden device-to-host copy); call .numpy() to download it")

    def __array_function__(self, func, types, args, kwargs):
        """numpy's functions on a Tensor (NEP 18): those in `ARRAY_FUNCTIONS` run; any other raises
        TypeError, naming the dmlgpu function or method that computes it on the device
        (`NUMPY_COUNTERPARTS`: `np.sum(t)` points to `dmlgpu.sum(t)`), else saying to download
        first: numpy would otherwise convert the Tensor, a hidden device-to-host copy."""
        implementation = ARRAY_FUNCTIONS.get(func)
        if implementation is not None:
            return implementation(*args, **kwargs)
        name = f"{getattr(func, '__module__', None) or 'numpy'}.{func.__name__}"  # numpy.sum, numpy.linalg.norm
        counterpart = NUMPY_COUNTERPARTS.get(name.removeprefix("numpy."))
        if counterpart is not None:
            raise TypeError(f"{name} does not run on a dmlgpu.Tensor: call {counterpart}, which computes "
                            "on the device with DirectML's rules (see its docstring for where they differ from "
                            "numpy's), or t.numpy() to use numpy on the host")
        raise TypeError(f"{name} has no dmlgpu counterpart for a dmlgpu.Tensor: call t.numpy() to "
                        "download it first (dmlgpu makes no hidden device-to-host copies)")

    def __dlpack__(self, *args: Any, **kwargs: Any) -> NoReturn:
        """Refused (BufferError): Vulkan memory has no DLPack device type; download with `.numpy()`."""
        raise BufferError(_NO_DLPACK)

    def __dlpack_device__(self) -> NoReturn:
        """Refused (BufferError), as `__dlpack__`: `torch.as_tensor(t)` and `np.from_dlpack(t)`
        ask this first and pass the error on."""
        raise BufferError(_NO_DLPACK)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        """numpy's ufuncs that name a dmlgpu operator (`Operator.numpy_ufunc`: np.invert,
        np.bitwise_xor, ...) run on the device and return a Tensor; `out=` may be a Tensor.

        Semantics are DirectML's, not numpy's: raw bits (np.invert of a float Tensor inverts
        its encoding, where numpy raises), shift amounts masked to the element width. Any
        other ufunc, ufunc method (reduce, accumulate, ...) or argument raises TypeError.
        """
        op = UFUNC_OPERATORS.get(ufunc.__name__)
        reduction = {"add": "sum", "multiply": "prod", "minimum": "min", "maximum": "max"}.get(ufunc.__name__)
        if method == "reduce" and reduction is not None:
            raise TypeError(f"numpy.{ufunc.__name__}.reduce does not run on a dmlgpu.Tensor: call "
                            f"dmlgpu.{reduction}(t) (or t.{reduction}()), which computes on the device with "
                            "DirectML's rules, or t.numpy() to use numpy on the host")
        if op is None:
            raise TypeError(f"numpy.{ufunc.__name__} has no dmlgpu operator; dmlgpu.Tensor takes "
                            f"{', '.join('numpy.' + name for name in UFUNC_OPERATORS)} "
                            "(or call .numpy() to compute on the host)")
        if method != "__call__":
            raise TypeError(f"numpy.{ufunc.__name__}.{method} is not supported on dmlgpu.Tensor")
        out = kwargs.pop("out", None)
        if isinstance(out, tuple):
            if len(out) != 1:
                raise TypeError(f"numpy.{ufunc.__name__}: out must hold one Tensor")
            out = out[0]
        if kwargs:
            raise TypeError(f"numpy.{ufunc.__name__} on dmlgpu.Tensor takes no {', '.join(sorted(kwargs))} argument")
        return ops.apply(op, inputs, out, ops.output_dtype(op, out, None), None)

    # -- printing: the values, as numpy prints them ------------------------------------------
    def _shown(self) -> tuple[np.ndarray, dict]:
        """The values numpy's print options show (all of them up to the `threshold` option, else
        only the corners of its summary, downloaded corner by corner) and the options to print
        them with."""
        options = np.get_printoptions()
        if self.size <= options["threshold"]:
            return self.numpy(), {}
        return _corners(self, max(1, options["edgeitems"])), {"threshold": 0}

    def _unprintable(self) -> str | None:
        """Why the values cannot be shown (its device closed, its buffer released), or None."""
        if not self.buffer.released:
            return None
        return "its device was closed" if self.device.closed else "its buffer was released"

    def __repr__(self) -> str:
        if not hasattr(self, "_strides"):  # __init__ refused its arguments
            return "<dmlgpu.Tensor, not made>"
        fields = f"dtype={self.dtype.name}"
        if self.size == 0 and self.ndim != 1:
            fields = f"shape={self.shape}, {fields}"
        why = self._unprintable()
        if why is not None:
            return f"Tensor(<{why}>, shape={self.shape}, dtype={self.dtype.name})"
        values, options = self._shown()
        if not self.is_packed or self.offset:  # a view: where it lies in its buffer, too
            fields += f", strides={self.strides}, offset={self.offset}"
        text = np.array2string(values, separator=", ", prefix="Tensor(", **options)
        return f"Tensor({text}, {fields}, device={self.device.index})"

    def __str__(self) -> str:
        why = self._unprintable()
        if why is not None:
            return f"<dmlgpu.Tensor {self.shape} {self.dtype.name}: {why}>"
        values, options = self._shown()
        return np.array2string(values, **options)

def _corners(t: Any, edge: int) -> np.ndarray:
    """What numpy's summary of `t` shows: along each axis longer than `2 * edge`, its first and
    last `edge` elements with one filler between them (numpy prints "..." in its place when the
    result is printed with `threshold=0`), downloaded corner by corner."""
    def gather(view: Any, axis: int) -> np.ndarray:
        if axis == view.ndim:
            return view.numpy()
        n = view.shape[axis]
        if n <= 2 * edge:
            return gather(view, axis + 1)
        before = (slice(None),) * axis
        head = gather(view[before + (slice(0, edge),)], axis + 1)
        tail = gather(view[before + (slice(n - edge, n),)], axis + 1)
        return np.concatenate([head, head.take([0], axis), tail], axis)
    return gather(t, 0)
