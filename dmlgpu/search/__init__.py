"""Binary-code search: `HammingIndex` and `hamming_knn`.

Imports the layers below it (`front` and down).
"""
from . import hamming  # noqa: F401

__all__ = ["hamming"]
