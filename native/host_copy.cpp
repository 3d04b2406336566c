// dmlgpu.runtime._host_copy: host memcpys split over cores by threads that spin briefly for work.
//
// A front-end call on 1 MiB of host data makes four host copies of 512 KiB (into and out of
// staging, in halves). Right after the GPU's DMA has touched that memory they run at DRAM speed
// on one core (~49 us each on an H100 host, against ~19 us from cache), and handing slices to
// Python threads costs more than it saves (a futex wake-up and GIL hand-offs per slice: the
// call grows from 253 to 390 us on 2 threads, 547 us on 4). Here a copy is a job of page-aligned
// slices in a queue that threads spinning on an atomic take from: no system call and no GIL on
// the way. `copy` publishes a job and copies slices itself; `start` publishes one and returns,
// and its `wait` copies whatever slices no thread has taken yet, so a copy never waits for a
// sleeping thread. A thread idle for SPIN_MICROSECONDS sleeps on a condition variable (an idle
// process costs no CPU); the next job wakes it.
//
// Faults: the pool's threads never touch Python and block every signal (a Ctrl-C goes to a
// Python thread). A caller gives the GIL up around its copies and takes it back in plain code,
// never in a destructor (unlocked.h): a caller whose copy ends once the interpreter is finalizing
// parks for good (as CPython 3.14 parks daemon threads) and never enters Python again, and no
// unwind ends it through these frames (relock.c).
#include <pybind11/pybind11.h>

#include "unlocked.h"

using dmlgpu::Unlocked;

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define DMLGPU_PAUSE() _mm_pause()
#else
#define DMLGPU_PAUSE() std::this_thread::yield()
#endif

namespace py = pybind11;

namespace {

constexpr auto SPIN_MICROSECONDS = std::chrono::microseconds(200);

struct Job {
    char *dst;
    const char *src;
    size_t size;
    size_t slice;  // bytes per slice (the last may be shorter)
    unsigned slices;
    std::atomic<unsigned> next{0};
    std::atomic<unsigned> done{0};

    bool exhausted() const { return next.load(std::memory_order_relaxed) >= slices; }

    // Copy slices until none is left to take.
    void run() {
        for (;;) {
            unsigned i = next.fetch_add(1, std::memory_order_relaxed);
            if (i >= slices)
                return;
            size_t lo = i * slice;
            std::memcpy(dst + lo, src + lo, std::min(slice, size - lo));
            done.fetch_add(1, std::memory_order_release);
        }
    }

    // Take what is left, then wait for the slices other threads are copying.
    void finish() {
        run();
        while (done.load(std::memory_order_acquire) < slices)
            DMLGPU_PAUSE();
    }
};

class Pool {
  public:
    // Daemons, never joined and never destroyed (nor is the pool): alive until the process
    // ends. Where the system refuses a thread the pool keeps those it has.
    explicit Pool(unsigned threads) {
        for (unsigned i = 0; i < threads; ++i) {
            try {
                std::thread([this] { work(); }).detach();
            } catch (const std::system_error &) {
                break;
            }
            ++threads_;
        }
    }

    unsigned threads() const { return threads_; }

    void post(const std::shared_ptr<Job> &job) {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            jobs_.push_back(job);
            generation_.fetch_add(1, std::memory_order_release);
        }
        if (sleepers_.load(std::memory_order_acquire) > 0)
            wake_.notify_all();
    }

  private:
    // The oldest job with slices left (dropping those without), or null; under mutex_.
    std::shared_ptr<Job> next_job() {
        while (!jobs_.empty() && jobs_.front()->exhausted())
            jobs_.pop_front();
        return jobs_.empty() ? nullptr : jobs_.front();
    }

    void work() {
        sigset_t all;
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, nullptr);  // signals go to the process's other threads
        for (;;) {
            uint64_t seen;
            std::shared_ptr<Job> job;
            {
                std::lock_guard<std::mutex> lock(mutex_);
                job = next_job();  // held: a job outlives every thread still copying it
                seen = generation_.load(std::memory_order_acquire);
            }
            if (job) {
                job->run();
                continue;
            }
            auto deadline = std::chrono::steady_clock::now() + SPIN_MICROSECONDS;
            unsigned polls = 0;
            while (generation_.load(std::memory_order_acquire) == seen) {
                DMLGPU_PAUSE();
                if (++polls % 64 == 0 && std::chrono::steady_clock::now() > deadline) {
                    std::unique_lock<std::mutex> lock(mutex_);
                    sleepers_.fetch_add(1, std::memory_order_acq_rel);
                    wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
                    sleepers_.fetch_sub(1, std::memory_order_acq_rel);
                    break;
                }
            }
        }
    }

    unsigned threads_ = 0;
    std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<std::shared_ptr<Job>> jobs_;
    std::atomic<uint64_t> generation_{0};
    std::atomic<int> sleepers_{0};
};

Pool *pool = nullptr;  // made on the first split copy
std::mutex *pool_lock = new std::mutex();

// In a forked child the parent's threads do not exist, and its mutexes may be held by them:
// the child starts from nothing (the parent's pool is left behind, never touched).
void forget_pool_in_child() {
    pool = nullptr;
    pool_lock = new std::mutex();
}

Pool &the_pool(unsigned threads) {
    std::lock_guard<std::mutex> lock(*pool_lock);
    if (pool == nullptr) {
        static bool registered = false;
        if (!registered)
            registered = pthread_atfork(nullptr, nullptr, forget_pool_in_child) == 0;
        unsigned cores = std::max(1u, std::thread::hardware_concurrency());
        pool = new Pool(std::min(threads, cores) - 1);  // made once: never more than the cores
    }
    return *pool;
}

// A copy in flight (`start`): `wait` copies what is left and returns once every slice has
// landed; dropped unwaited, it waits. It holds both arrays until the copy has landed, and lets
// them go only after: a Pending dropped at interpreter exit (or collected with its arrays)
// finishes the copy in its destructor's body, before its members, the arrays, are released.
class Pending {
  public:
    Pending(std::shared_ptr<Job> job, py::object dst, py::object src) : job_(std::move(job)) {
        if (job_) {  // (a copy done at once needs neither)
            dst_ = std::move(dst);
            src_ = std::move(src);
        }
    }
    Pending(Pending &&) = default;  // moved into Python's object: only that one waits
    Pending(const Pending &) = delete;
    ~Pending() {
        if (job_)
            job_->finish();  // holding the GIL: a destructor never gives it up and takes it back
    }
    void wait() {
        if (!job_)
            return;
        Unlocked unlocked;
        job_->finish();
        unlocked.relock();
        job_.reset();
        dst_ = py::object();
        src_ = py::object();
    }
    bool done() const { return !job_ || job_->done.load(std::memory_order_acquire) >= job_->slices; }

  private:
    std::shared_ptr<Job> job_;
    py::object dst_, src_;  // (after job_: a member is released after the destructor's body)
};

py::buffer_info contiguous(const py::buffer &buffer, bool writable, const char *what) {
    py::buffer_info info = buffer.request(writable);
    if (info.ndim > 1 || (info.ndim == 1 && info.strides[0] != info.itemsize))
        throw std::invalid_argument(std::string(what) + " must be C-contiguous and one-dimensional");
    return info;
}

// The job of copying src's bytes into dst, or null where the caller copies at once (overlapping
// buffers, moved whole as numpy would; or too small to split); a null job's copy is done.
std::shared_ptr<Job> prepare(const py::buffer &dst, const py::buffer &src, unsigned threads, size_t slice) {
    py::buffer_info d = contiguous(dst, true, "dst");
    py::buffer_info s = contiguous(src, false, "src");
    size_t size = static_cast<size_t>(d.size * d.itemsize);
    if (size != static_cast<size_t>(s.size * s.itemsize))
        throw std::invalid_argument("dst and src differ in size");
    char *to = static_cast<char *>(d.ptr);
    const char *from = static_cast<const char *>(s.ptr);
    slice = std::max<size_t>(slice, 4096);
    unsigned parts = static_cast<unsigned>(std::min<size_t>(threads, size / slice));
    Unlocked unlocked;
    if (to < from + size && from < to + size) {
        std::memmove(to, from, size);
        unlocked.relock();
        return nullptr;
    }
    if (parts >= 2)
        parts = std::min(parts, the_pool(threads).threads() + 1);
    if (parts < 2) {
        std::memcpy(to, from, size);
        unlocked.relock();
        return nullptr;
    }
    auto job = std::make_shared<Job>();
    job->dst = to;
    job->src = from;
    job->size = size;
    job->slice = ((size + parts - 1) / parts + 4095) / 4096 * 4096;  // page-aligned slices
    job->slices = static_cast<unsigned>((size + job->slice - 1) / job->slice);
    pool->post(job);
    unlocked.relock();
    return job;
}

void copy(const py::buffer &dst, const py::buffer &src, unsigned threads, size_t slice) {
    std::shared_ptr<Job> job = prepare(dst, src, threads, slice);
    if (job) {
        Unlocked unlocked;
        job->finish();
        unlocked.relock();
    }
}

Pending start(const py::buffer &dst, const py::buffer &src, unsigned threads, size_t slice) {
    return Pending(prepare(dst, src, threads, slice), dst, src);
}

unsigned pool_threads() { return pool == nullptr ? 0 : pool->threads(); }

}  // namespace

PYBIND11_MODULE(_host_copy, m) {
    m.doc() = "Host memcpys split over cores by threads that spin briefly for work (dmlgpu.runtime.host_copy)";
    py::class_<Pending>(m, "Pending", "A copy in flight (from start)")
        .def("wait", &Pending::wait, "Copy what no thread has taken yet and return once every slice has landed")
        .def_property_readonly("done", &Pending::done);
    m.def("copy", &copy, py::arg("dst"), py::arg("src"), py::arg("threads"), py::arg("slice"),
          "Copy src's bytes into dst (C-contiguous, the same length; overlapping: moved whole) on up to "
          "`threads` threads, the caller among them, in page-aligned slices of at least `slice` bytes");
    m.def("start", &start, py::arg("dst"), py::arg("src"), py::arg("threads"), py::arg("slice"),
          "As copy, but returns at once with a Pending whose wait() finishes it (small or overlapping "
          "copies are done at once); neither buffer may change before wait() returns (the Pending holds both "
          "until the copy has landed)");
    m.def("pool_threads", &pool_threads, "Threads the pool has started (0 before the first split copy)");
}
