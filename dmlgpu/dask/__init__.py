"""dmlgpu over Dask: the operators on `dask.array` arrays, and one worker process per Vulkan device.

Every operator of the table (`dmlgpu.table.operators.OPERATORS`) has a function here with the numpy
front end's name and keywords (`bit_xor(a, b)`, `bit_count(x, dtype=np.uint32)`, ...); each block
is run by the numpy front end on the device of the worker that holds it. Arrays broadcast as
`dask.array` broadcasts them. Operands follow the front end's rules, by the same code
(`dmlgpu.layout.operands.convert`: any byte order, Python scalars by NEP 50). Data types, shapes and the
feature level are checked on the client before the graph is built, with the front end's
`ValidationError` messages; errors raised on a worker reach the client with their type and message.

Devices: `LocalVulkanCluster` starts one worker process per Vulkan device, each pinned to its
device by `DMLGPU_DEVICE` in its environment (as dask-cuda's `LocalCUDACluster` pins CUDA devices
with `CUDA_VISIBLE_DEVICES`). On other hosts, `dask worker SCHEDULER --nworkers N
--preload-nanny dmlgpu.dask` (or `python -m dmlgpu worker SCHEDULER`) pins the k-th worker
process of the command to device k, or to the k-th entry of `DMLGPU_DEVICES=1,3`.
"""
from __future__ import annotations

import copy
import functools
import inspect
import logging
import os
import socket
import weakref

import numpy as np

try:
    import dask.array as da
    from dask.base import tokenize
    from distributed import LocalCluster, Nanny
    from distributed.cli import dask_worker
    from distributed.worker_memory import parse_memory_limit
except ImportError as missing:  # the [dask] extra is not installed
    raise ModuleNotFoundError(f"dmlgpu.dask needs dask[array] and distributed ({missing.name} is missing): "
                              "pip install 'dask[array]' distributed, or dmlgpu's wheel with its extra: "
                              "pip install 'dmlgpu-<version>-<tags>.whl[dask]'",
                              name=missing.name) from missing

from ..front import numpy_api
from ..front.call_plan import output_type
from .hamming import hamming_knn  # noqa: F401  (exact binary-code k-NN over row blocks)
from ..describe.operator_descs import DESC_CLASSES
from ..api.device import default_device
from ..errors import ValidationError
from ..layout.operands import convert, data_type
from ..table.operators import OPERATORS, Operator
from ..front.tensor import Tensor
from ..describe.tensor_desc import TensorDesc
from ..describe.validation import resolve_feature_level, support_row, validate
from ..runtime import physical_device_count

#: The variable dmlgpu reads for its default device; each worker process gets its own.
DEVICE_VARIABLE = "DMLGPU_DEVICE"
#: Devices for the workers of one `dask worker --preload-nanny dmlgpu.dask` command: "0,2".
DEVICES_VARIABLE = "DMLGPU_DEVICES"

logger = logging.getLogger(__name__)

#: What the operators take as operands, as their messages name them.
_TAKES = "dask.array.Array, numpy.ndarray, a numpy scalar or a Python scalar"
_ANCHORS = "numpy.ndarray or dask.array.Array"


# --- The operators over dask arrays -------------------------------------------------------------

def _run_block(short: str, options: dict, *blocks):
    """One block on this process's device, through the numpy front end."""
    return np.asarray(getattr(numpy_api, short)(*blocks, **options))


def _blockwise(func, arrays, dtype, token: str):
    """`func` over the blocks of `arrays` broadcast together (numpy scalars passed as they are)."""
    ndim = max((np.ndim(a) for a in arrays if not isinstance(a, np.generic)), default=0)
    args = []
    for a in arrays:
        if isinstance(a, np.generic):
            args += [a, None]
        else:
            a = a if isinstance(a, da.Array) else da.asarray(a)
            args += [a, tuple(range(ndim - a.ndim, ndim))]
    return da.blockwise(func, tuple(range(ndim)), *args, token=token, dtype=dtype,
                        meta=np.empty((0,) * ndim, dtype))


def _check(op: Operator, arrays, options: dict) -> tuple[list, np.dtype]:
    """What can be checked without a device, before any graph exists; returns the operands
    (Python scalars as numpy scalars of the other operand's type) and the output dtype.

    The operands follow the front end's rules (`dmlgpu.layout.operands.convert`: any byte order,
    Python scalars by NEP 50); the data types and the feature level go through
    `dmlgpu.validate` on one-element descriptors, so the messages are those a worker's front
    end would give.
    """
    level = resolve_feature_level(options.get("feature_level"), op.dml_name)
    row = support_row(op, level)
    arrays = convert(arrays, op.dml_name, op.inputs, row.input_types, (da.Array,), _TAKES, _ANCHORS)
    arrays = [x[()] if isinstance(x, np.ndarray) and x.ndim == 0 else x for x in arrays]
    types = [data_type(x.dtype, op.dml_name, name, row.input_types) for name, x in zip(op.inputs, arrays)]
    out_type = output_type(op, row, None, options.get("dtype"), types)
    shapes = [tuple(np.shape(x)) for x in arrays]
    if all(isinstance(n, int) for shape in shapes for n in shape):  # unknown chunks: nan sizes
        try:
            np.broadcast_shapes(*shapes)
        except ValueError:
            raise ValidationError(op.dml_name, op.inputs[1], "shape", shapes[1],
                                  f"must broadcast with {op.inputs[0]}'s shape {shapes[0]}") from None
    probe = (1,) * row.dims[0]
    validate(DESC_CLASSES[op.name](*(TensorDesc(t, probe) for t in types + [out_type])), level)
    return arrays, out_type.numpy


def _make_operator(op: Operator):
    front = getattr(numpy_api, op.short)
    defaults = {name: p.default for name, p in inspect.signature(front).parameters.items()
                if p.kind is p.KEYWORD_ONLY}
    names = ", ".join(op.inputs)

    def operator(*arrays, **options):
        if len(arrays) != len(op.inputs):
            raise TypeError(f"{op.short}() takes {len(op.inputs)} arrays ({names}), got {len(arrays)}")
        unknown = sorted(set(options) - set(defaults))
        if unknown:
            raise TypeError(f"{op.short}() got unexpected keyword arguments {unknown}; "
                            f"allowed: {sorted(defaults)}")
        arrays, dtype = _check(op, arrays, {**defaults, **options})
        return _blockwise(functools.partial(_run_block, op.short, options), arrays, dtype, op.short)

    operator.__name__ = operator.__qualname__ = op.short
    operator.__module__ = __name__
    keywords = ", ".join(f"{k}={v.__name__ if isinstance(v, type) else v!r}" for k, v in defaults.items())
    summary = (inspect.getdoc(front) or "").split("\n")[0]
    operator.__doc__ = (
        f"{summary}\n\n`dmlgpu.{op.short}` over dask arrays, each block on its worker's device "
        f"({op.dml_name}).\n\n"
        f"Args:\n    {names}: dask arrays, numpy arrays, numpy or Python scalars (NEP 50); shapes broadcast.\n"
        f"    {keywords}: as `dmlgpu.{op.short}`.\n\n"
        f"Returns:\n    A lazy dask array.\n\n"
        f"Raises:\n    ValidationError: at the call for data types, shapes and levels the front end "
        f"rejects; at compute time for what only a block shows.")
    return operator


#: Short operator name -> its function over dask arrays, for every row of the table.
FUNCTIONS = {op.short: _make_operator(op) for op in OPERATORS}
globals().update(FUNCTIONS)


# --- Several operations per block, on the device ------------------------------------------------

def _run_resident(fn, dtype: np.dtype, options: dict, *blocks):
    tensors = [Tensor.from_numpy(b) for b in blocks]  # one upload per input block
    result = fn(*tensors, **options)
    array = result.numpy() if isinstance(result, Tensor) else np.asarray(result)  # one download
    shape = np.broadcast_shapes(*(np.shape(b) for b in blocks))
    if array.shape != shape or array.dtype != dtype:
        raise ValueError(f"map_blocks_resident: {getattr(fn, '__name__', fn)} returned "
                         f"{array.shape} {array.dtype} for blocks broadcasting to {shape}; "
                         f"expected {shape} {dtype}")
    return array


def map_blocks_resident(fn, *arrays, dtype, **options):
    """Run `fn` over device-resident Tensors, block by block: one upload and one download each.

    Each block of `arrays` (broadcast together as `dask.array` does) is uploaded with
    `dmlgpu.Tensor.from_numpy`; `fn(*tensors, **options)` chains Tensor operations on the
    device (`lambda t, u: dmlgpu.bit_count(~t ^ u)`) and returns a Tensor of the blocks'
    broadcast shape, downloaded once.

    Args:
        fn: function of Tensors to a Tensor (picklable; lambdas are fine with distributed).
        arrays: dask arrays, numpy arrays or numpy scalars.
        dtype: the result's dtype (required: it cannot be known without running `fn`).

    Returns:
        A lazy dask array.

    Raises:
        ValueError: at compute time, when `fn` returns another shape or dtype.
    """
    dtype = np.dtype(dtype)
    token = "resident-" + getattr(fn, "__name__", "fn").strip("<>")
    return _blockwise(functools.partial(_run_resident, fn, dtype, options), arrays, dtype, token)


def _random_block(dtype: np.dtype, seed: int, block_info=None):
    shape, index = block_info[None]["chunk-shape"], block_info[None]["chunk-location"]
    rng = np.random.default_rng((seed, *index))
    count = int(np.prod(shape, dtype=np.int64))
    return np.frombuffer(rng.bytes(count * dtype.itemsize), dtype).reshape(shape)


def random_bits(shape, dtype, chunks="auto", seed: int = 0):
    """Random raw bits of `dtype` (every encoding, NaNs and denormals included), made on the
    workers block by block, so that no data crosses from the client. Blocks are read-only."""
    dtype = np.dtype(dtype)
    chunks = da.core.normalize_chunks(chunks, tuple(shape), dtype=dtype)
    return da.map_blocks(functools.partial(_random_block, dtype, seed), chunks=chunks, dtype=dtype,
                         meta=np.empty((0,) * len(chunks), dtype),
                         name=f"random-bits-{dtype.name}-{seed}-{tokenize(chunks)}")


# --- Workers and their devices ------------------------------------------------------------------

def worker_device() -> dict:
    """The Vulkan device this process computes on: `client.run(dmlgpu.dask.worker_device)`."""
    device = default_device()
    return {"host": socket.gethostname(), "pid": os.getpid(),
            DEVICE_VARIABLE: os.environ.get(DEVICE_VARIABLE),
            "index": device.index, "name": device.name, "type": device.type}


def _device_list(devices, n_workers) -> list[int]:
    if devices is not None:
        devices = [int(d) for d in devices]
        if not devices or (n_workers is not None and n_workers != len(devices)):
            raise ValueError(f"devices={devices} and n_workers={n_workers}: give one worker per listed device")
        return devices
    count = physical_device_count()
    return [k % count for k in range(count if n_workers is None else n_workers)]


class LocalVulkanCluster(LocalCluster):
    """A Dask cluster on this host with one worker process per Vulkan device.

    Each worker's environment has `DMLGPU_DEVICE` set to its device, so every dmlgpu call on
    that worker runs there (dask-cuda's `LocalCUDACluster` pins CUDA devices the same way).
    Worker names are 0, 1, ...; a restarted worker keeps its device.

    Args:
        devices: Vulkan device indices, one worker each; an index listed twice starts two
            workers on that device. None: every device, or `n_workers` workers taking the
            devices in turn (`n_workers=2` on a host with one device: two workers on it).
        n_workers: number of workers when `devices` is None.
        threads_per_worker: task threads per worker (one keeps one block at a time per device).
        memory_limit: host memory per worker; "auto" shares the host's among the workers.
        **kwargs: `distributed.LocalCluster`'s (dashboard_address, host, ...). Always processes.

    Raises:
        ValueError: `processes=False`, or `devices` and `n_workers` that disagree.
        DeviceError: `devices` is None and there is no Vulkan device.
    """

    def __init__(self, devices=None, n_workers=None, threads_per_worker=1, memory_limit="auto", **kwargs):
        if not kwargs.pop("processes", True):
            raise ValueError("LocalVulkanCluster needs worker processes: a device is chosen per process")
        self.devices = _device_list(devices, n_workers)
        memory_limit = parse_memory_limit(memory_limit, 1, len(self.devices), logger=logger)
        super().__init__(n_workers=0, threads_per_worker=threads_per_worker, processes=True,
                         memory_limit=memory_limit, **kwargs)
        self.scale(len(self.devices))
        self.sync(self._correct_state)

    def new_worker_spec(self):
        free = [slot for slot in range(len(self.devices)) if slot not in self.worker_spec]
        if not free:
            raise ValueError(f"LocalVulkanCluster has {len(self.devices)} devices for workers "
                             f"({self.devices}); it cannot scale beyond them")
        spec = copy.deepcopy(self.new_spec)
        options = spec["options"]
        options["env"] = {**(options.get("env") or {}), DEVICE_VARIABLE: str(self.devices[free[0]])}
        return {free[0]: spec}


#: Nannies of this process (one `dask worker --nworkers N` command) -> their slot 0..N-1.
_SLOTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def dask_setup(server):
    """Preload hook. As `--preload-nanny dmlgpu.dask`: pins the worker process of the k-th
    nanny of the command to device k, or to the k-th entry of `DMLGPU_DEVICES` ("1,3"); a
    nanny whose environment already names a device (LocalVulkanCluster's) is left alone. As
    `--preload dmlgpu.dask` on a worker: logs the device that worker will use."""
    if not isinstance(server, Nanny):
        info = worker_device()
        logger.info("dmlgpu: %s on Vulkan device %d (%s)", server.address, info["index"], info["name"])
        return
    if DEVICE_VARIABLE in server.env:
        return
    slot = min(set(range(len(_SLOTS) + 1)) - set(_SLOTS.values()))
    listed = os.environ.get(DEVICES_VARIABLE)
    if listed:
        devices = [d.strip() for d in listed.split(",") if d.strip()]
        if slot >= len(devices):
            raise ValueError(f"{DEVICES_VARIABLE}={listed!r} lists {len(devices)} devices; this "
                             f"command starts more workers (--nworkers)")
        device = devices[slot]
    else:
        device = str(slot)
    _SLOTS[server] = slot
    server.env[DEVICE_VARIABLE] = device
    logger.info("dmlgpu: nanny %s pins its worker to Vulkan device %s", server.address, device)


def dask_teardown(server):
    _SLOTS.pop(server, None)


def worker_main(argv) -> int:
    """`python -m dmlgpu worker SCHEDULER [dask worker options]`: `dask worker` with one worker
    process per Vulkan device of this host (or per entry of DMLGPU_DEVICES), one thread each,
    each pinned to its device by the `dmlgpu.dask` nanny preload. `--nworkers`/`--nthreads`
    given in `argv` win."""
    listed = os.environ.get(DEVICES_VARIABLE)
    count = len([d for d in listed.split(",") if d.strip()]) if listed else physical_device_count()
    args = list(argv)
    for flag, value in (("--nworkers", count), ("--nthreads", 1)):
        if not any(a == flag or a.startswith(flag + "=") for a in args):
            args += [flag, str(value)]
    return dask_worker.main.main(args=args + ["--preload-nanny", __name__],
                                 prog_name="python -m dmlgpu worker")


__all__ = ["DEVICE_VARIABLE", "DEVICES_VARIABLE", "FUNCTIONS", "LocalVulkanCluster", "dask_setup",
           "map_blocks_resident", "random_bits", "worker_device", "worker_main", *FUNCTIONS]
