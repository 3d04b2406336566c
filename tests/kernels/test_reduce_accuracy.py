"""Float REDUCE's accuracy as a property: over sizes from 1 to 10^7 and random and adversarial data
(terms that cancel, spread over 60 binades, subnormals, near the float range's top, FLOAT16 past
its range), each output element's error against a float64 reference (math.fsum: the exact sum
rounded once) is no larger than numpy's own float32 (float16) result's on the same data: np.sum,
np.mean, np.linalg.norm, np.prod, and logsumexp as SciPy computes it (max-shifted, in the input's
type). The big sizes are few (CI: 2 cores, lavapipe)."""
import math

import numpy as np
import pytest

import dmlgpu
from dmlgpu.table.operators import ReduceFunction

F = ReduceFunction


def _lse(x):
    top = x.max()
    return top + np.log(np.sum(np.exp(x - top)))


#: function -> (numpy's float32 (float16) result, the float64 reference of the real result).
PEERS = {
    F.SUM: (np.sum, math.fsum),
    F.AVERAGE: (np.mean, lambda x: math.fsum(x) / len(x)),
    F.L1: (lambda x: np.sum(np.abs(x)), lambda x: math.fsum(np.abs(x))),
    F.SUM_SQUARE: (lambda x: np.sum(x * x), lambda x: math.fsum(x * x)),  # float64 squares of floats: exact
    F.L2: (np.linalg.norm, lambda x: math.sqrt(math.fsum(x * x))),
    F.LOG_SUM: (lambda x: np.log(np.sum(x)), lambda x: math.log(math.fsum(x))),
    F.LOG_SUM_EXP: (_lse, lambda x: x.max() + math.log(math.fsum(np.exp(x - x.max())))),
    F.MULTIPLY: (np.prod, lambda x: math.prod(x)),
}


def _data(kind, n, dtype, rng):
    """n elements of `kind` (adversarial ones are named for what they break)."""
    if kind == "normal":
        x = rng.normal(0, 1, n)
    elif kind == "positive":
        x = rng.uniform(0, 1, n)
    elif kind == "near_one":  # products that stay in range
        x = rng.uniform(0.9, 1.1, n)
    elif kind == "cancellation":  # large terms and their negations, shuffled, around small ones
        big = rng.normal(0, 1, n // 3) * 10.0 ** rng.integers(3, 30, n // 3)
        x = np.concatenate([big, -big, rng.normal(0, 1, n - 2 * (n // 3))])
        rng.shuffle(x)
    elif kind == "spread":  # exponents over 60 binades, random signs
        x = rng.choice([-1.0, 1.0], n) * 2.0 ** rng.uniform(-30, 30, n)
    elif kind == "subnormal":
        x = rng.integers(1, 1 << 23, n).astype(np.uint32).view(np.float32).astype(np.float64) * rng.choice([-1, 1], n)
    elif kind == "huge":  # the float range's top: partial sums past it, a finite total
        x = rng.choice([-1.0, 1.0], n) * rng.uniform(1e37, 3.4e38, n)
    elif kind == "f16_overflow":
        x = rng.uniform(1000, 60000, n)
    else:
        raise ValueError(kind)
    with np.errstate(over="ignore"):
        return x.astype(dtype)


SIZES = [1, 2, 3, 5, 8, 17, 100, 1000, 4097, 65_537]
CASES = [(f, kind, n, np.float32) for f in (F.SUM, F.AVERAGE, F.L1) for kind in ("normal", "cancellation", "spread")
         for n in SIZES]
CASES += [(f, kind, n, np.float32) for f in (F.SUM, F.AVERAGE) for kind in ("subnormal", "huge") for n in SIZES[::3]]
CASES += [(f, kind, n, np.float32) for f in (F.SUM_SQUARE, F.L2) for kind in ("normal", "spread") for n in SIZES]
CASES += [(F.LOG_SUM, "positive", n, np.float32) for n in SIZES]
CASES += [(F.LOG_SUM_EXP, kind, n, np.float32) for kind in ("normal", "spread") for n in SIZES]
CASES += [(F.MULTIPLY, "near_one", n, np.float32) for n in SIZES]
CASES += [(f, kind, n, np.float16) for f in (F.SUM, F.AVERAGE, F.L2) for kind in ("normal", "f16_overflow")
          for n in SIZES[::2]]
# The big ones, few.
CASES += [(F.SUM, "normal", 1_000_000, np.float32), (F.SUM, "cancellation", 1_000_000, np.float32),
          (F.L2, "normal", 1_000_000, np.float32), (F.SUM, "positive", 10_000_000, np.float32),
          (F.AVERAGE, "cancellation", 10_000_000, np.float32)]


def _id(case):
    function, kind, n, dtype = case
    return f"{function.name.lower()}-{kind}-{n}-{np.dtype(dtype).name}"


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_no_less_accurate_than_numpy(case, rng, device):
    function, kind, n, dtype = case
    peer, exact = PEERS[function]
    rows = 3 if n <= 4097 else 1  # several output elements, each its own walk
    x = np.stack([_data(kind, n, dtype, rng) for _ in range(rows)])
    got = dmlgpu.reduce(x, function, axis=1)
    assert got.dtype == dtype and got.shape == (rows,)
    for row, ours in zip(x, got):
        wide = row.astype(np.float64)
        with np.errstate(all="ignore"):
            truth = exact(wide)
            theirs = peer(row)
        error = abs(float(ours) - truth)
        numpy_error = abs(float(theirs) - truth)
        if math.isnan(numpy_error):  # numpy's partial sums met inf - inf
            numpy_error = math.inf
        info = np.finfo(dtype)
        if math.isinf(error):  # only where the real result rounds past the type's largest finite value
            assert abs(truth) >= float(info.max) + 2.0 ** (info.maxexp - info.nmant - 2), (float(ours), truth)
            continue
        assert error <= numpy_error * (1 + 1e-9) + abs(truth) * 2.0 ** -60, (float(ours), float(theirs), truth)
