"""What kp patches 0009, 0010 and 0011 add, through the runtime's one Kompute module: storage memory that can be
filled and copied, region copies, asynchronous submits with a fence poll, global barriers, one
pipeline cache, waits in slices."""
import time

import numpy as np

import dmlgpu
from dmlgpu.runtime import vulkan


def test_fill_copy_and_poll():
    context = vulkan.Context(dmlgpu.default_device().index)
    storage = context.memory(4096, mapped=False)  # device-local, no staging
    host = context.memory(4096, mapped=True)
    host.view[:] = 0xEE
    commands = context.commands()
    commands.fill(storage.handle, 0, 4096, 0x01020304)
    commands.barrier()
    commands.copy(storage.handle, host.handle, 256, 1024, 512)  # a region, at other offsets
    commands.host_barrier()
    commands.submit()  # returns at once (0.9.0's eval_async() waited)
    commands.wait()
    assert commands.done() is False  # nothing running any more
    words = host.view.view(np.uint32)
    assert (words[256:384] == 0x01020304).all()
    assert (host.view[:1024] == 0xEE).all() and (host.view[1536:] == 0xEE).all()
    commands.reset()
    for thing in (commands, storage, host):
        thing.destroy()
    context.destroy()


def test_one_pipeline_cache_seeded_and_read_back():
    """Patch 0010: the Manager's pipelines share one VkPipelineCache, created from the data
    given, read back with a VkPipelineCacheHeaderVersionOne of this device; only one seed."""
    import pytest
    from dmlgpu import DeviceError
    from dmlgpu.kernels import variants as kernels, spirv
    from dmlgpu.runtime.pipeline_cache import vulkan_header

    device = dmlgpu.default_device()
    context = vulkan.Context(device.index)
    uuid = context.pipeline_cache_uuid()
    assert len(uuid) == 16
    context.seed_pipeline_cache(b"not pipeline cache data")  # the driver ignores what it cannot use
    memory = context.memory(4096, mapped=True)
    name = next(v.name for v in kernels.all_variants() if v.name.startswith("bit_not-flat"))
    pipeline = context.pipeline(spirv.load(name), (1, 1, 1), np.zeros(1, np.uint32), 8, [memory, memory])
    data = context.pipeline_cache_data()
    version, vendor, device_id, found = vulkan_header(data)
    assert (version, vendor, device_id, found) == (1, device.properties["vendor_id"],
                                                   device.properties["device_id"], uuid)
    with pytest.raises(DeviceError, match="pipeline cache"):
        context.seed_pipeline_cache(data)  # pipelines were made through the first one
    pipeline.destroy()
    memory.destroy()
    context.destroy()


def test_a_timed_wait_leaves_the_work_running():
    """Patch 0011: `wait_for(ns)` that times out leaves the submission running (kp cleared its
    flag, so its fence was never waited for again and it could be submitted while running): the
    fence poll still sees it end, and a later wait finishes it."""
    context = vulkan.Context(dmlgpu.default_device().index)
    nbytes = 64 << 20
    storage = context.memory(nbytes, mapped=False)
    commands = context.commands()
    for value in range(64):  # long enough on any device for a 1 us wait to time out
        commands.fill(storage.handle, 0, nbytes, value)
        commands.barrier()
    commands.host_barrier()
    commands.submit()
    assert commands.wait_for(1000) is False  # 1 us
    deadline = time.monotonic() + 120
    while not commands.done():  # running still, so its fence is polled
        assert time.monotonic() < deadline
        time.sleep(0.001)
    assert commands.wait_for(1000) is True
    commands.reset()
    commands.submit()  # submitted again only after it was waited for
    commands.wait()
    commands.destroy()
    storage.destroy()
    context.destroy()
