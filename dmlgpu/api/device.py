"""`dmlgpu.Device`: the runtime's device plus DirectML's operator compilation, and the default
(or current) device the front ends use.

`Device(i)` names the one process-wide device of index i (as `cupy.cuda.Device(i)` or
`torch.device("cuda:0")` name one): every call gives the same object, so `with Device(0):`
costs nothing and Tensors made under two such calls combine. A second, private context of the
same physical device (its own memory pool, stream and pipelines: for tests, isolated
measurements, staging experiments) is asked for explicitly with `Device(i, private=True)`.
Closing a shared device ends it for everyone holding it; the next `Device(i)` (and so the next
front-end call, through `default_device()`) opens a fresh one.
"""
from __future__ import annotations

import atexit
import hashlib
import os
import threading
from collections import OrderedDict

from ..layout import memo
from .. import runtime
from ..kernels.compiled_operator import CompiledOperator
from ..compiler.compiled_graph import CompiledGraph
from .spanning_operators import SpanningOperator, SpanningSelection
from ..errors import DeviceError, ValidationError
from ..table.operators import ELEMENT_WISE
from ..runtime import DEVICE_TYPES, Buffer, devices  # noqa: F401  (re-exported)
from ..describe.validation import is_int, resolve_feature_level

__all__ = ["DEVICE_TYPES", "Buffer", "Device", "default_device", "devices", "set_cache_limits"]
#: Compiled operators kept per device, least recently used dropped first (set_cache_limits's
#: "operators", DMLGPU_CACHE_OPERATORS at import). Each holds its program and at most
#: compiled._MEMO prepared dispatches, no memory.
_LIMITS = {"operators": int(os.environ.get("DMLGPU_CACHE_OPERATORS", 512))}


def set_cache_limits(**limits) -> dict:
    """Set the bounds of every device's caches; returns all bounds now in force.

    Names: "operators" (compiled operators, default 512), "pipelines" (compute pipelines, 256)
    and "host_calls" (kept calls on host data, 16); each an int of at least 1, also settable at
    import by DMLGPU_CACHE_OPERATORS, DMLGPU_CACHE_PIPELINES and DMLGPU_CACHE_HOST_CALLS. The
    least recently used entry goes first; `Device.empty_cache()` empties them all.
    """
    operators = limits.pop("operators", _LIMITS["operators"])
    if isinstance(operators, bool) or not isinstance(operators, int) or operators < 1:
        raise ValidationError("dmlgpu", None, "operators", operators, "allowed: an int of at least 1")
    limits = runtime.set_cache_limits(**limits)  # checks the others' names and values first
    _LIMITS["operators"] = operators
    return {**limits, **_LIMITS}


#: (index, staging) -> the process-wide open Device of that index and transfer mode.
_SHARED: dict = {}
_SHARED_LOCK = threading.Lock()
#: DMLGPU_DEVICE's value -> the index `Device()` picks (discovered once per value).
_DEFAULT_INDEX: dict = {}


def _default_index() -> int:
    override = os.environ.get("DMLGPU_DEVICE")
    index = _DEFAULT_INDEX.get(override)
    if index is None:
        index = _DEFAULT_INDEX[override] = next(d["index"] for d in runtime.devices() if d["default"])
    return index


class Device(runtime.Device):
    """A Vulkan device (DirectML's IDMLDevice, in spirit): the runtime's device
    (`dmlgpu.runtime.Device`: memory, stream, pipelines, host calls) plus what DirectML's
    device adds to it: compiled operators and graphs (`create_operator`, `compile_graph`, kept
    per device) and one shared device per index.

    Args:
        index: Vulkan physical-device index; None picks DMLGPU_DEVICE, else the first GPU,
            else a CPU implementation such as lavapipe.
        staging: True sends host transfers through staging memory even where the device's
            memory is host-visible (a test and diagnostic knob); None: DMLGPU_STAGING=1 says.
        private: False (default): the process-wide device of this index and transfer mode,
            the same object on every call (opened by the first, or after a `close()`); True: a
            new Vulkan context of its own, never shared (close it when done).

    `with device:` makes it the current device of the calling thread (the numpy front end,
    `Tensor.from_numpy`, `Tensor.empty` and Tensor results use it); entering and leaving cost
    nothing and close nothing.
    """

    def __new__(cls, index: int | None = None, *, staging: bool | None = None, private: bool = False):
        runtime.threads.entered()
        if _EXITING:
            # atexit has closed every device: one opened now (a daemon thread's next call) would
            # be torn down by the driver's own exit under that thread (seen: SIGSEGV on NVIDIA).
            raise DeviceError("dmlgpu: the interpreter is exiting; its devices are closed and no new "
                              "device opens (a daemon thread's call after exit began)")
        if private or (index is not None and not is_int(index)):
            return super().__new__(cls)  # a context of its own (or the runtime's error for the index)
        if staging is None:
            staging = os.environ.get("DMLGPU_STAGING", "") == "1"
        override = os.environ.get("DMLGPU_DEVICE")
        if index is None and override not in _DEFAULT_INDEX and not _SHARED:
            return cls._open_default(override, bool(staging))
        key = (_default_index() if index is None else int(index), bool(staging))
        with _SHARED_LOCK:
            device = _SHARED.get(key)
            if device is None or device.closed:
                device = super().__new__(cls)
                device.__init__(key[0], staging=key[1])
                _SHARED[key] = device
            return device

    @classmethod
    def _open_default(cls, override, staging: bool) -> "Device":
        """The process's first device, the default one: chosen from the device list of its own
        Vulkan context as it opens (listing the devices first would open another context)."""
        with _SHARED_LOCK:
            if override in _DEFAULT_INDEX or _SHARED:  # another thread opened one meanwhile
                device = None
            else:
                device = super().__new__(cls)
                device.__init__(None, staging=staging)
                _DEFAULT_INDEX[override] = device.index
                _SHARED[(device.index, staging)] = device
        return device if device is not None else cls(None, staging=staging)

    def __init__(self, index: int | None = None, *, staging: bool | None = None, private: bool = False):
        if getattr(self, "_operators", None) is not None:
            return  # the shared device, open already
        self._operators: OrderedDict = OrderedDict()  # first: close() may run on a half-made one
        self._graphs: OrderedDict = OrderedDict()
        self.private = private
        super().__init__(index, staging=staging)

    def create_operator(self, operator_desc, feature_level=None, *, strided_output: bool = False) -> CompiledOperator:
        """Validate `operator_desc` at `feature_level` and compile it for this device.

        Returns a `CompiledOperator` that can be executed any number of times with different
        bindings, also bindings of memory that spans several buffers (a spanning Tensor's
        `.buffer`: run per piece, `dmlgpu.api.spanning_operators`). Raises `ValidationError` for a
        descriptor DirectML would reject.
        `strided_output` (element-wise operators) compiles the one-element-per-invocation
        layout, whose output may start at any element (`CompiledOperator.launch`'s `out_shift`).
        """
        name = getattr(getattr(operator_desc, "OPERATOR", None), "dml_name", "dmlgpu")
        self.check_open(name)
        level = resolve_feature_level(feature_level, name)
        # repr, not equality: 64.0 == 64 and True == 1, but only ints are valid sizes.
        key = (_strict_repr(operator_desc), level, bool(strided_output))
        with self.lock:
            compiled = self._operators.get(key)
            if compiled is None:
                family = getattr(getattr(operator_desc, "OPERATOR", None), "family", ELEMENT_WISE)
                if family == ELEMENT_WISE:
                    compiled = SpanningOperator(self, operator_desc, level, bool(strided_output))
                else:
                    compiled = SpanningSelection(self, operator_desc, level)
                self._operators[key] = compiled
                while len(self._operators) > _LIMITS["operators"]:
                    self._operators.popitem(last=False)
            else:
                self._operators.move_to_end(key)
            return compiled

    def compile_graph(self, graph_desc, feature_level=None) -> CompiledGraph:
        """Validate a `GraphDesc` at `feature_level` and compile it for this device
        (`IDMLDevice1::CompileGraph`).

        Returns a `CompiledGraph`: `execute(inputs=[Binding...], outputs=[Binding...])` with one
        binding per graph input and output; `dispatches` says how many dispatches it runs (one
        per output shape of an element-wise graph's nodes; for a graph that ends in a REDUCE,
        optionally then a TOP_K1, those of its `route`: "hamming" or "reduce"). Raises
        `ValidationError` for a graph DirectML would reject, or one with a REDUCE or TOP_K1 in
        a shape the compiler does not fuse, naming the node or edge and the field.
        """
        level = resolve_feature_level(feature_level, "DML_GRAPH_DESC")
        # A digest of its repr, where constants show their SHA-256 (hashed once per node): as
        # cheap for a graph of large constants as for one of none.
        key = (hashlib.sha256(_strict_repr(graph_desc).encode()).digest(), level)
        with self.lock:
            compiled = self._graphs.get(key)
            if compiled is not None:
                self._graphs.move_to_end(key)
                return compiled
        compiled = CompiledGraph(self, graph_desc, level)
        with self.lock:
            self._graphs[key] = compiled
            while len(self._graphs) > _LIMITS["operators"]:
                self._graphs.popitem(last=False)
        return compiled

    def empty_cache(self) -> None:
        with self.lock:
            self._operators.clear()
            self._graphs.clear()
            memo.clear()  # its entries hold compiled operators (and span plans) of devices
            super().empty_cache()

    empty_cache.__doc__ = runtime.Device.empty_cache.__doc__ + (
        " Also compiled operators and graphs, and the front end's memos (`dmlgpu.layout.memo`).")

    def close(self) -> None:
        with self.lock:
            self._operators.clear()
            self._graphs.clear()
            super().close()


def _strict_repr(value) -> str:
    try:
        return f"{type(value).__qualname__}:{value!r}"
    except ValueError:  # an int too long to print: never a valid field, never cached twice
        return f"unprintable:{id(value)}"


def _after_fork_in_child() -> None:
    global _SHARED_LOCK
    _SHARED_LOCK = threading.Lock()  # a parent's thread may have held it at the fork


os.register_at_fork(after_in_child=_after_fork_in_child)


def default_device() -> Device:
    """The calling thread's current device (`with device:`), else the process-wide default,
    `Device()` (opened again if it was closed)."""
    runtime.threads.entered()  # remembered before a first call opens the device (seconds on a GPU)
    current = runtime.current_device()
    if current is not None:
        return current
    global _default
    device = _default
    if device is None or device.closed:
        device = _default = Device()
    return device


_default: Device | None = None  # what `Device()` gave last: the front end's hot path asks often


_EXITING = False  # set by the atexit close: no device opens after it


@atexit.register
def _close_devices():
    """Finish queued work and close every open device while kp's destructors can still run;
    from then on no device opens (`Device()` raises DeviceError).

    First, daemon threads that called a device are ended (`runtime.threads`: their next device
    call raises SystemExit) and waited for, up to `runtime.threads.STOP_SECONDS`, while the
    devices are still open: NVIDIA's driver crashes at process exit when threads that called it
    are still alive."""
    global _EXITING
    runtime.threads.begin_exit()
    runtime.threads.join_daemon_callers()
    _EXITING = True
    for device in runtime.open_devices():
        device.close()
