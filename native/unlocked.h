// The GIL given up around native work (`Unlocked unlocked; ...; unlocked.relock();`), for
// dmlgpu's extension modules (host_copy.cpp, glsl.cpp). Taken back in relock(), in plain code,
// never in a destructor: once the interpreter is finalizing, a daemon thread that takes the GIL
// is ended by a forced unwind, which a noexcept destructor would turn into std::terminate; an
// interpreter that is finalizing parks the thread instead, for good (as CPython 3.14 parks
// daemon threads): it never enters Python again.
#ifndef DMLGPU_UNLOCKED_H
#define DMLGPU_UNLOCKED_H

#include <Python.h>
#include <unistd.h>

namespace dmlgpu {

class Unlocked {
  public:
    Unlocked() : state_(PyEval_SaveThread()) {}
    Unlocked(const Unlocked &) = delete;
    void relock() {
        if (state_ == nullptr)
            return;
        if (_Py_IsFinalizing()) {
            for (;;)
                pause();  // exit ends the process, and this thread with it
        }
        PyThreadState *state = state_;
        state_ = nullptr;
        PyEval_RestoreThread(state);
    }
    ~Unlocked() {
        if (state_ != nullptr)  // only when an exception is already leaving (no finalization
            PyEval_RestoreThread(state_);  // then: the work here throws nothing of its own)
    }

  private:
    PyThreadState *state_;
};

}  // namespace dmlgpu

#endif
