"""What kp patch 0009 adds, through the runtime's one Kompute module: storage memory that can be
filled and copied, region copies, asynchronous submits with a fence poll, global barriers."""
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
