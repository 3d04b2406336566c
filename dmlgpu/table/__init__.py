"""The truth: data types, feature levels, the operator table (one row per DirectML operator) and the reference.

Imports nothing of dmlgpu but `errors`.
"""
from . import dtypes, feature_levels, operators, reference  # noqa: F401

__all__ = ["dtypes", "feature_levels", "operators", "reference"]
