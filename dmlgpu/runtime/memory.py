"""Pooled device memory: ranges sub-allocated from a few large buffers ("arenas").

Modelled on CuPy's `SingleDeviceMemoryPool` and PyTorch's caching allocator. A kp tensor costs
one or two `vkAllocateMemory` and every buffer a pipeline is bound to needs a pipeline of its
own, so memory comes from arenas of `arena_bytes` each, split into blocks: a free block is kept
in a bin of its size and merged with free neighbours, and allocations take the smallest free
block that fits (best fit). An allocation larger than half an arena gets a dedicated buffer,
kept for reuse after it is freed until `empty_cache()`. Where a new arena cannot be had (the
device's memory, or the process's address space, is short), the pool gives back what it keeps
and then asks for smaller arenas, down to `MIN_ARENA_BYTES` (or the block asked for), before it
raises `DeviceMemoryError`: after a large allocation failed, small ones still succeed.

Frees are stream-ordered: a block freed while queued or running work may still use it is
parked with the stream position after which it is free (`Stream.position`), and only returns
to the bins once the stream has completed that far. Memory that a dispatch on the same stream
writes first may take a parked block at once (`take_parked`): the stream's barriers order that
write after the block's earlier uses, as PyTorch's caching allocator reuses a block freed on
the stream that next writes it.
"""
from __future__ import annotations

import bisect
import ctypes
import ctypes.util
import itertools

from ..errors import DeviceMemoryError

#: Every block starts at a multiple of this: Vulkan's largest allowed
#: minStorageBufferOffsetAlignment, and a multiple of DirectML's 16-byte binding alignment.
ALIGNMENT = 256
#: Freed blocks of at most this size are kept unmerged for reuse at their size ...
QUICK_BYTES = 64 << 10
#: ... up to this many in all.
QUICK_BLOCKS = 64
#: The smallest arena the pool falls back to when a full one cannot be allocated.
MIN_ARENA_BYTES = 1 << 20
_IDS = itertools.count(1)


def _round(nbytes: int) -> int:
    return max(ALIGNMENT, -(-nbytes // ALIGNMENT) * ALIGNMENT)


class Arena:
    """One device buffer that blocks are carved from (or one dedicated allocation)."""

    __slots__ = ("memory", "id", "nbytes", "dedicated", "used", "__weakref__")

    def __init__(self, memory, dedicated: bool):
        self.memory = memory
        self.id = next(_IDS)
        self.nbytes = memory.nbytes
        self.dedicated = dedicated
        self.used = 0  # bytes in live or parked blocks


class Block:
    """A byte range [offset, offset + size) of an arena."""

    __slots__ = ("arena", "offset", "size", "free", "prev", "next")

    def __init__(self, arena, offset, size, prev=None, next=None):
        self.arena = arena
        self.offset = offset
        self.size = size
        self.free = False
        self.prev = prev
        self.next = next


class MemoryPool:
    """Blocks of one kind of memory (device-local, or host-mapped) of one device.

    Args:
        allocate_memory: nbytes -> memory object (with `.nbytes`, `.destroy()`).
        arena_bytes: the size of each shared arena.
        on_release: called with an arena before its memory is destroyed (drop pipelines).
    """

    def __init__(self, allocate_memory, arena_bytes: int, on_release=None):
        self._allocate_memory = allocate_memory
        self.arena_bytes = arena_bytes // ALIGNMENT * ALIGNMENT
        self._on_release = on_release
        self.arenas: list[Arena] = []
        self._sizes: list[int] = []  # sorted sizes that have free shared blocks
        self._bins: dict[int, list[Block]] = {}
        self._dedicated_free: list[Block] = []
        self._parked: list[tuple[int, Block]] = []  # (stream position, block)
        self._quick: dict[int, list[Block]] = {}  # size -> freed blocks kept unmerged
        self._quick_count = 0
        self.in_use = 0
        self.peak = 0
        # Frees that arrive while the pool is in the middle of its own work: the garbage
        # collector, run by an allocation in here, may finalize a Buffer of a reference cycle,
        # whose free would change the bins under the running operation (a neighbour's merge
        # looking for a block not yet binned: KeyError). Done after it; parking is one append.
        self._busy = False
        self._deferred: list = []

    def _done(self) -> None:
        """End of an operation: the frees deferred meanwhile, in order."""
        self._busy = False
        while self._deferred and not self._busy:
            block, position = self._deferred.pop(0)
            self.free(block, position)

    # -- allocation ------------------------------------------------------------------------
    def allocate(self, nbytes: int, grow: bool = True) -> Block | None:
        """A block of at least `nbytes`: a free one, else (if `grow`) from new memory.

        Returns None when nothing free fits and `grow` is False; raises DeviceMemoryError when
        the device has no memory left.
        """
        size = _round(nbytes)
        kept = self._quick.get(size)
        if kept:
            block = kept.pop()
            self._quick_count -= 1
        else:
            self._busy = True
            try:
                block = self._allocate_new(nbytes, size, grow)
            finally:
                self._done()
            if block is None:
                return None
        block.arena.used += block.size
        self.in_use += block.size
        self.peak = max(self.peak, self.in_use)
        return block

    def _allocate_new(self, nbytes: int, size: int, grow: bool) -> Block | None:
        if size > self.arena_bytes // 2:  # dedicated memory starts at 0: 16 bytes suffice,
            size = -(-nbytes // 16) * 16  # and rounding up to 256 could pass the device's limit
        block = self._take(size)
        if block is None and self._quick_count:
            self._merge_quick()  # the space may be in kept blocks
            block = self._take(size)
        if block is None:
            if not grow:
                return None
            block = self._grow(size)
        block.free = False
        return block

    def _take(self, size: int):
        if size > self.arena_bytes // 2:
            # the most recently freed first: a loop that drops each call's results and makes new
            # ones writes the same memory every call, whose pages the device has mapped
            for i in range(len(self._dedicated_free) - 1, -1, -1):
                if size <= self._dedicated_free[i].size <= size + size // 4:
                    return self._dedicated_free.pop(i)
            return None
        i = bisect.bisect_left(self._sizes, size)
        if i == len(self._sizes):
            return None
        found = self._sizes[i]
        block = self._unbin(found)
        if block.size - size >= ALIGNMENT:  # split off the rest as a free block
            rest = Block(block.arena, block.offset + size, block.size - size, block, block.next)
            if block.next is not None:
                block.next.prev = rest
            block.next = rest
            block.size = size
            self._bin(rest)
        return block

    def _grow(self, size: int) -> Block:
        dedicated = size > self.arena_bytes // 2
        nbytes = size if dedicated else self.arena_bytes
        try:
            memory = self._allocate_memory(nbytes)
        except DeviceMemoryError:
            self.release_unused()  # give back what is cached, then try once more
            memory = self._allocate_fallback(nbytes, size, dedicated)
        nbytes = memory.nbytes
        arena = Arena(memory, dedicated)
        self.arenas.append(arena)
        block = Block(arena, 0, nbytes)
        if not dedicated and nbytes > size:
            rest = Block(arena, size, nbytes - size, block)
            block.next, block.size = rest, size
            self._bin(rest)
        return block

    def _allocate_fallback(self, nbytes: int, size: int, dedicated: bool):
        """Memory of `nbytes`, else (a shared arena) of half as much, and so on down to
        MIN_ARENA_BYTES or `size`: the last DeviceMemoryError is raised."""
        floor = max(_round(size), MIN_ARENA_BYTES)
        tries = [nbytes]
        while not dedicated and tries[-1] > floor:
            tries.append(max(floor, tries[-1] // 2 // ALIGNMENT * ALIGNMENT))
        for i, n in enumerate(tries):
            try:
                return self._allocate_memory(n)
            except DeviceMemoryError:
                if i == len(tries) - 1:
                    raise

    def _bin(self, block: Block) -> None:
        block.free = True
        bucket = self._bins.get(block.size)
        if bucket is None:
            bucket = self._bins[block.size] = []
            bisect.insort(self._sizes, block.size)
        bucket.append(block)

    def _unbin(self, size: int, block: Block | None = None) -> Block:
        bucket = self._bins[size]
        if block is None:
            block = bucket.pop()
        else:
            bucket.remove(block)
        if not bucket:
            del self._bins[size]
            del self._sizes[bisect.bisect_left(self._sizes, size)]
        block.free = False
        return block

    # -- freeing ---------------------------------------------------------------------------
    def free(self, block: Block, position: int | None = None) -> None:
        """Return `block`; with a stream `position`, only once the stream has completed it."""
        if position is not None:
            self._parked.append((position, block))  # (one append: safe inside any operation)
            return
        if self._busy:
            self._deferred.append((block, position))
            return
        self._busy = True
        try:
            self._release(block)
        finally:
            self._done()

    def reclaim(self, completed: int) -> int:
        """Return parked blocks whose stream position is complete; returns the bytes freed."""
        if not self._parked or self._busy:
            return 0
        self._busy = True
        try:
            parked, self._parked = self._parked, []  # (blocks parked meanwhile land in the new list)
            keep, freed = [], 0
            for position, block in parked:
                if position <= completed:
                    freed += block.size
                    self._release(block)
                else:
                    keep.append((position, block))
            self._parked[:0] = keep
        finally:
            self._done()
        return freed

    def take_parked(self, nbytes: int) -> Block | None:
        """A parked block of `nbytes` (as `allocate` would round them), the most recently parked
        first, for memory whose first access is a device write queued on the stream that parked
        it: the stream orders that write after the block's queued uses (its barriers track
        reads and writes), so the block need not wait for the device. None if none fits."""
        parked = self._parked
        if not parked:
            return None
        size = -(-nbytes // ALIGNMENT) * ALIGNMENT or ALIGNMENT  # (`_round`, inline: a loop's every call)
        dedicated = size > self.arena_bytes // 2
        if dedicated:
            size = -(-nbytes // 16) * 16
        block = parked[-1][1]
        if block.size == size and not dedicated:  # a loop's: the block its last result parked
            del parked[-1]
            return block
        for i in range(len(parked) - 1, -1, -1):
            block = parked[i][1]
            if self.reusable(block, nbytes):
                del parked[i]
                return block  # still counted in use, as every parked block is
        return None

    def reusable(self, block: Block, nbytes: int) -> bool:
        """Whether `block` serves an allocation of `nbytes`, as `take_parked` would take it for
        them (the same rounding; a dedicated block up to a quarter larger)."""
        size = -(-nbytes // ALIGNMENT) * ALIGNMENT or ALIGNMENT
        if size > self.arena_bytes // 2:
            size = -(-nbytes // 16) * 16
            return block.arena.dedicated and size <= block.size <= size + size // 4
        return block.size == size and not block.arena.dedicated

    @property
    def parked_bytes(self) -> int:
        return sum(block.size for _, block in self._parked)

    def oldest_parked(self) -> int | None:
        return min((p for p, _ in self._parked), default=None)

    def _release(self, block: Block) -> None:
        arena = block.arena
        arena.used -= block.size
        self.in_use -= block.size
        if block.size <= QUICK_BYTES and not arena.dedicated:
            if self._quick_count >= QUICK_BLOCKS:
                self._merge_quick()
            self._quick.setdefault(block.size, []).append(block)  # stays marked in use: no
            self._quick_count += 1  # neighbour merges into it
            return
        self._merge(block)

    def _merge_quick(self) -> None:
        """Return every kept block to the bins, merged with its free neighbours."""
        kept, self._quick, self._quick_count = self._quick, {}, 0
        for blocks in kept.values():
            for block in blocks:
                self._merge(block)

    def _merge(self, block: Block) -> None:
        """Put a freed block (already subtracted from the counts) into the bins."""
        arena = block.arena
        if arena.dedicated:
            block.free = True
            self._dedicated_free.append(block)
            return
        prev, nxt = block.prev, block.next
        if prev is not None and prev.free:  # merge with the free block before
            self._unbin(prev.size, prev)
            prev.size += block.size
            prev.next = nxt
            if nxt is not None:
                nxt.prev = prev
            block = prev
        if nxt is not None and nxt.free:  # and the one after
            self._unbin(nxt.size, nxt)
            block.size += nxt.size
            block.next = nxt.next
            if nxt.next is not None:
                nxt.next.prev = block
        self._bin(block)

    def release_unused(self) -> int:
        """Destroy every arena with no live or parked block; returns the bytes given back."""
        if self._busy:
            return 0
        self._busy = True
        try:
            return self._release_unused()
        finally:
            self._done()

    def _release_unused(self) -> int:
        self._merge_quick()
        freed = 0
        for arena in [a for a in self.arenas if a.used == 0]:
            if arena.dedicated:
                self._dedicated_free = [b for b in self._dedicated_free if b.arena is not arena]
            else:
                whole = self._bins.get(arena.nbytes, [])
                block = next(b for b in whole if b.arena is arena)
                self._unbin(arena.nbytes, block)
            if self._on_release is not None:
                self._on_release(arena)
            arena.memory.destroy()
            self.arenas.remove(arena)
            freed += arena.nbytes
        return freed

    def destroy(self) -> None:
        for arena in self.arenas:
            arena.memory.destroy()
        self.arenas.clear()
        self._bins.clear()
        self._sizes.clear()
        self._dedicated_free.clear()
        self._parked.clear()
        self._quick.clear()
        self._quick_count = 0

    # -- reporting -------------------------------------------------------------------------
    def stats(self) -> dict:
        reserved = sum(a.nbytes for a in self.arenas)
        return {
            "in_use_bytes": self.in_use,
            "reserved_bytes": reserved,
            "peak_in_use_bytes": self.peak,
            "pending_free_bytes": self.parked_bytes,
            "arenas": sum(1 for a in self.arenas if not a.dedicated),
            "dedicated": sum(1 for a in self.arenas if a.dedicated),
            "arena_bytes": self.arena_bytes,
        }


def trim_host_heap() -> None:
    """Give the C heap's free pages back to the system (glibc's malloc_trim), where a driver
    that keeps device memory and pipelines in host memory (lavapipe) freed them; else nothing."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.malloc_trim(0)
    except (OSError, AttributeError):  # no glibc
        pass
