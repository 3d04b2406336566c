// The GIL given up around native work (`Unlocked unlocked; ...; unlocked.relock();`), for
// dmlgpu's extension modules (host_copy.cpp, glsl.cpp). Taken back by dmlgpu_relock (relock.c),
// which parks the thread for good where the interpreter is finalizing, in relock() or, where an
// exception is already leaving, in the destructor: either way no unwind ever crosses these
// frames to end the thread (relock.c says why), and the thread never enters Python again.
#ifndef DMLGPU_UNLOCKED_H
#define DMLGPU_UNLOCKED_H

#include <Python.h>

extern "C" void dmlgpu_relock(PyThreadState *state);  // relock.c, linked into each module

namespace dmlgpu {

class Unlocked {
  public:
    Unlocked() : state_(PyEval_SaveThread()) {}
    Unlocked(const Unlocked &) = delete;
    void relock() {
        if (state_ == nullptr)
            return;
        PyThreadState *state = state_;
        state_ = nullptr;
        dmlgpu_relock(state);
    }
    ~Unlocked() {
        if (state_ != nullptr)  // only when an exception is already leaving: the work here throws
            dmlgpu_relock(state_);  // nothing of its own
    }

  private:
    PyThreadState *state_;
};

}  // namespace dmlgpu

#endif
