// dmlgpu._host_copy: host memcpys split over cores by threads that spin briefly for work.
//
// A front-end call on 1 MiB of host data makes four host copies of 512 KiB (into and out of
// staging, in halves). Right after the GPU's DMA has touched that memory they run at DRAM speed
// on one core (~49 us each on an H100 host, against ~19 us from cache), and handing slices to
// Python threads costs more than it saves (a futex wake-up and GIL hand-offs per slice: the
// call grows from 253 to 390 us on 2 threads, 547 us on 4). Here the caller publishes a job and
// copies a slice itself while threads that were spinning on an atomic take the others: no
// system call and no GIL on the way. A thread idle for SPIN_MICROSECONDS sleeps on a condition
// variable, so an idle process costs no CPU; the next copy wakes it.
#include <pybind11/pybind11.h>

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
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
};

class Pool {
  public:
    // Daemons, never joined and never destroyed (nor is the pool): alive until the process
    // ends. Where the system refuses a thread the pool keeps those it has (fewer slices).
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

    // Copy with the caller and the pool's threads; returns when every slice has landed.
    void copy(char *dst, const char *src, size_t size, size_t slice) {
        auto job = std::make_shared<Job>();
        job->dst = dst;
        job->src = src;
        job->size = size;
        job->slice = slice;
        job->slices = static_cast<unsigned>((size + slice - 1) / slice);
        {
            std::lock_guard<std::mutex> lock(mutex_);
            current_ = job;
            generation_.fetch_add(1, std::memory_order_release);
        }
        if (sleepers_.load(std::memory_order_acquire) > 0)
            wake_.notify_all();
        job->run();
        while (job->done.load(std::memory_order_acquire) < job->slices)
            DMLGPU_PAUSE();
    }

  private:
    void work() {
        uint64_t seen = generation_.load(std::memory_order_acquire);
        for (;;) {
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
            std::shared_ptr<Job> job;
            {
                std::lock_guard<std::mutex> lock(mutex_);
                seen = generation_.load(std::memory_order_acquire);
                job = current_;  // held: a job outlives every thread still looking at it
            }
            if (job)
                job->run();
        }
    }

    unsigned threads_ = 0;
    std::mutex mutex_;
    std::condition_variable wake_;
    std::shared_ptr<Job> current_;
    std::atomic<uint64_t> generation_{0};
    std::atomic<int> sleepers_{0};
};

Pool *pool = nullptr;  // made on first use; one copy at a time runs on it
std::mutex pool_lock;

// In a forked child the parent's threads do not exist, and its mutexes may be held by them:
// the child starts from nothing (the parent's pool object is left behind, never touched).
void forget_pool_in_child() {
    pool = nullptr;
    new (&pool_lock) std::mutex();
}

py::buffer_info contiguous(const py::buffer &buffer, bool writable, const char *what) {
    py::buffer_info info = buffer.request(writable);
    if (info.ndim > 1 || (info.ndim == 1 && info.strides[0] != info.itemsize))
        throw std::invalid_argument(std::string(what) + " must be C-contiguous and one-dimensional");
    return info;
}

// copy(dst, src, threads, slice): copy the bytes of src into dst (the same length) on up to
// `threads` threads (the caller among them) in slices of at least `slice` bytes; overlapping
// buffers are moved whole by the caller.
void copy(const py::buffer &dst, const py::buffer &src, unsigned threads, size_t slice) {
    py::buffer_info d = contiguous(dst, true, "dst");
    py::buffer_info s = contiguous(src, false, "src");
    size_t size = static_cast<size_t>(d.size * d.itemsize);
    if (size != static_cast<size_t>(s.size * s.itemsize))
        throw std::invalid_argument("dst and src differ in size");
    char *to = static_cast<char *>(d.ptr);
    const char *from = static_cast<const char *>(s.ptr);
    slice = std::max<size_t>(slice, 4096);
    unsigned parts = static_cast<unsigned>(std::min<size_t>(threads, size / slice));
    py::gil_scoped_release unlocked;
    if (to < from + size && from < to + size) {  // overlapping: as numpy, as if through a copy
        std::memmove(to, from, size);
        return;
    }
    if (parts < 2) {
        std::memcpy(to, from, size);
        return;
    }
    size_t step = ((size + parts - 1) / parts + 4095) / 4096 * 4096;  // page-aligned slices
    std::unique_lock<std::mutex> lock(pool_lock, std::try_to_lock);
    if (!lock.owns_lock()) {  // another thread copies on the pool: this one copies alone
        std::memcpy(to, from, size);
        return;
    }
    if (pool == nullptr) {
        static std::once_flag registered;
        std::call_once(registered, [] { pthread_atfork(nullptr, nullptr, forget_pool_in_child); });
        unsigned cores = std::max(1u, std::thread::hardware_concurrency());
        pool = new Pool(std::min(threads, cores) - 1);  // made once: never more than the cores
    }
    if (parts > pool->threads() + 1) {  // a pool made for fewer threads: slices for them
        parts = pool->threads() + 1;
        step = ((size + parts - 1) / parts + 4095) / 4096 * 4096;
    }
    pool->copy(to, from, size, step);
}

unsigned pool_threads() { return pool == nullptr ? 0 : pool->threads(); }

}  // namespace

PYBIND11_MODULE(_host_copy, m) {
    m.doc() = "Host memcpys split over cores by threads that spin briefly for work (dmlgpu.runtime.host_copy)";
    m.def("copy", &copy, py::arg("dst"), py::arg("src"), py::arg("threads"), py::arg("slice"),
          "Copy src's bytes into dst (C-contiguous, the same length; overlapping: moved whole) on up to "
          "`threads` threads, the caller among them, in page-aligned slices of at least `slice` bytes");
    m.def("pool_threads", &pool_threads, "Threads the pool has started (0 before the first split copy)");
}
