"""The float REDUCE reference's shortcuts give the bits of its exact definitions: LOG_SUM_EXP's
float64 path (taken only where it settles the rounding) against 60-digit arithmetic, MULTIPLY's
product tree with a sticky bit against the exact product of Fractions."""
import math
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest

from dmlgpu.table import reference


def _log_sum_exp_digits(x: np.ndarray, dtype) -> np.floating:
    top = Decimal(float(x.max()))
    with localcontext() as context:
        context.prec = 60
        total = sum(((Decimal(float(t)) - top).exp() for t in x.astype(np.float64)), Decimal(0))
        return reference.round_to(Fraction(top + total.ln()), dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_log_sum_exp_shortcut_rounds_as_sixty_digits(rng, dtype):
    decided = 0
    for scale in (1e-3, 1.0, 30.0, 1e4):
        for n in (1, 2, 3, 17, 200):
            x = rng.normal(0, scale, n).astype(dtype)
            x = x[np.isfinite(x)]
            if not x.size:
                continue
            quick = reference._log_sum_exp_quick(x.astype(np.float64), np.dtype(dtype))
            if quick is not None:
                decided += 1
                assert quick.tobytes() == _log_sum_exp_digits(x, np.dtype(dtype)).tobytes(), x
    assert decided >= 15  # (the shortcut is what runs)


@pytest.mark.parametrize("scale", [1e-3, 0.5, 30.0])
def test_product_tree_rounds_as_the_exact_product(rng, scale):
    for n in (1, 2, 3, 64, 1001):
        wide = rng.normal(1.0, scale, n)
        wide = wide[wide != 0]
        negative = bool(np.signbit(wide).sum() % 2)
        exact = math.prod((Fraction(float(t)) for t in wide), start=Fraction(1))
        for dtype in (np.float32, np.float16):
            got = reference.round_to(reference._product(wide, negative), np.dtype(dtype))
            assert got.tobytes() == reference.round_to(exact, np.dtype(dtype)).tobytes()
