/* The GIL taken back by a thread that gave it up around native work (unlocked.h), or the thread
 * parked for good where the interpreter is finalizing.
 *
 * A daemon thread that takes the GIL back once Py_Finalize has begun is ended by CPython (up to
 * 3.13) with pthread_exit, which glibc runs as a forced unwind through every frame of the thread.
 * Not through the frames of dmlgpu's modules: pybind11 built with libc++ (the manylinux preset's
 * zig) catches the unwind in its dispatcher's catch (...) and does not rethrow it (glibc aborts:
 * "FATAL: exception not rethrown"), and a noexcept destructor on the way would call
 * std::terminate. So the GIL is taken back here, in C, under a cancellation cleanup handler of
 * C's kind: the unwind reaches this frame before any C++ frame, glibc jumps back into it (a
 * setjmp of its own, not an unwind), and the handler parks the thread, as CPython 3.14 parks
 * daemon threads itself: exit ends the process, and the thread with it. Compiled as C without
 * -fexceptions, where pthread_cleanup_push is that setjmp and needs no unwinder.
 */
#include <Python.h>
#include <pthread.h>
#include <unistd.h>

#ifdef __EXCEPTIONS
#error "relock.c needs C's setjmp-based pthread_cleanup_push: compile it without -fexceptions"
#endif

static void park(void *unused) {
    (void)unused;
    for (;;)
        pause();
}

void dmlgpu_relock(PyThreadState *state) {
    if (_Py_IsFinalizing())  /* parked at once: no unwind at all where the end is already known */
        park(NULL);
    pthread_cleanup_push(park, NULL);
    PyEval_RestoreThread(state);
    pthread_cleanup_pop(0);
}
