"""dmlgpu over Dask: dask arrays whose blocks live on the workers' devices, the table's operators
and reductions over them, a sharded search index, and one worker process per Vulkan device.

- Tensor-backed arrays (`dmlgpu.dask.chunks`): `to_device(x)` makes each block a
  `dmlgpu.Tensor` on the device of the worker computing it (blocks made on the workers go
  straight there); Python's operators (`~ ^ & | << >>`), numpy's matching ufuncs, broadcasting,
  slicing, `rechunk`, `concatenate` and `persist()` keep them there; `compute()` gives a Tensor
  on the client's default device, `to_host(x).compute()` a numpy array.
- The table's element-wise operators (`dmlgpu.dask.operators`): `bit_xor(a, b)`,
  `bit_count(x, dtype=np.uint32)`, ... over numpy- or Tensor-backed arrays, checked on the client
  with the front end's messages.
- `sum`, `min`, `max`, `argmin`, `argmax`, `top_k` (`dmlgpu.dask.reductions`): dask's reduction
  tree with dmlgpu's reduce and top-k in every task.
- `HammingIndex(database)` (`dmlgpu.dask.sharded_index`): one resident index per block on the
  worker holding it; a search is one message to each worker, which searches its shards at once;
  `hamming_knn` the one-call form.
- Workers (`dmlgpu.dask.cluster`): `LocalVulkanCluster`, `python -m dmlgpu worker SCHEDULER`,
  and the `dask_setup` preload hook that pins each worker process to its device.
"""
from __future__ import annotations

try:
    import dask.array  # noqa: F401
    import distributed  # noqa: F401
except ImportError as missing:  # the [dask] extra is not installed
    raise ModuleNotFoundError(f"dmlgpu.dask needs dask[array] and distributed ({missing.name} is missing): "
                              "pip install 'dask[array]' distributed, or dmlgpu's wheel with its extra: "
                              "pip install 'dmlgpu-<version>-<tags>.whl[dask]'",
                              name=missing.name) from missing

from .chunks import is_device_backed, to_device, to_host
from .cluster import (DEVICE_VARIABLE, DEVICES_VARIABLE, LocalVulkanCluster, dask_setup, dask_teardown,
                      worker_device, worker_main)
from .hamming import hamming_knn
from .operators import FUNCTIONS, map_blocks_resident, random_bits
from .reductions import argmax, argmin, max, min, sum, top_k  # noqa: A004 -- numpy's names
from .sharded_index import HammingIndex

globals().update(FUNCTIONS)

__all__ = ["DEVICE_VARIABLE", "DEVICES_VARIABLE", "FUNCTIONS", "HammingIndex", "LocalVulkanCluster", "argmax",
           "argmin", "dask_setup", "dask_teardown", "hamming_knn", "is_device_backed", "map_blocks_resident",
           "max", "min", "random_bits", "sum", "to_device", "to_host", "top_k", "worker_device", "worker_main",
           *FUNCTIONS]
