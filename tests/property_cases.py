"""The cases, strategies and oracle of dmlgpu's Hypothesis differential tests (a helper, not a
test module): random descriptors, bindings and arrays, judged by a small oracle written from the
operator table and compared bit for bit with `dmlgpu.table.reference`. The properties:

* tests/describe/test_descriptor_properties.py: operator descriptors and bindings (low level);
* tests/front/test_front_end_properties.py: the numpy front end;
* tests/layout/test_tensor_view_properties.py: operators on Tensor views.

Each property runs per operator with valid-looking draws (the low-level one also per layout
plan, `PLANS`, so that each of dmlgpu's kernels - flat, rows, gather, strided - is reached), and
once per fault, so that every rule is exercised on every CI run. `DESCRIPTOR_FAULTS`: unknown
level, data type (UNKNOWN, UINT4, INT4 included), dimension count 0 or 9, size 0, sizes that
differ, overlapping or broadcast output, alignment, total size, misaligned offset, short or
out-of-buffer ranges, partial overlap, in place with another layout. `FRONT_END_FAULTS`: level,
unsupported dtype, dtypes that differ, shapes that do not broadcast, out dtype or shape,
read-only out, out partly overlapping an input. The oracle, not the fault's name, decides: some
faults turn out harmless.

Profiles (environment variable `DMLGPU_HYPOTHESIS_PROFILE`):
  ci       the default. About 300 examples over both properties (210 low level, 100 front end),
           derandomized (the same examples on every run), no example database.
  nightly  20000 examples per test, random; failing examples are kept in an example database
           under ~/.cache/dmlgpu/hypothesis/examples.
Hypothesis' own caches also go to ~/.cache/dmlgpu/hypothesis (unless HYPOTHESIS_STORAGE_DIRECTORY
is set), so no `.hypothesis/` folder appears in the working directory.

Regressions: every drawn case is plain data (`DescriptorCase`, `FrontEndCase`, `TensorCallCase`:
ints, strings, tuples; array contents and guard bytes are rebuilt from a seed). When a property
fails, Hypothesis prints the minimal case as one JSON line, "regression entry: {...}". Add it to
`tests/regressions/descriptor_cases.json`, `front_end_cases.json` or `tensor_cases.json` as
`{"id": "...", "case": {...}}`, plus `"xfail": "<reason>"` while the bug is open:
`test_descriptor_regression` / `test_front_end_regression` / `test_tensor_view_regression`
replay every entry on every run, whatever the profile, and xfail entries are strict (a fix fails
them until the key is removed).
Bugs that plain data cannot express (numpy integer sizes, device limits) are tests at the end of
the property module they concern.
"""
from __future__ import annotations

import dataclasses
import json
import os
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, currently_in_test_context, event, note, settings
from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir
from hypothesis.database import DirectoryBasedExampleDatabase

from dmlgpu import DataType, FeatureLevel, Tensor, TensorDesc, testing
from dmlgpu.table.operators import BY_SHORT, OPERATORS

from conftest import poisoned

# -- profiles ---------------------------------------------------------------------------------
PROFILE = os.environ.get("DMLGPU_HYPOTHESIS_PROFILE", "ci")
CACHE = Path.home() / ".cache" / "dmlgpu" / "hypothesis"
if not os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY"):
    set_hypothesis_home_dir(CACHE)
_SLOW_IS_FINE = [HealthCheck.too_slow, HealthCheck.data_too_large]
settings.register_profile("ci", max_examples=100, deadline=None, derandomize=True, database=None,
                          suppress_health_check=_SLOW_IS_FINE, print_blob=True)
settings.register_profile("nightly", max_examples=20000, deadline=None, print_blob=True,
                          suppress_health_check=_SLOW_IS_FINE,
                          database=DirectoryBasedExampleDatabase(CACHE / "examples"))
settings.load_profile(PROFILE)


def examples(ci: int) -> int:
    """Examples for one test: its share of the CI budget, or the profile's count otherwise."""
    return ci if PROFILE == "ci" else settings.default.max_examples


def tell(text: str, statistic: str | None = None):
    """A note printed with a failing example (and an event for the statistics), under Hypothesis;
    plain regression replays print nothing (their ids say what they are)."""
    if currently_in_test_context():
        note(text)
        if statistic:
            event(statistic)


def sometimes(percent: int):
    """True in about `percent`% of draws; shrinks towards False, the ordinary case."""
    return st.integers(0, 99).map(lambda n: n >= 100 - percent)


REGRESSIONS = Path(__file__).parent / "regressions"
LEVEL_VALUES = [int(level) for level in FeatureLevel]
NUMERIC_TYPES = [t for t in DataType if t.bits >= 8]
MAX_TEST_ELEMENTS = 2000  # per tensor: lavapipe (CPU Vulkan, 2 cores) stays fast


def load_regressions(name: str, case_type):
    """pytest params from a regressions JSON file: one per entry, strict xfail when marked."""
    params = []
    for entry in json.loads((REGRESSIONS / name).read_text()):
        marks = [pytest.mark.xfail(strict=True, reason=entry["xfail"])] if "xfail" in entry else []
        params.append(pytest.param(case_type.from_json(entry["case"]), marks=marks, id=entry["id"]))
    return params


def _tuples(value):
    """JSON lists back to tuples, recursively (cases are frozen dataclasses of tuples)."""
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def resolve_level(value):
    """A level value to its FeatureLevel (None = newest); None for a value that is no level."""
    if value is None:
        return FeatureLevel.newest()
    return FeatureLevel(value) if value in LEVEL_VALUES else None


# =============================================================================================
# Geometry: the oracle's own arithmetic, written apart from dmlgpu's.
# =============================================================================================
def packed(sizes) -> tuple[int, ...]:
    strides, step = [], 1
    for size in reversed(sizes):
        strides.append(step)
        step *= size
    return tuple(reversed(strides))


def element_offsets(sizes, strides) -> np.ndarray:
    """Offset in elements of every logical element, row-major: DirectML's dot(coords, strides)."""
    strides = packed(sizes) if strides is None else strides
    offsets = np.zeros(1, np.int64)
    for size, stride in zip(sizes, strides):
        offsets = (offsets[:, None] + np.arange(size, dtype=np.int64) * stride).ravel()
    return offsets


def footprint(data_type: int, sizes, strides) -> int:
    """DMLCalcBufferTensorSize: bytes up to the end of the last element, rounded up to 4."""
    bits = DataType(data_type).bits
    if bits == 0 or not sizes or min(sizes) == 0:
        return 0
    strides = packed(sizes) if strides is None else strides
    last = sum((s - 1) * st for s, st in zip(sizes, strides))
    nbytes = -(-(last + 1) * bits // 8)
    return -(-nbytes // 4) * 4


# =============================================================================================
# Low level: descriptors and bindings
# =============================================================================================
class _Case:
    """What every case class has: its operator's row and its JSON (the regression corpus)."""

    @property
    def operator(self):
        return BY_SHORT[self.op]

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), separators=(",", ":"))


@dataclass(frozen=True)
class TensorCase:
    """One tensor's descriptor fields and its binding."""

    data_type: int  # DataType value (UNKNOWN, UINT4 and INT4 included: always rejected)
    sizes: tuple
    strides: tuple | None  # None = packed
    total: int | None  # TotalTensorSizeInBytes; None = DMLCalcBufferTensorSize
    alignment: int  # GuaranteedBaseOffsetAlignment
    buffer: int  # index into DescriptorCase.buffer_sizes
    offset: int  # Binding.offset
    size: int | None  # Binding.size_in_bytes; None = to the end of the buffer

    @property
    def element_size(self) -> int:
        return max(1, DataType(self.data_type).bits // 8)

    @property
    def total_bytes(self) -> int:
        return footprint(self.data_type, self.sizes, self.strides) if self.total is None else self.total

    def desc(self) -> TensorDesc:
        return TensorDesc(self.data_type, self.sizes, self.strides, self.total, self.alignment)


@dataclass(frozen=True)
class DescriptorCase(_Case):
    """One operator descriptor with its bindings, buffers and data: everything a run needs."""

    op: str  # operator short name
    level: int | None  # a DML_FEATURE_LEVEL value (or a value that is none); None = newest
    tensors: tuple  # TensorCase per tensor: inputs, then the output
    buffer_sizes: tuple
    seed: int  # input values and guard bytes

    def feature_level(self):
        return FeatureLevel(self.level) if self.level in LEVEL_VALUES else self.level

    def range(self, t: TensorCase) -> tuple[int, int]:
        """The byte range [start, end) a tensor's binding covers."""
        return t.offset, self.buffer_sizes[t.buffer] if t.size is None else t.offset + t.size

    @classmethod
    def from_json(cls, data: dict) -> "DescriptorCase":
        tensors = tuple(TensorCase(**{k: _tuples(v) for k, v in t.items()}) for t in data["tensors"])
        return cls(data["op"], data["level"], tensors, tuple(data["buffer_sizes"]), data["seed"])


# -- the oracle -------------------------------------------------------------------------------
def descriptor_problem(case: DescriptorCase) -> str | None:
    """The DirectML table rule the descriptor breaks, or None when the tables accept it."""
    op, level = case.operator, resolve_level(case.level)
    row = None if level is None else op.support_at(level)
    if row is None:
        return "no such operator at this level"
    *inputs, output = case.tensors
    if any(t.data_type not in row.input_types for t in inputs) or output.data_type not in row.output_types:
        return "data type"
    if op.same_type and len({t.data_type for t in case.tensors}) > 1:
        return "data types differ"
    if len({t.sizes for t in case.tensors}) > 1:
        return "sizes differ"
    if len(output.sizes) not in row.dims:
        return "dimension count"
    if min(output.sizes) < 1:
        return "size 0"
    for t in case.tensors:
        if t.alignment and (t.alignment & (t.alignment - 1) or t.alignment < t.element_size):
            return "alignment"
        if t.total is not None and (t.total < footprint(t.data_type, t.sizes, t.strides) or t.total % 4):
            return "total size"
    offsets = element_offsets(output.sizes, output.strides)
    if np.unique(offsets).size != offsets.size:
        return "output elements overlap"
    return None


def binding_problem(case: DescriptorCase) -> str | None:
    """The binding rule broken (offset, range, hazard), or None when DirectML accepts them."""
    for t in case.tensors:
        start, end = case.range(t)
        if start % max(16, t.alignment):
            return "offset alignment"
        if end - start < t.total_bytes or end > case.buffer_sizes[t.buffer]:
            return "range size"
    *inputs, output = case.tensors
    out_range = case.range(output)
    for t in inputs:
        start, end = case.range(t)
        if t.buffer != output.buffer or end <= out_range[0] or out_range[1] <= start:
            continue  # no byte shared with the output
        if (start, end) != out_range:
            return "partial overlap"
        if not case.operator.in_place:
            return "in place not supported"
        if t.data_type != output.data_type or not np.array_equal(
                element_offsets(t.sizes, t.strides), element_offsets(output.sizes, output.strides)):
            return "in place with another layout"
    return None



def verdict_of(case: DescriptorCase) -> tuple[str | None, str | None]:
    """(descriptor problem, binding problem); the second is only judged for valid descriptors."""
    problem = descriptor_problem(case)
    return problem, binding_problem(case) if problem is None else None


# -- strategies -------------------------------------------------------------------------------
DESCRIPTOR_FAULTS = (
    "level", "data type", "dimension count", "size 0", "sizes differ", "output overlaps",
    "alignment", "total size", "offset", "range too small", "range outside buffer",
    "partial overlap", "in place, other layout",
)
INPUT_LAYOUTS = ("packed", "padded", "aligned-rows", "permuted", "broadcast", "broadcast-rows")
OUTPUT_LAYOUTS = ("packed", "padded", "permuted")
#: Layout plans: (input layouts, output layouts), named after the kernel dmlgpu picks for them
#: (dmlgpu/compiled.py), so that each kernel gets its share of examples; which kernel ran is not
#: checked. "any" mixes everything (the fault tests use it).
PLANS = {
    "flat": (("packed",), ("packed",)),
    "rows": (("packed", "aligned-rows", "broadcast-rows"), ("packed",)),  # whole 16-byte rows
    "gather": (("padded", "permuted", "broadcast"), ("packed",)),
    "strided": (INPUT_LAYOUTS, ("padded", "permuted")),
    "any": (INPUT_LAYOUTS, OUTPUT_LAYOUTS),
}


@st.composite
def sizes_of(draw, dims: int, whole_rows=False):
    """`dims` sizes whose product stays under MAX_TEST_ELEMENTS, spread about evenly; with
    `whole_rows`, the innermost is a multiple of 16, so rows fill whole 16-byte vectors."""
    sizes, product = [], 1
    if dims and whole_rows:
        sizes = [draw(st.sampled_from([16, 32, 48]))]
        product = sizes[0]
    cap = max(1, int(2 * (MAX_TEST_ELEMENTS // product) ** (1 / max(dims - len(sizes), 1))))
    while len(sizes) < dims:
        size = draw(st.integers(1, max(1, min(cap, MAX_TEST_ELEMENTS // product))))
        sizes.insert(0, size)
        product *= size
    return tuple(sizes)


@st.composite
def strides_of(draw, sizes, layouts, element_size=1):
    """Strides of one of the named layouts for `sizes` (None = packed, implicitly).

    packed; padded: gaps after elements and rows; aligned-rows: elements contiguous, each row
    padded to whole 16-byte units (what the ROWS kernel reads); permuted: packed in another
    dimension order; broadcast: zero strides on random dimensions; broadcast-rows: aligned rows
    with zero strides on outer dimensions only; overlapping: all strides 1.
    """
    layout = draw(st.sampled_from(layouts))
    if not sizes:
        return None
    dims = len(sizes)
    if layout == "packed":
        return draw(st.sampled_from([None, packed(sizes)]))
    if layout == "overlapping":
        return tuple(1 for _ in sizes)
    order = list(range(dims))  # memory order, outermost first
    if layout == "permuted":
        order = draw(st.permutations(order))
    vector = max(1, 16 // element_size)  # elements per 16 bytes
    strides, step = [0] * dims, draw(st.integers(1, 2)) if layout == "padded" else 1
    for d in reversed(order):
        strides[d] = step
        step *= sizes[d]
        if layout == "padded":
            step += draw(st.integers(0, 3))
        elif layout in ("aligned-rows", "broadcast-rows"):
            step = -(-step // vector) * vector + vector * draw(st.integers(0, 1))
    if layout in ("broadcast", "broadcast-rows"):
        zeros = draw(st.lists(st.booleans(), min_size=dims, max_size=dims))
        if layout == "broadcast-rows":
            zeros[-1] = False
        strides = [0 if zero else s for zero, s in zip(zeros, strides)]
    return tuple(strides)


@st.composite
def descriptor_cases(draw, fault=None, op=None, plan="any"):
    """A descriptor with its bindings and buffers for `op` (default: any), with layouts from
    PLANS[plan], carrying `fault` (one of DESCRIPTOR_FAULTS)."""
    op = op or draw(st.sampled_from(OPERATORS))
    level = draw(st.none() | st.sampled_from([v for v in LEVEL_VALUES if v >= op.introduced]))
    if fault == "level":
        level = draw(st.sampled_from([v for v in LEVEL_VALUES if v < op.introduced] + [0, 0x4200]))
    row = op.support_at(resolve_level(level) or FeatureLevel.newest()) or op.newest
    in_type, out_type = draw(st.sampled_from(testing.case_types(op, row.level)))
    dims = draw(st.sampled_from(row.dims))
    if fault == "dimension count":
        dims = draw(st.sampled_from([d for d in range(10) if d not in row.dims]))
    # Whole 16-byte rows: always for the rows plan, often elsewhere (rows that are whole but
    # misaligned, or strided, must not take the rows kernel).
    sizes = draw(sizes_of(dims, whole_rows=plan == "rows" or draw(sometimes(40))))
    if fault == "size 0" and sizes:
        zero = draw(st.integers(0, dims - 1))
        sizes = sizes[:zero] + (0,) + sizes[zero + 1:]
    victim = draw(st.integers(0, len(op.tensors) - 1))  # the tensor a per-tensor fault hits
    in_place_of = None
    if fault == "in place, other layout" or draw(sometimes(20)):
        in_place_of = draw(st.integers(0, len(op.inputs) - 1))
    shared = draw(st.booleans())

    cursors, tensors = [0] if shared else [], []  # per buffer: where the next free bytes start
    for k in range(len(op.tensors)):
        hit = k == victim
        is_output = k == len(op.inputs)
        data_type = out_type if is_output else in_type
        if fault == "data type" and hit:
            data_type = draw(st.sampled_from(list(DataType)))
        these_sizes = sizes
        if fault == "sizes differ" and hit:
            these_sizes = sizes[:-1] + (sizes[-1] + 1,) if sizes and draw(st.booleans()) else sizes + (2,)
        layouts = PLANS[plan][is_output]
        if fault == "output overlaps" and is_output:
            layouts = ("overlapping", "broadcast")
        strides = draw(strides_of(these_sizes, layouts, max(1, DataType(data_type).bits // 8)))
        if is_output and in_place_of is not None and fault != "in place, other layout":
            strides = tensors[in_place_of].strides
        alignment = 0
        if fault == "alignment" and hit:
            alignment = draw(st.sampled_from([1, 2, 3, 24, 48]))
        elif draw(sometimes(20)):
            alignment = draw(st.sampled_from([16, 32, 64, DataType(data_type).bits // 8 or 1]))
        minimum = footprint(data_type, these_sizes, strides)
        total = None
        if fault == "total size" and hit:
            total = draw(st.sampled_from([minimum - 4, minimum + 2]))
        elif draw(sometimes(20)):
            total = minimum + 4 * draw(st.integers(1, 8))
        length = max(total if total is not None else minimum, 4)

        if is_output and in_place_of is not None:
            source = tensors[in_place_of]
            tensors.append(TensorCase(data_type, these_sizes, strides, total, alignment,
                                      source.buffer, source.offset, source.size))
            continue
        if not shared:
            cursors.append(0)
        buffer = len(cursors) - 1
        unit = max(16, alignment) if alignment & (alignment - 1) == 0 else 16
        offset = -(-cursors[buffer] // unit) * unit + unit * draw(st.integers(0, 2))
        if fault == "offset" and hit:
            offset += draw(st.sampled_from([1, 4, 8]))
        if fault == "partial overlap" and is_output:
            source = tensors[min(victim, k - 1)]
            buffer, offset = source.buffer, source.offset + 16
        size = draw(st.sampled_from([length] * 8 + [length + 16, None]))
        if fault == "range too small" and hit:
            size = length - 4
        end = offset + (length if size is None else size)
        if fault == "range outside buffer" and hit:
            size = length + 64
        cursors[buffer] = max(cursors[buffer], end + 16)
        tensors.append(TensorCase(data_type, these_sizes, strides, total, alignment, buffer, offset, size))
    trailing = draw(st.sampled_from([0, 4, 16, 48]))
    buffer_sizes = tuple(max(4, c - 16 + trailing) for c in cursors)
    seed = draw(st.integers(0, 2**32 - 1))
    return DescriptorCase(op.short, level, tuple(tensors), buffer_sizes, seed)


# =============================================================================================
# numpy front end
# =============================================================================================
SUPPORTED_DTYPES = tuple(t.numpy.name for t in NUMERIC_TYPES)
UNSUPPORTED_DTYPES = ("bool", "complex64", ">c8", "object", "U1")
FRONT_END_FAULTS = ("level", "unsupported dtype", "dtypes differ", "shapes do not broadcast",
                    "out dtype", "out shape", "read-only out", "out overlaps input")


@dataclass(frozen=True)
class ArrayCase:
    """One operand: its dtype, its logical shape and the kind of view that presents it.

    view: "contiguous"; "transposed" (params: the axis permutation); "sliced" (params:
    (step, start) per axis, negative steps reverse); "broadcast" (params: per axis, True if
    stored, False if stored with size 1 and broadcast by numpy); "python": not an array but the
    Python scalar params[0] (dtype and shape unused). dtype may be big-endian (">u4").
    """

    dtype: str
    shape: tuple
    view: str = "contiguous"
    params: tuple = ()

    def build(self, rng):
        """(the operand, the array that owns its memory; None for a Python scalar)."""
        if self.view == "python":
            return self.params[0], None
        dtype = np.dtype(self.dtype)
        data_type = native_type(dtype)

        def fresh(shape):
            if data_type is None:
                return np.zeros(shape, dtype)
            return testing.sample(data_type, shape, rng).astype(dtype)  # big-endian: same values

        if self.view == "transposed":
            base = fresh(tuple(self.shape[i] for i in np.argsort(self.params)))
            return base.transpose(self.params), base
        if self.view == "sliced":
            base = fresh(tuple(n * abs(step) + start for n, (step, start) in zip(self.shape, self.params)))
            index = tuple(slice(start, start + n * step, step) if step > 0 else
                          slice(start + n * -step - 1 if n else None, start - 1 if start else None, step)
                          for n, (step, start) in zip(self.shape, self.params))
            return base[(*index, ...)], base  # `...` keeps a 0-d result an array
        if self.view == "broadcast":
            base = fresh(tuple(n if stored else 1 for n, stored in zip(self.shape, self.params)))
            return np.broadcast_to(base, self.shape), base
        base = fresh(self.shape)
        return base, base


@dataclass(frozen=True)
class FrontEndCase(_Case):
    """One call of a numpy front-end function: operands, `out`, dtype and feature level."""

    op: str
    level: int | None  # None = newest
    inputs: tuple  # ArrayCase per operand
    same_operand: bool  # f(a, a) for two operands
    out: str  # "none", "fresh", "view", "in_place:<k>", "readonly", "overlap"
    out_dtype: str | None  # bit_count's dtype= (and its out's dtype), or out's dtype; None = default
    out_shape: tuple | None  # a wrong shape for `out`; None = the result's shape
    seed: int

    @classmethod
    def from_json(cls, data: dict) -> "FrontEndCase":
        data = {k: _tuples(v) for k, v in data.items() if k != "inputs"} | {
            "inputs": tuple(ArrayCase(**{k: _tuples(v) for k, v in a.items()}) for a in data["inputs"])}
        return cls(**data)


@st.composite
def shapes(draw, max_dims=10):
    """0 to `max_dims` dimensions, mostly small, size-1 and size-0 dimensions included."""
    dims = draw(st.integers(0, max_dims))
    sizes, product = [], 1
    for _ in range(dims):
        size = draw(st.sampled_from([1, 1, 2, 2, 3, 4, 5, 7]))
        size = size if product * size <= 500 else 1
        sizes.append(size)
        product *= size
    if sizes and draw(sometimes(6)):
        sizes[draw(st.integers(0, dims - 1))] = 0
    return tuple(sizes)


@st.composite
def broadcast_operand(draw, result):
    """A shape that broadcasts to `result`: leading dimensions dropped, some stored as 1."""
    drop = draw(st.integers(0, len(result)))
    return tuple(1 if draw(sometimes(25)) else n for n in result[drop:])


def native_type(dtype) -> DataType | None:
    """The DataType of a numpy dtype in either byte order (numpy computes on values)."""
    dtype = np.dtype(dtype)
    return DataType.from_numpy(dtype if dtype.isnative else dtype.newbyteorder("="))


def is_scalar(operand) -> bool:
    """A Python scalar (numpy's float64 subclasses float but is no Python scalar)."""
    return isinstance(operand, (bool, int, float)) and not isinstance(operand, np.generic)


def scalar_value(value, data_type: DataType):
    """NEP 50 as numpy 2 applies it, numpy's overflow warning counted as an error: the 0-d
    array a Python scalar becomes next to an operand of `data_type`, or None if rejected."""
    if isinstance(value, bool) and data_type.is_float:
        return None  # numpy's bitwise ufuncs take bools with integers only
    if isinstance(value, float) and not data_type.is_float:
        return None  # numpy 2: np.bitwise_xor(uint8_array, 1.5) raises
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            return np.asarray(value, data_type.numpy)
        except (OverflowError, RuntimeWarning):
            return None


#: Python scalars: edges of every width (fitting or one past), floats of every size, bools.
PYTHON_SCALARS = (
    st.sampled_from([0, 1, -1, True, False, 0.0, -0.0, 1.5, float("nan"), float("inf"), -float("inf"),
                     65504, 65520, 1e39, 1e308])
    | st.sampled_from([sign * (1 << bits) + delta for bits in (7, 8, 15, 16, 31, 32, 63, 64)
                       for sign in (1, -1) for delta in (-1, 0)])
    | st.integers(-(1 << 65), 1 << 65)
    | st.floats(width=64)
)


def scalar_case(value) -> "ArrayCase":
    return ArrayCase("python", (), "python", (value,))


def maybe_big_endian(draw, dtype: str) -> str:
    """`dtype`, or sometimes its big-endian twin (multi-byte types)."""
    if np.dtype(dtype).itemsize > 1 and np.dtype(dtype).kind in "uif" and draw(sometimes(20)):
        return np.dtype(dtype).newbyteorder(">").str
    return dtype


@st.composite
def array_cases(draw, dtype, shape):
    dtype = maybe_big_endian(draw, dtype)
    view = draw(st.sampled_from(["contiguous", "transposed", "sliced", "broadcast"])) if shape else "contiguous"
    params = ()
    if view == "transposed":
        params = tuple(draw(st.permutations(range(len(shape)))))
    elif view == "sliced":
        product, steps = 1, []
        for n in shape:  # the base array stays under 20000 elements
            step, start = draw(st.sampled_from([1, 1, 2, 3, -1, -2])), draw(st.integers(0, 2))
            if product * (n * abs(step) + start) > 20000:
                step, start = 1, 0
            product *= n * abs(step) + start
            steps.append((step, start))
        params = tuple(steps)
    elif view == "broadcast":
        params = tuple(draw(st.lists(st.booleans(), min_size=len(shape), max_size=len(shape))))
    return ArrayCase(dtype, shape, view, params)


@st.composite
def front_end_cases(draw, fault=None, op=None):
    """A front-end call of `op` (default: any) carrying `fault` (one of FRONT_END_FAULTS)."""
    if fault in ("dtypes differ", "shapes do not broadcast"):
        op = draw(st.sampled_from([o for o in OPERATORS if len(o.inputs) == 2]))
    op = op or draw(st.sampled_from(OPERATORS))
    level = draw(st.none() | st.sampled_from([v for v in LEVEL_VALUES if v >= op.newest.level]))
    if fault == "level":
        level = draw(st.sampled_from(LEVEL_VALUES))
    dtype = draw(st.sampled_from(UNSUPPORTED_DTYPES if fault == "unsupported dtype" else SUPPORTED_DTYPES))
    result = draw(shapes())
    operands = [result] if len(op.inputs) == 1 else [draw(broadcast_operand(result)) for _ in op.inputs]
    if fault == "shapes do not broadcast" and len(operands) == 2:
        operands = [operands[0] + (2,), operands[1] + (3,)]
    dtypes = [dtype] * len(operands)
    if fault == "dtypes differ" and len(operands) == 2:
        dtypes[1] = draw(st.sampled_from(SUPPORTED_DTYPES))
    same_operand = len(operands) == 2 and operands[0] == operands[1] and draw(sometimes(15))
    inputs = [draw(array_cases(d, s)) for d, s in zip(dtypes, operands)]
    if len(inputs) == 2 and not same_operand and fault in (None, "level", "unsupported dtype", "read-only out") \
            and draw(sometimes(30)):  # Python scalars: one operand, rarely both
        for k in draw(st.sampled_from([(0,), (1,), (1,), (0, 1)])):
            inputs[k] = scalar_case(draw(PYTHON_SCALARS))
    inputs = tuple(inputs)

    out = draw(st.sampled_from(["none", "none", "fresh", "view", "in_place"]))
    arrays = [k for k, a in enumerate(inputs) if a.view != "python"]
    if out == "in_place":
        out = f"in_place:{draw(st.sampled_from(arrays))}" if arrays else "fresh"
    if fault == "read-only out":
        out = "readonly"
    elif fault == "out overlaps input":
        out = "overlap"
    chosen_output = not op.same_type  # the call names the output dtype (`dtype=`)
    out_dtype = draw(st.sampled_from([t.numpy.name for t in op.newest.output_types])) if chosen_output else None
    if out_dtype and np.dtype(out_dtype).itemsize > 1 and draw(sometimes(20)):
        out_dtype = np.dtype(out_dtype).newbyteorder(">").str  # a dtype argument names values
    if fault == "out dtype":
        out_dtype = draw(st.sampled_from(["uint16", "int32", "float32", "uint64", "float64", "float16"]))
        if out == "none" and not chosen_output:
            out = "fresh"  # same-type operators take a wrong dtype only through `out`
    out_shape = None
    if fault == "out shape":
        out = draw(st.sampled_from(["fresh", "view"]))
        out_shape = draw(shapes(max_dims=3))
    return FrontEndCase(op.short, level, inputs, same_operand, out, out_dtype, out_shape,
                        draw(st.integers(0, 2**32 - 1)))


def result_shape(arrays):
    try:
        return np.broadcast_shapes(*(np.shape(a) for a in arrays))
    except ValueError:
        return None


def front_end_verdict(case: FrontEndCase, arrays, out):
    """The oracle for one call: (verdict, values). verdict: "accept", "reject", or "dims":
    accepted, or rejected for more dimensions than the level allows after merging contiguous
    ones (which it does not model). values: the operands as numpy computes on them (native byte
    order, Python scalars converted by NEP 50), when the operands are acceptable."""
    op, level = case.operator, resolve_level(case.level)
    row = op.support_at(level)
    if row is None:
        return "reject", None
    types = [native_type(a.dtype) for a in arrays if not is_scalar(a)]
    if not types or any(t not in row.input_types for t in types) or len(set(types)) > 1:
        return "reject", None
    values = [scalar_value(a, types[0]) if is_scalar(a) else a.astype(types[0].numpy) for a in arrays]
    if any(v is None for v in values):
        return "reject", None
    shape = result_shape(values)
    if shape is None:
        return "reject", None
    out_type = types[0] if op.same_type else native_type(case.out_dtype)
    if out_type not in row.output_types:
        return "reject", values
    if out is not None:
        if native_type(out.dtype) != out_type or out.shape != shape or not out.flags.writeable:
            return "reject", values
        for a in arrays:  # a big-endian operand is converted on entry: it never aliases out
            if not is_scalar(a) and a.dtype.isnative and np.shares_memory(a, out):
                exact = (a.__array_interface__["data"][0] == out.__array_interface__["data"][0]
                         and a.shape == out.shape and a.strides == out.strides)
                if not exact or not op.in_place:
                    return "reject", values
    return "dims" if len(shape) > row.dims[-1] else "accept", values


# =============================================================================================
# Tensor views through the device-resident path
# =============================================================================================
@dataclass(frozen=True)
class ViewCase:
    """One operand (or `out`) of a Tensor call: a view of a Tensor uploaded from a `base`-shaped
    array of `dtype` (maybe big-endian: uploaded by value), or a Python scalar.

    key: basic indexing as plain data, one entry per item: ("i", n) an integer, ("s", start,
    stop, step) a slice, ("n",) None, ("e",) `...`; axes: then transposed so (None: not).
    kind "python": the Python scalar `value` instead.
    """

    dtype: str
    base: tuple
    key: tuple
    axes: tuple | None
    kind: str = "view"
    value: object = None

    def index(self) -> tuple:
        return tuple(k[1] if k[0] == "i" else slice(*k[1:]) if k[0] == "s" else None if k[0] == "n" else ...
                     for k in self.key)

    def build(self, rng, poison=False):
        """(numpy view, Tensor view, numpy base, Tensor base); scalars: (value, value, None, None)."""
        if self.kind == "python":
            return self.value, self.value, None, None
        dtype = np.dtype(self.dtype)
        data_type = native_type(dtype)
        base = poisoned(self.base, data_type.numpy) if poison else testing.sample(data_type, self.base, rng)
        tensor = Tensor.from_numpy(base.astype(dtype))
        t = tensor[self.index()]
        return self.of(base), t if self.axes is None else t.transpose(self.axes), base, tensor

    def of(self, base: np.ndarray) -> np.ndarray:
        """The same view of a numpy array."""
        index = self.index()
        view = base[index if ... in index else index + (...,)]  # `...` keeps a 0-d result an array
        return view if self.axes is None else view.transpose(self.axes)


@dataclass(frozen=True)
class TensorCallCase(_Case):
    """A call of an operator's front-end function on Tensor views (newest level)."""

    op: str
    operands: tuple  # ViewCase per input
    same_operand: bool  # the same Tensor view twice
    out: str  # "none", "fresh", "view" (out_view), "in_place:<k>"
    out_view: ViewCase | None
    out_dtype: str | None  # bit_count's dtype=
    seed: int

    @classmethod
    def from_json(cls, data: dict) -> "TensorCallCase":
        def view(v):
            return None if v is None else ViewCase(**{k: _tuples(x) for k, x in v.items()})
        return cls(data["op"], tuple(view(v) for v in data["operands"]), data["same_operand"], data["out"],
                   view(data["out_view"]), data["out_dtype"], data["seed"])


@st.composite
def view_cases(draw, dtype, shape):
    """A view of `shape`: each dimension a slice (start, step) of a longer one, integers over
    extra dimensions, None for some size-1 dimensions, perhaps `...`, perhaps transposed.
    Starts and integers land views on and off 16-byte boundaries."""
    axes = tuple(draw(st.permutations(range(len(shape))))) if len(shape) > 1 and draw(sometimes(30)) else None
    before = [shape[axes.index(d)] for d in range(len(shape))] if axes else list(shape)
    key, base, product = [], [], 1
    for n in before:
        while draw(sometimes(15)) and product < 1000:
            m = draw(st.integers(1, 3))
            i = draw(st.integers(-m, m - 1))
            key.append(("i", i))
            base.append(m)
            product *= m
        if n == 1 and draw(sometimes(20)):
            key.append(("n",))
            continue
        start, step, extra = draw(st.integers(0, 3)), draw(st.sampled_from([1, 1, 2, 3])), draw(st.integers(0, 2))
        length = start + (n - 1) * step + 1 + extra if n else start + extra
        if product * length > 4000:
            start, step, extra, length = 0, 1, 0, n
        key.append(("s", start, start + (n - 1) * step + 1 if n else start, step))
        base.append(length)
        product *= max(length, 1)
    if draw(sometimes(15)):
        key.append(("e",))
    return ViewCase(maybe_big_endian(draw, dtype), tuple(base), tuple(key), axes)


@st.composite
def tensor_call_cases(draw, op):
    dtype = draw(st.sampled_from([t.numpy.name for t in op.newest.input_types]))
    result = draw(shapes(max_dims=4))
    operands = [result] if len(op.inputs) == 1 else [draw(broadcast_operand(result)) for _ in op.inputs]
    same_operand = len(operands) == 2 and operands[0] == operands[1] and draw(sometimes(15))
    views = [draw(view_cases(dtype, shape)) for shape in operands]
    if len(views) == 2 and not same_operand and draw(sometimes(30)):
        k = draw(st.integers(0, 1))
        views[k] = ViewCase(dtype, (), (), None, "python", draw(PYTHON_SCALARS))
    out_dtype = None if op.same_type else draw(st.sampled_from([t.numpy.name for t in op.newest.output_types]))
    out = draw(st.sampled_from(["none", "fresh", "view", "view", "in_place"]))
    candidates = [k for k, v in enumerate(views) if v.kind == "view"]
    if out == "in_place":
        out = f"in_place:{draw(st.sampled_from(candidates))}" if candidates else "view"
    out_view = None
    if out == "view":
        full = result_shape([np.empty(s) for s in operands])
        out_view = draw(view_cases(out_dtype or dtype, full))
    return TensorCallCase(op.short, tuple(views), same_operand, out, out_view, out_dtype,
                          draw(st.integers(0, 2**32 - 1)))
