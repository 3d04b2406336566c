"""The front end's memos are bounded least-recently-used tables, settable, and never change a
result: calls beyond the bound, with the memos off, and after a clear stay bit-exact."""
import gc

import numpy as np
import pytest

import dmlgpu
from dmlgpu import testing
from dmlgpu.layout import memo


@pytest.fixture
def restore_sizes():
    before = memo.sizes()
    yield
    memo.set_sizes(**before)


def test_lru_evicts_the_least_recently_used():
    table = memo.LRU(2)
    table["a"], table["b"] = 1, 2
    assert table.get("a") == 1  # "a" is now the most recent
    table["c"] = 3
    assert (table.get("b"), table.get("a"), table.get("c"), len(table)) == (None, 1, 3, 2)
    table.resize(1)
    assert (len(table), table.get("c")) == (1, 3)
    table.resize(0)
    table["d"] = 4
    assert len(table) == 0


def test_sizes_are_documented_defaults_and_settable(restore_sizes):
    assert memo.sizes() == {name: memo.DEFAULT_SIZE for name in
                            ("host_plans", "host_parts", "tensor_plans", "tensor_scalars", "tensor_spans")}
    memo.set_sizes(8, tensor_plans=3)
    assert memo.sizes() == {"host_plans": 8, "host_parts": 8, "tensor_plans": 3, "tensor_scalars": 8,
                            "tensor_spans": 8}
    with pytest.raises(ValueError, match="unknown memos"):
        memo.set_sizes(plans=3)
    for bad in (-1, 1.5, True, "3"):
        with pytest.raises(ValueError, match="non-negative int"):
            memo.set_sizes(bad)


@pytest.mark.parametrize("size", [0, 3])
def test_calls_beyond_the_bound_stay_right(restore_sizes, rng, size):
    memo.clear()
    memo.set_sizes(size)
    for round_ in range(2):
        for n in range(1, 9):  # 8 kinds of call, each twice: more kinds than the bound
            x = rng.integers(0, 255, size=(n, 5), dtype=np.uint8)
            y = rng.integers(0, 255, size=(n, 5), dtype=np.uint8)
            out = np.full((n, 5), 0xA5, np.uint8)
            assert testing.same_bits(dmlgpu.bit_xor(x, y), x ^ y)
            assert dmlgpu.bit_xor(x, y, out=out) is out and testing.same_bits(out, x ^ y)
            t = dmlgpu.Tensor.from_numpy(x)
            u = dmlgpu.Tensor.from_numpy(y)
            v = t ^ u
            dmlgpu.bit_xor(t, u, out=v)
            assert testing.same_bits(v.numpy(), x ^ y)
            assert max(len(memo.HOST_PLANS), len(memo.HOST_PARTS), len(memo.TENSOR_PLANS)) <= size
    assert bool(len(memo.HOST_PLANS)) == bool(size)  # the memo serves within its bound
    memo.clear()
    assert len(memo.HOST_PLANS) == len(memo.TENSOR_PLANS) == 0


def test_tensor_calls_with_python_scalars_are_memoised_and_stay_right(device, rng, restore_sizes):
    """A Tensor call with a Python scalar operand (`t & 15`, `bit_and(t, 15, out=o)`) repeats
    from the memo (the scalar's buffer kept in TENSOR_SCALARS): no new plan, every result right,
    on either side, for each value (0.0 and -0.0, True and 1 are other operands), and still
    right once the scalar's buffer was evicted (the call is planned again)."""
    memo.clear()
    x = rng.integers(0, 256, 100, dtype=np.uint8)
    t = dmlgpu.Tensor.from_numpy(x)
    out = dmlgpu.Tensor.empty((100,), np.uint8)
    calls = []
    create = device.create_operator
    device.create_operator = lambda *a, **k: calls.append(1) or create(*a, **k)
    try:
        for _ in range(3):
            assert testing.same_bits((t & 15).numpy(), x & 15)
            assert testing.same_bits((15 & t).numpy(), x & 15)
            assert dmlgpu.bit_and(t, 15, out=out) is out and testing.same_bits(out.numpy(), x & 15)
            assert testing.same_bits((t ^ 7).numpy(), x ^ 7)
        assert len(calls) == 4, "a repeated call with a Python scalar was planned again"
        assert len(memo.TENSOR_SCALARS) == 2  # 15 and 7 as uint8
        f = dmlgpu.Tensor.from_numpy(np.ones(8, np.float32))
        zero, minus = (f ^ 0.0).numpy().view(np.uint32), (f ^ -0.0).numpy().view(np.uint32)
        assert testing.same_bits(zero, np.ones(8, np.float32).view(np.uint32))
        assert testing.same_bits(minus, np.ones(8, np.float32).view(np.uint32) | np.uint32(1 << 31))
        b = dmlgpu.Tensor.from_numpy(np.arange(8, dtype=np.uint8))
        assert testing.same_bits((b ^ 1).numpy(), np.arange(8, dtype=np.uint8) ^ 1)
        assert testing.same_bits((b ^ True).numpy(), np.arange(8, dtype=np.uint8) ^ 1)
        memo.set_sizes(tensor_scalars=0)  # the kept buffers go: the remembered calls no longer hold
        gc.collect()
        for _ in range(2):
            assert testing.same_bits((t & 15).numpy(), x & 15)
            assert dmlgpu.bit_and(t, 15, out=out) is out and testing.same_bits(out.numpy(), x & 15)
    finally:
        device.create_operator = create


def test_stats_count_entries_and_misses(restore_sizes):
    memo.clear()
    x = np.arange(10, dtype=np.uint8)
    for _ in range(3):
        dmlgpu.bit_not(x)
    stats = memo.stats()
    assert set(stats) == set(memo.sizes())
    assert stats["host_plans"] == {"entries": 1, "bound": memo.DEFAULT_SIZE, "misses": 1}
    memo.clear()
    assert memo.stats()["host_plans"] == {"entries": 0, "bound": memo.DEFAULT_SIZE, "misses": 0}
