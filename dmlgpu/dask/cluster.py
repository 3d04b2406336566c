"""Workers and their devices: one Dask worker process per Vulkan device.

`LocalVulkanCluster` starts one worker process per Vulkan device, each pinned to its device by
`DMLGPU_DEVICE` in its environment (as dask-cuda's `LocalCUDACluster` pins CUDA devices with
`CUDA_VISIBLE_DEVICES`). On other hosts, `python -m dmlgpu worker SCHEDULER` (or `dask worker
SCHEDULER --nworkers N --preload-nanny dmlgpu.dask --preload dmlgpu.dask`) pins the k-th worker
process of the command to device k, or to the k-th entry of `DMLGPU_DEVICES=1,3`. Both preload
`dmlgpu.dask` in the workers, which registers the Tensor chunk type (its serialisation above
all) before any Tensor arrives.
"""
from __future__ import annotations

import copy
import logging
import os
import socket
import weakref

from distributed import LocalCluster, Nanny
from distributed.cli import dask_worker
from distributed.worker_memory import parse_memory_limit

from ..api.device import default_device
from ..errors import DeviceError
from ..runtime import physical_device_count

__all__ = ["DEVICES_VARIABLE", "DEVICE_VARIABLE", "LocalVulkanCluster", "dask_setup", "dask_teardown",
           "worker_device", "worker_main"]

#: The variable dmlgpu reads for its default device; each worker process gets its own.
DEVICE_VARIABLE = "DMLGPU_DEVICE"
#: Devices for the workers of one `dask worker --preload-nanny dmlgpu.dask` command: "0,2".
DEVICES_VARIABLE = "DMLGPU_DEVICES"
#: The module workers preload (its import registers the chunk type) and whose hooks pin devices.
PRELOAD = "dmlgpu.dask"

logger = logging.getLogger("dmlgpu.dask")

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
        preload = [PRELOAD, *(p for p in kwargs.pop("preload", None) or () if p != PRELOAD)]
        super().__init__(n_workers=0, threads_per_worker=threads_per_worker, processes=True,
                         memory_limit=memory_limit, preload=preload, **kwargs)
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
        try:
            info = worker_device()
        except DeviceError as error:  # reported again by the first task that asks for the device
            logger.warning("dmlgpu: %s has no Vulkan device: %s", server.address, error)
            return
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
    each pinned to its device by the `dmlgpu.dask` nanny preload and preloading `dmlgpu.dask`.
    `--nworkers`/`--nthreads` given in `argv` win."""
    listed = os.environ.get(DEVICES_VARIABLE)
    count = len([d for d in listed.split(",") if d.strip()]) if listed else physical_device_count()
    args = list(argv)
    for flag, value in (("--nworkers", count), ("--nthreads", 1)):
        if not any(a == flag or a.startswith(flag + "=") for a in args):
            args += [flag, str(value)]
    return dask_worker.main.main(args=args + ["--preload-nanny", PRELOAD, "--preload", PRELOAD],
                                 prog_name="python -m dmlgpu worker")


