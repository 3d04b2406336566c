"""The exceptions dmlgpu raises on purpose, and the warning it gives."""
from __future__ import annotations

__all__ = ["CacheWarning", "DataTypeError", "DeviceError", "DeviceMemoryError", "ValidationError"]


class ValidationError(ValueError):
    """A descriptor, binding or argument that DirectML's rules reject.

    Raised before any device work starts. The message names the operator, the tensor, the field,
    the value given and what is allowed; the same facts are kept as attributes for programs.
    """

    def __init__(self, operator: str, tensor: str | None, field: str, value, allowed: str):
        self.operator = operator
        self.tensor = tensor
        self.field = field
        self.value = value
        self.allowed = allowed
        where = f"{tensor}.{field}" if tensor else field
        super().__init__(f"{operator}: {where} is {_show(value)}; {allowed}")

    def __reduce__(self):
        # BaseException pickles `args` (the message alone), which __init__ cannot take back:
        # rebuild from the facts, so the error crosses processes (Dask workers) intact.
        return (type(self), (self.operator, self.tensor, self.field, self.value, self.allowed),
                self.__dict__)


class DataTypeError(ValidationError, TypeError):
    """A data type that DirectML's rules reject: a `ValidationError` that is also a `TypeError`,
    as numpy raises a `TypeError` subclass (`UFuncTypeError`) for a dtype a ufunc does not take.
    """


class DeviceError(RuntimeError):
    """No usable Vulkan device, or the device failed while running work."""


class DeviceMemoryError(MemoryError):
    """The device could not provide the memory asked for; the device stays usable."""


class CacheWarning(UserWarning):
    """The disk cache directory is not private to this user (owned by another, or writable by
    others): dmlgpu does not use it, and says which directory and how to fix it, once."""


def _show(value) -> str:
    name = getattr(value, "name", None)
    if isinstance(name, str) and hasattr(value, "value"):
        return name  # enum members read best by name
    try:
        text = repr(value)
    except ValueError:  # e.g. an int beyond Python's digit limit for str()
        text = f"<{type(value).__name__} of {value.bit_length()} bits>" if isinstance(value, int) \
            else f"<unprintable {type(value).__name__}>"
    return text if len(text) <= 120 else text[:117] + "..."
