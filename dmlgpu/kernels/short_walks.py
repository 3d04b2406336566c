"""REDUCE's short walks: which cuts take the short-walk pipelines (shaders/reduce.comp short_units,
short_quads) and which walks go across (a reduction over a leading axis): decided from the cut, the
layout and the function, once per compiled operator (dmlgpu/kernels/compiled_selection.py)."""
from __future__ import annotations

import numpy as np

from . import variants as kernels
from ..table.operators import ReduceFunction

__all__ = ["FIXED_SUMS", "FIXED_WALK", "QUAD_WALK", "QUICK_SUMS", "QUICK_WALK", "SHORT_WALKS", "SUMMED", "WORD_WALK",
           "fixed_sums", "quad_layout", "quick_sums", "short_quads", "short_walk", "short_words", "walks_across",
           "word_layout"]

#: REDUCE's short-walk pipelines (shaders/reduce.comp short_units, spec constant 2): 4 for walks of
#: at most 4 (an invocation loads 8 output elements' walks first), 32 for longer ones, of any length
#: (one output element an invocation, in rounds of 32 loads); float arithmetic (every float function
#: but MIN/MAX/ARGMIN/ARGMAX) only the first: it lost in rounds (but the quick sums: QUICK_SUMS). H200 figures: benchmarks/NOTES.md,
#: session 14 (MAX of 16 x 4M over axis 0: 297 us general, 204 two outputs an invocation, 114 in rounds).
SHORT_WALKS = (4, kernels.REDUCE_SHORT_LOADS)
_SHORT_FLOAT_WALK = 4


def short_walk(shape, walked: int, across: bool, is_cpu: bool, float_arithmetic: bool = False) -> int:
    """REDUCE's SHORT_WALK for this cut (`shape`: compiled_selection's ReduceShape; 0: the general
    pipeline): on a GPU, a walk `across` with one lane and one chunk an output element gets
    SHORT_WALKS[0] for walks that short, else SHORT_WALKS[1] (in rounds); `float_arithmetic` (not
    MIN/MAX/ARG*): only up to _SHORT_FLOAT_WALK. (short_quads may then pick a quads pipeline.)"""
    if is_cpu or not across or shape.lanes != 1 or shape.chunks != 1:
        return 0
    if float_arithmetic and walked > _SHORT_FLOAT_WALK:
        return 0
    return SHORT_WALKS[0] if walked <= SHORT_WALKS[0] else SHORT_WALKS[1]


#: The float sums whose short walks are first added by TwoSums and the result proved
#: (shaders/reduce.comp QUICK_SUMS), the triples running in a second pass only for the output
#: elements whose proof fails: on FLOAT32, walks of at most QUICK_WALK take the short-walk
#: pipelines, and in quads, as the integer functions do, but rounds past QUAD_WALK / 2 (the quads
#: of 16 rows ran SUM at half L1's speed). H200, 256 MiB over axis 0 (benchmarks/NOTES.md, session
#: 17): SUM of 2 rows 658 -> 190 us, 8 rows 443 -> 116, 32 rows 154 -> 106; of 256 rows the
#: general pipeline's 88 us beat 111, of 1,024 rows 81 beat 201.
QUICK_SUMS = (ReduceFunction.SUM, ReduceFunction.L1)
QUICK_WALK = 128


def quick_sums(function, in_bits: int, out_bits: int, is_float: bool, walked: int = 0) -> bool:
    """Whether a REDUCE of `function` on these types over walks of `walked` elements takes the
    quick passes where it takes a short-walk pipeline (shaders/reduce.comp QUICK_SUMS: FLOAT32 SUM
    and L1, walks of at most QUICK_WALK)."""
    return is_float and in_bits == 32 and out_bits == 32 and function in QUICK_SUMS and walked <= QUICK_WALK


#: The float functions whose state is a sum of terms (reduce_acc.glsl acc_sums): their short walks
#: never take quads (their arithmetic, not their loads, bounds them: benchmarks/NOTES.md, session 16).
SUMMED = (ReduceFunction.SUM, ReduceFunction.AVERAGE, ReduceFunction.L1, ReduceFunction.SUM_SQUARE,
          ReduceFunction.L2, ReduceFunction.LOG_SUM)


#: The float functions whose FLOAT16 state, where the walk goes across (walks_across), is an exact
#: fixed-point integer sum (shaders/include/reduce_acc.glsl acc_fixed; the same bits as the
#: triples'): their short walks are cut as the integer sums' up to FIXED_WALK elements (in rounds,
#: words), longer ones take the general pipeline's walk across. H200, 256 MiB FLOAT16 SUM over axis
#: 0, us, fixed point / triples (benchmarks/NOTES.md, session 22): 2 rows 837 / 955, 5 rows 558 /
#: 1,496, 17 rows 494 / 837, 128 rows 349 / 619, 1,024 rows 371 / 654; short walks past 256 rows
#: lost to the general walk across (1,024 rows 430 against 371). Lanes sharing a contiguous walk
#: keep the triples: fixed point ran 387 us there against 224 (the whole array).
FIXED_SUMS = (ReduceFunction.SUM, ReduceFunction.AVERAGE, ReduceFunction.L1, ReduceFunction.LOG_SUM)
FIXED_WALK = 256


def fixed_sums(function, in_bits: int, is_float: bool) -> bool:
    """Whether a REDUCE of `function` over floats of `in_bits` sums in fixed point where its walk
    goes across (shaders/include/reduce_acc.glsl acc_fixed: FLOAT16 SUM, AVERAGE, L1, LOG_SUM)."""
    return is_float and in_bits == 16 and function in FIXED_SUMS


def _grouped(words: np.ndarray, group: int) -> bool:
    """Whether the innermost kept dimension of more than one element (`words`: the parameter
    words, outer dimensions innermost first) has input and output stride 1 and a multiple of
    `group` elements: `group` adjacent output elements then read `group` adjacent input
    elements at every walked row."""
    first = len(kernels.SELECT_HEADER)
    for d in range(int(words[kernels.SELECT_WORD["outer_dims"]])):
        size, in_stride, out_stride = (int(w) for w in words[first + 3 * d:first + 3 * d + 3])
        if size > 1:
            return size % group == 0 and in_stride == 1 and out_stride == 1
    return False


def quad_layout(words: np.ndarray, element_bytes: int) -> bool:
    """Whether a REDUCE's output elements come in quads (shaders/reduce.comp SHORT_QUADS): 32-bit
    elements whose innermost kept dimension of more than one element has input and output
    stride 1 and a multiple of 4 elements."""
    return element_bytes == 4 and _grouped(words, 4)


#: The longest walk of 16-bit elements that takes words (short_words), and the SHORT_WALK of
#: those past SHORT_WALKS[0] (every load first, REDUCE_SHORT_LOADS / WORD_WALK words an invocation).
WORD_WALK = 8


def short_words(short: int, walked: int, words: bool, element_bytes: int) -> tuple[int, int]:
    """(output elements an invocation takes, SHORT_WALK) for a short walk (`short`: short_walk's,
    over `walked` elements) of 8/16-bit elements whose layout allows words (`words`:
    word_layout), or (0, `short`) for one output element an invocation. 8-bit elements take
    words at any length (in rounds past SHORT_WALKS[0]); 16-bit ones up to WORD_WALK, every
    load first (SHORT_WALK WORD_WALK past SHORT_WALKS[0]), and one element an invocation past it.
    H200, 256 MiB over axis 0, us, words / one element an invocation (benchmarks/NOTES.md,
    session 21): UINT8 MIN 2 rows 352 / 1,867, 17 rows 144 / 315, 1,024 rows 126 / 212; INT16
    MAX 2 rows 356 / 956, 5 rows 291 / 569, 8 rows 249 / 361, but in rounds 291 / 187 at 17 rows
    and 429 / 128 at 1,024 (not found why: 8-bit rounds have twice the states)."""
    if not short or not words or element_bytes not in (1, 2):
        return 0, short
    if element_bytes == 1:
        return 4, short
    if walked <= SHORT_WALKS[0]:
        return 2, short
    return (2, WORD_WALK) if walked <= WORD_WALK else (0, short)


def word_layout(words: np.ndarray, element_bytes: int) -> bool:
    """Whether a short walk over 8- or 16-bit elements takes a word's output elements an
    invocation (shaders/reduce.comp short_words, SHORT_QUADS on them): the innermost kept
    dimension of more than one element has input and output stride 1 and a multiple of a
    word's elements (4 or 2). Any function (which walks: short_words): else each output element
    is its own invocation, with a load of its own a row and, for 8/16-bit results, two atomics a
    store."""
    return element_bytes in (1, 2) and _grouped(words, 4 // element_bytes)


#: The longest SHORT_WALK of the quads pipelines whose invocation takes one quad's walk, every
#: load first (walks of 5-8 elements take half of it).
QUAD_WALK = 16
def short_quads(short: int, walked: int, quads: bool, float_sums: bool, quick: bool = False) -> int:
    """The SHORT_WALK of a short walk (`short`: short_walk's, over `walked` elements) in quads
    where the layout allows (`quads`: quad_layout), 0 for none: SHORT_WALKS[0] (two quads an
    invocation) for walks of at most that many, QUAD_WALK / 2 or QUAD_WALK (one quad, every load
    first) up to that many; never the float sums (`float_sums`) but the quick ones (`quick`:
    quick_sums), which take them to QUAD_WALK / 2 and then one quad an invocation in rounds
    (SHORT_WALKS[1]). Other walks longer than QUAD_WALK take one output element an invocation
    (short_units in rounds): H200, 256 MiB over axis 0, 17-1,024 rows (benchmarks/NOTES.md,
    session 19), FLOAT32 MAX 70-95 us against 81-99 in quad rounds, ARGMAX 73-108 against
    114-171, INT32 SUM 67-80 against 68-94, INT32 MIN 68-104 against 69-88 to 256 rows and
    81-150 past. Short walks, session 16: FLOAT32 MAX of 2 rows 421 -> 117 us, INT32 SUM of 2
    rows 416 -> 96, of 5 rows 122 -> 50; float sums lost (SUM of 2 rows 654 -> 756 us)."""
    if not short or not quads or float_sums:
        return 0
    if short == SHORT_WALKS[0]:
        return short
    if walked <= QUAD_WALK // 2 or (walked <= QUAD_WALK and not quick):
        return QUAD_WALK if walked > QUAD_WALK // 2 else QUAD_WALK // 2
    return short if quick else 0


def walks_across(sizes, strides, walked) -> bool:
    """Whether a reduction of a tensor of these `sizes` and element `strides` over the axes
    `walked` walks one dimension with a stride while adjacent output elements' inputs are
    adjacent (the innermost kept dimension of more than one element has stride 1): a reduction
    over a leading axis. Lanes walking a chunk each then read adjacent words; lanes sharing a
    chunk would each read a word of its own, a stride apart (on an H200 a FLOAT32 sum over the
    leading axis of 65,536 x 1,024 took 8x torch's time: benchmarks/NOTES.md, session 12)."""
    walked = set(walked)
    if len(walked) != 1 or strides[min(walked)] == 1:
        return False
    for d in reversed(range(len(sizes))):  # the innermost kept dimension of more than one element
        if d not in walked and sizes[d] > 1:
            return strides[d] == 1
    return False
