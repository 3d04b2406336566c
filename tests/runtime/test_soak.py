"""Soak and chaos: random operations from several threads, Ctrl-C at random moments in the main
thread, and a non-default device closed (and another opened, with or without staging) at random
while threads use it. The operations: the numpy front end on host data (kept host calls,
pipelined transfers, out=), Tensor expressions, buffers, strided views, reductions and top_k on
numpy data and Tensors, Hamming searches (an index and hamming_knn), fused functions. The main
thread's SIGINT handler is now and then put back to Python's default, as a notebook kernel does.
Afterwards every result that completed is bit-exact, the pool's accounting is consistent and
(under DMLGPU_VALIDATION=1) the validation layer said nothing.

It runs in a fresh interpreter with a timeout. DMLGPU_SOAK_SCALE=10 (a nightly profile) runs it
ten times longer; the default runs ~8 s of chaos, and up to five times that until the counts it
asserts are reached (CI runs it beside other tests, and again under the validation layer).
"""
import os

from test_faults import ok, run

SCALE = float(os.environ.get("DMLGPU_SOAK_SCALE", "1"))
SECONDS = 8 * SCALE

SOAK = """
import _thread, copy, gc, os, random, signal, threading, time
import numpy as np
import dmlgpu
from dmlgpu import Tensor

SECONDS = {seconds}
default = dmlgpu.default_device()
chaos = {{"device": dmlgpu.Device(private=True)}}
stop = threading.Event()
failures, counts, lock = [], {{"done": 0, "refused": 0, "closes": 0, "interrupts": 0, "alarms": 0}}, threading.Lock()
OPS = [("bit_xor", np.bitwise_xor, 2), ("bit_and", np.bitwise_and, 2), ("bit_or", np.bitwise_or, 2),
       ("bit_not", np.invert, 1)]
fused = dmlgpu.fuse(lambda a, b: ((a ^ b) << 3) & 0xFF0F)
KINDS = 10


class Alarm(BaseException):  # what the program's own SIGALRM handler raises (numpy's array_equal
    pass  # turns an Exception raised inside it into False)


armed = [False]  # the main thread is in an operation (an Alarm then comes out inside its `try`)


def alarm(signum, frame):  # re-armed first: the Alarm may come out in here
    if not stop.is_set():
        signal.setitimer(signal.ITIMER_REAL, random.uniform(0.02, 0.1))
        if armed[0]:
            raise Alarm


def nearest(database, queries, k):  # numpy's answer: Hamming distance, ties by lower row
    distances = np.bitwise_count(database[None, :, :] ^ queries[:, None, :]).sum(axis=2, dtype=np.uint32)
    order = np.argsort(distances, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(distances, order, axis=1), order


def check(got, want, what):
    if not np.array_equal(got, want):
        with lock:
            failures.append(what)


def one_op(rng, device):
    kind = rng.integers(0, KINDS)
    n = int(rng.choice([1, 7, 1000, 65536, 1 << 19, 1 << 21]))
    a = rng.integers(0, 2**32, n, dtype=np.uint32)
    b = rng.integers(0, 2**32, n, dtype=np.uint32)
    name, ref, arity = OPS[rng.integers(0, len(OPS))]
    with device:
        if kind == 0:  # the numpy front end on host data (kept host calls, pipelined transfers)
            got = getattr(dmlgpu, name)(*(a, b)[:arity])
            check(got, ref(*(a, b)[:arity]), f"front end {{name}} {{n}}")
        elif kind == 1:  # Tensors: upload, operators, download
            t, u = Tensor.from_numpy(a, device), Tensor.from_numpy(b, device)
            r = (~t ^ u).numpy()
            check(r, ~a ^ b, f"tensor ops {{n}}")
        elif kind == 2:  # buffers: write, read, copy, release
            buffer = device.upload(a)
            twin = copy.copy(buffer)
            buffer.write(b)
            check(twin.read().view(np.uint32)[:n], a, f"buffer copy {{n}}")
            check(buffer.read().view(np.uint32)[:n], b, f"buffer write {{n}}")
            buffer.release()
        elif kind == 3:  # results into out=
            out = np.empty_like(a)
            getattr(dmlgpu, name)(*(a, b)[:arity], out=out)
            check(out, ref(*(a, b)[:arity]), f"front end out= {{name}} {{n}}")
        elif kind == 4:  # a strided view: a pipeline of its own
            rows = int(rng.integers(1, 64))
            m = a[:rows * (n // rows)].reshape(rows, -1) if n >= rows else a.reshape(1, -1)
            t = Tensor.from_numpy(m, device)
            check((~t.transpose()).numpy(), ~m.T, f"strided {{m.shape}}")
        elif kind == 5:  # reductions and top_k, on numpy data and on a Tensor
            m = a[:min(n, 4096)]
            check(np.asarray(dmlgpu.max(m)), np.max(m), f"max {{m.size}}")
            check(dmlgpu.min(Tensor.from_numpy(m, device)).numpy(), np.min(m), f"min {{m.size}}")
            if m.size > 4:
                values, indices = dmlgpu.top_k(m, 4)
                order = np.lexsort((np.arange(m.size), -m.astype(np.int64)))[:4]
                check(values, m[order], f"top_k values {{m.size}}")
                check(indices, order.astype(np.uint32), f"top_k indices {{m.size}}")
        elif kind == 6:  # Hamming search: an index (a small k and a large one), and hamming_knn
            rows = int(rng.choice([40, 700, 3000]))
            database = rng.integers(0, 2**63, (rows, 2), dtype=np.uint64)
            queries = rng.integers(0, 2**63, (3, 2), dtype=np.uint64)
            k = int(rng.choice([1, 5, rows]))
            want = nearest(database, queries, k)
            got = dmlgpu.HammingIndex(database, device=device).search(queries, k)
            check(got[0], want[0], f"index distances {{rows}} k={{k}}")
            check(got[1], want[1], f"index rows {{rows}} k={{k}}")
            got = dmlgpu.hamming_knn(database, queries, min(k, 8))
            check(got[0], want[0][:, :min(k, 8)], f"knn distances {{rows}}")
        elif kind == 7:  # a fused function, on numpy data and on Tensors
            check(fused(a, b), ((a ^ b) << 3) & 0xFF0F, f"fuse numpy {{n}}")
            t, u = Tensor.from_numpy(a, device), Tensor.from_numpy(b, device)
            check(fused(t, u).numpy(), ((a ^ b) << 3) & 0xFF0F, f"fuse Tensor {{n}}")
        elif kind == 8:  # large k: top_k up to n (numpy data and a Tensor), hamming_knn with k = n
            m = a[:int(rng.choice([8, 256, 512]))]
            if m.size > 2:
                k = int(rng.integers(m.size // 2, m.size))
                order = np.lexsort((np.arange(m.size), -m.astype(np.int64)))[:k]
                values, indices = dmlgpu.top_k(m, k)
                check(values, m[order], f"top_k values {{m.size}} k={{k}}")
                check(indices, order.astype(np.uint32), f"top_k indices {{m.size}} k={{k}}")
                values, indices = dmlgpu.top_k(Tensor.from_numpy(m, device), k)
                check(values.numpy(), m[order], f"top_k Tensor values {{m.size}} k={{k}}")
            rows = int(rng.choice([40, 700]))
            database = rng.integers(0, 2**63, (rows, 2), dtype=np.uint64)
            queries = rng.integers(0, 2**63, (2, 2), dtype=np.uint64)
            got, want = dmlgpu.hamming_knn(database, queries, rows), nearest(database, queries, rows)
            check(got[0], want[0], f"knn distances k=n={{rows}}")
            check(got[1], want[1], f"knn rows k=n={{rows}}")
        else:  # a long reduction read back: the read may be interrupted (a wait in slices)
            m = a[:min(n, 1 << 16)]
            t = Tensor.from_numpy(m, device)
            check(dmlgpu.max(t ^ 1).numpy(), np.max(m ^ 1), f"max of an expression {{m.size}}")


def worker(seed):
    rng = np.random.default_rng(seed)
    while not stop.is_set():
        device = chaos["device"] if rng.random() < 0.4 else default
        try:
            one_op(rng, device)
            with lock:
                counts["done"] += 1
        except (dmlgpu.ValidationError, dmlgpu.DeviceError) as exc:
            if device is default:  # only the device being closed may refuse work
                with lock:
                    failures.append(f"default device refused: {{exc!r}}")
            with lock:
                counts["refused"] += 1


def closer():
    rng = random.Random(5)
    while not stop.wait(rng.uniform(0.1, 0.5)):
        old, chaos["device"] = chaos["device"], dmlgpu.Device(private=True, staging=rng.random() < 0.5)
        old.close()
        counts["closes"] += 1


go, seen = threading.Event(), threading.Event()


def interrupter():  # one SIGINT in flight at a time, each seen by the main thread first
    rng = random.Random(7)
    go.wait()
    while True:
        time.sleep(rng.uniform(0.001, 0.02))
        if stop.is_set():
            return
        if rng.random() < 0.5:
            _thread.interrupt_main()
        else:
            os.kill(os.getpid(), signal.SIGINT)
        seen.wait(1)  # (a signal Python dropped, in a callback, must not stop the run)
        seen.clear()


threads = [threading.Thread(target=worker, args=(i,)) for i in range(3)]
threads += [threading.Thread(target=closer), threading.Thread(target=interrupter)]
for thread in threads:
    thread.start()
rng = np.random.default_rng(99)
deadline = time.monotonic() + SECONDS
last = deadline + 4 * SECONDS  # (a slow host, the validation layer, other tests beside: longer to reach the counts)


def over():
    now = time.monotonic()
    return now > last or (now > deadline and counts["done"] >= 20 and counts["closes"] >= 3
                          and counts["interrupts"] >= 3 and counts["alarms"] >= 3)


def main_loop():
    while True:
        try:
            go.set()
            if over():
                stop.set()
                signal.setitimer(signal.ITIMER_REAL, 0)
                seen.set()
                for thread in threads:
                    thread.join(60)
                    assert not thread.is_alive(), thread
                return
            while not over():
                if rng.random() < 0.02:  # as a notebook kernel does for each cell
                    signal.signal(signal.SIGINT, signal.default_int_handler)
                armed[0] = True
                one_op(rng, default)
                armed[0] = False
                counts["done"] += 1
        except KeyboardInterrupt:
            armed[0] = False
            counts["interrupts"] += 1
            seen.set()
        except Alarm:
            armed[0] = False
            counts["alarms"] += 1
        except (dmlgpu.ValidationError, dmlgpu.DeviceError) as exc:
            failures.append(f"default device refused in the main thread: {{exc!r}}")


signal.signal(signal.SIGALRM, alarm)  # after the default device opened: put behind dmlgpu's
signal.setitimer(signal.ITIMER_REAL, 0.02)
while True:  # a SIGINT and an Alarm at once: the second comes out of the first's handler
    try:
        main_loop()
        break
    except KeyboardInterrupt:
        counts["interrupts"] += 1
        seen.set()
    except Alarm:
        counts["alarms"] += 1
chaos["device"].close()
assert not failures, failures[:10]
gc.collect()
default.synchronize()
default.empty_cache()
stats = default.memory_stats()
assert stats["live_buffers"] == 0 and stats["in_use_bytes"] == 0 and stats["pending_free_bytes"] == 0, stats
# and the device still computes
x = np.arange(1 << 20, dtype=np.uint32)
assert np.array_equal(dmlgpu.bit_not(x), ~x)
assert counts["done"] >= 20 and counts["closes"] >= 3, counts  # (a busy 2-core host: ~50 done)
assert counts["interrupts"] >= 3 and counts["alarms"] >= 3, counts
print("ok", counts)
"""


def test_soak_and_chaos():
    out = ok(run(SOAK.format(seconds=SECONDS), timeout=60 + 20 * SECONDS))
    assert out.startswith("ok"), out
