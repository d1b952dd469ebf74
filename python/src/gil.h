// The GIL, and calls into vitcpp from threads that may outlive the program's end.
//
// A daemon thread can still be inside vitcpp (a forward, vitcpp.train) when the main thread
// ends the program. Two things went wrong there:
// - Once the interpreter is finalizing, Python ends any other thread that asks for the GIL
//   with pthread_exit, whose unwinding through vitcpp's frames (a destructor, which is
//   noexcept, or an OpenMP region) calls std::terminate: the finished program aborted (exit
//   134).
// - A call still computing while exit() destroys the libraries' static objects may read
//   them destroyed: a segmentation fault (seen on the generic path, whose calls are slower).
// So at exit (Python's atexit, before finalization) vitcpp closes its gate: calls in flight
// end (a training stops after its step, with its state written, as on SIGTERM), other
// threads' later calls wait for the exit without starting (the closing thread's own, from
// atexit handlers that run after vitcpp's, still run), and the exit goes on once none computes. A thread
// that asks for the GIL back once finalizing waits for the exit too, rather than ask:
// Python's documentation of PyEval_RestoreThread advises checking for finalization first;
// should finalization start while the thread waits for the GIL, the unwinding is caught where
// it starts and the thread waits there. It holds no GIL then (Python drops it first).
#pragma once
#include <Python.h>
#include <pybind11/pybind11.h>

#include <optional>

#if defined(__GLIBCXX__)
#include <cxxabi.h>
#endif

namespace vit::python {

[[noreturn]] void wait_for_exit();  // without the GIL: sleeps until the process ends

// The gate (gil.cpp). A call enters without the GIL; false once the gate is closed (then it
// must not start). leave_call() when it is done computing.
bool enter_call();
void leave_call();
bool calls_closing();  // whether the program is ending: a training stops after its step
// Closes the gate and waits, without the GIL, for the calls in flight (vitcpp._at_exit, on
// Python's atexit).
void close_calls();

inline bool interpreter_finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing() != 0;
#else
  return _Py_IsFinalizing() != 0;
#endif
}

// take() (what takes the GIL), or, when the interpreter is finalizing, wait_for_exit().
template <typename F>
void take_gil_or_wait(F&& take) {
  if (interpreter_finalizing()) wait_for_exit();
#if defined(__GLIBCXX__)
  try {
    take();
  } catch (abi::__forced_unwind&) {  // pthread_exit from take_gil: never rethrown, never left
    wait_for_exit();
  }
#else
  take();
#endif
}

// A call that computes: the GIL released and the gate entered for its lifetime (where the
// gate is closed, the thread waits for the exit instead), the GIL taken back through
// take_gil_or_wait.
class NoGil {
 public:
  NoGil() : state_(PyEval_SaveThread()) {
    if (!enter_call()) wait_for_exit();
  }
  ~NoGil() {
    leave_call();
    take_gil_or_wait([&] { PyEval_RestoreThread(state_); });
  }
  NoGil(const NoGil&) = delete;
  NoGil& operator=(const NoGil&) = delete;

 private:
  PyThreadState* state_;
};

// pybind11::gil_scoped_acquire, taken through take_gil_or_wait.
class WithGil {
 public:
  WithGil() {
    take_gil_or_wait([&] { gil_.emplace(); });
  }

 private:
  std::optional<pybind11::gil_scoped_acquire> gil_;
};

}  // namespace vit::python
