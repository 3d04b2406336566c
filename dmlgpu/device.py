"""`dmlgpu.Device`: the runtime's device plus DirectML's operator compilation, and the default
(or current) device the front ends use."""
from __future__ import annotations

import atexit
import threading
from collections import OrderedDict

from . import runtime
from .compiled import CompiledOperator
from .compiled_graph import CompiledGraph
from .compiled_selection import CompiledSelection
from .operators import ELEMENT_WISE
from .runtime import DEVICE_TYPES, Buffer, devices  # noqa: F401  (re-exported)
from .validation import resolve_feature_level

__all__ = ["DEVICE_TYPES", "Buffer", "Device", "default_device", "devices"]

#: Compiled operators kept per device, least recently used dropped first.
_OPERATOR_CACHE = 512


class Device(runtime.Device):
    """A Vulkan device (DirectML's IDMLDevice, in spirit).

    Args:
        index: Vulkan physical-device index; None picks DMLGPU_DEVICE, else the first GPU,
            else a CPU implementation such as lavapipe.
        staging: True sends host transfers through staging memory even where the device's
            memory is host-visible (a test and diagnostic knob); None: DMLGPU_STAGING=1 says.

    `with device:` makes it the current device of the calling thread (the numpy front end,
    `Tensor.from_numpy`, `Tensor.empty` and Tensor results use it).
    """

    def __init__(self, index: int | None = None, *, staging: bool | None = None):
        super().__init__(index, staging=staging)
        self._operators: OrderedDict = OrderedDict()
        self._graphs: OrderedDict = OrderedDict()

    def create_operator(self, operator_desc, feature_level=None) -> CompiledOperator:
        """Validate `operator_desc` at `feature_level` and compile it for this device.

        Returns a `CompiledOperator` that can be executed any number of times with different
        bindings. Raises `ValidationError` for a descriptor DirectML would reject.
        """
        level = resolve_feature_level(feature_level, getattr(
            getattr(operator_desc, "OPERATOR", None), "dml_name", "dmlgpu"))
        # repr, not equality: 64.0 == 64 and True == 1, but only ints are valid sizes.
        key = (_strict_repr(operator_desc), level)
        with self._lock:
            compiled = self._operators.get(key)
            if compiled is None:
                family = getattr(getattr(operator_desc, "OPERATOR", None), "family", ELEMENT_WISE)
                compiled = (CompiledOperator if family == ELEMENT_WISE else CompiledSelection)(
                    self, operator_desc, level)
                self._operators[key] = compiled
                while len(self._operators) > _OPERATOR_CACHE:
                    self._operators.popitem(last=False)
            else:
                self._operators.move_to_end(key)
            return compiled

    def compile_graph(self, graph_desc, feature_level=None) -> CompiledGraph:
        """Validate a `GraphDesc` at `feature_level` and compile it for this device
        (`IDMLDevice1::CompileGraph`).

        Returns a `CompiledGraph`: `execute(inputs=[Binding...], outputs=[Binding...])` with one
        binding per graph input and output; `dispatches` says how many dispatches it runs (one
        per output shape of its nodes). Raises `ValidationError` for a graph DirectML would
        reject, naming the node or edge and the field.
        """
        level = resolve_feature_level(feature_level, "DML_GRAPH_DESC")
        key = (_strict_repr(graph_desc), level)
        with self._lock:
            compiled = self._graphs.get(key)
            if compiled is not None:
                self._graphs.move_to_end(key)
                return compiled
        compiled = CompiledGraph(self, graph_desc, level)
        with self._lock:
            self._graphs[key] = compiled
            while len(self._graphs) > _OPERATOR_CACHE:
                self._graphs.popitem(last=False)
        return compiled

    def close(self) -> None:
        with self._lock:
            self._operators.clear()
            self._graphs.clear()
            super().close()


def _strict_repr(value) -> str:
    try:
        return f"{type(value).__qualname__}:{value!r}"
    except ValueError:  # an int too long to print: never a valid field, never cached twice
        return f"unprintable:{id(value)}"


_default: Device | None = None
_default_lock = threading.Lock()


def default_device() -> Device:
    """The calling thread's current device (`with device:`), else the process-wide default."""
    current = runtime.current_device()
    if current is not None:
        return current
    global _default
    with _default_lock:
        if _default is None:
            _default = Device()
        return _default


@atexit.register
def _close_devices():
    """Finish queued work and close every open device while kp's destructors can still run."""
    for device in runtime.open_devices():
        device.close()
