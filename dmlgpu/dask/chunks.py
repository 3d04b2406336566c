"""`dmlgpu.Tensor` as the chunks of a dask array (dask's chunk-type protocol, as CuPy uses it).

A Tensor-backed dask array keeps each block on the device of the worker that holds it: an
operation on the array runs on each block's device and gives Tensors, and nothing crosses to
the host until a task moves a block to another process (distributed serialises it: a download
there, an upload on arrival) or `to_host` asks. What dask needs of a chunk type, and where
dmlgpu gives it:

- `register_chunk_type(Tensor)`: dask arrays hand Tensor blocks to numpy's ufuncs and Python's
  operators instead of deferring to them (`Tensor.__array_ufunc__` runs the table's operators);
- `concatenate_lookup`: rechunking, `compute()` and reduction trees join blocks with
  `concatenate`, a device copy per block into one new Tensor;
- `sizeof`: a Tensor weighs its elements' bytes in the scheduler's memory accounting;
- `dask_serialize`/`dask_deserialize`: a Tensor travels as its bytes (one download where it
  leaves) and lands on the receiving process's default device (one upload);
- a zero-size Tensor as `meta` (`meta(dtype, ndim)`), made on the client's default device, as
  dask-cuda's client holds a zero-size CuPy array.

Workers must have imported `dmlgpu.dask` before a Tensor reaches them (the serialisation is
registered on import): `LocalVulkanCluster` and `python -m dmlgpu worker` preload it; a plain
`dask worker` needs `--preload dmlgpu.dask`.
"""
from __future__ import annotations

import functools

import dask.array as da
import numpy as np
from dask.array.chunk_types import register_chunk_type
from dask.array.dispatch import concatenate_lookup
from dask.sizeof import sizeof
from distributed.protocol import dask_deserialize, dask_serialize

from ..front.tensor import Tensor

__all__ = ["concatenate", "is_device_backed", "meta", "to_device", "to_host"]

#: Zero-size metas kept per (dtype, ndim): a dask array of each kind holds one.
META_CACHE_SIZE = 64

register_chunk_type(Tensor)


@concatenate_lookup.register(Tensor)
def concatenate(blocks, axis: int = 0) -> Tensor:
    """One new Tensor holding `blocks` joined along `axis`, each copied on the device (numpy
    blocks among them are uploaded; Tensors of another device come through the host)."""
    blocks = list(blocks)
    first = next(b for b in blocks if isinstance(b, Tensor))
    device = first.device
    blocks = [b.to(device) if isinstance(b, Tensor) else Tensor.from_numpy(np.asarray(b), device) for b in blocks]
    axis = axis % first.ndim
    shape = list(first.shape)
    shape[axis] = sum(b.shape[axis] for b in blocks)
    out = Tensor.empty(tuple(shape), first.dtype, device)
    start = 0
    for block in blocks:
        size = block.shape[axis]
        if size:
            out[(slice(None),) * axis + (slice(start, start + size),)] = block
        start += size
    return out


@sizeof.register(Tensor)
def _sizeof_tensor(t: Tensor) -> int:
    return t.nbytes


@dask_serialize.register(Tensor)
def _serialize(t: Tensor):
    data = t.numpy()  # one download
    return {"shape": data.shape, "dtype": data.dtype.str}, [memoryview(data.reshape(-1).view(np.uint8))]


@dask_deserialize.register(Tensor)
def _deserialize(header: dict, frames) -> Tensor:
    dtype, shape = np.dtype(header["dtype"]), tuple(header["shape"])
    data = np.frombuffer(frames[0], np.uint8) if len(frames) == 1 else np.frombuffer(b"".join(frames), np.uint8)
    return Tensor.from_numpy(data.view(dtype).reshape(shape))  # one upload, to this process's device


@functools.lru_cache(maxsize=META_CACHE_SIZE)
def _meta(dtype: str, ndim: int) -> Tensor:
    return Tensor.empty((0,) * ndim, np.dtype(dtype))


def meta(dtype, ndim: int) -> Tensor:
    """A zero-size Tensor of `dtype` and `ndim` dimensions on this process's default device:
    the `meta` of a Tensor-backed dask array."""
    return _meta(np.dtype(dtype).str, int(ndim))


def is_device_backed(x) -> bool:
    """Whether `x` is a dask array whose blocks are Tensors (its meta is one)."""
    return isinstance(x, da.Array) and isinstance(x._meta, Tensor)


def _upload(block) -> Tensor:
    return block if isinstance(block, Tensor) else Tensor.from_numpy(block)


def _download(block) -> np.ndarray:
    return block.numpy() if isinstance(block, Tensor) else np.asarray(block)


def to_device(x) -> da.Array:
    """The dask array `x` with each block uploaded to the device of the worker computing it.

    Blocks made on the workers (`random_bits`, `from_zarr`, `map_blocks`) are uploaded right
    where they are made: dask fuses the upload into the task that makes the block, so only
    the Tensor is kept. A Tensor-backed array is returned as it is.

    Args:
        x: a dask array of numpy blocks (or anything `dask.array.asarray` takes).

    Returns:
        A lazy dask array of `dmlgpu.Tensor` blocks, same shape, chunks and dtype.
    """
    x = x if isinstance(x, da.Array) else da.asarray(x)
    if is_device_backed(x):
        return x
    return x.map_blocks(_upload, dtype=x.dtype, meta=meta(x.dtype, x.ndim), name=f"to-device-{x.name}")


def to_host(x) -> da.Array:
    """The dask array `x` with each Tensor block downloaded to a numpy array where it lies
    (`to_host(x).compute()` gives numpy). A numpy-backed array is returned as it is."""
    if not is_device_backed(x):
        return x
    return x.map_blocks(_download, dtype=x.dtype, meta=np.empty((0,) * x.ndim, x.dtype), name=f"to-host-{x.name}")
