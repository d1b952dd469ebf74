// Taking the GIL back from a thread that may outlive the interpreter.
//
// A daemon thread can still be inside vitcpp (a forward, vitcpp.train) when the main thread
// ends the program. Once the interpreter is finalizing, Python ends any other thread that
// asks for the GIL with pthread_exit, whose unwinding runs through vitcpp's frames: through
// a destructor (noexcept) or an OpenMP region it calls std::terminate, and the program that
// had finished aborts ("terminate called without an active exception", exit 134). So such a
// thread, rather than ask, waits for the process's exit, which ends it: Python's
// documentation of PyEval_RestoreThread advises checking for finalization first, and the
// unwinding, should finalization start while the thread waits for the GIL, is caught where
// it starts and the thread waits there too. It holds no GIL then (Python drops it before
// pthread_exit).
#pragma once
#include <Python.h>
#include <pybind11/pybind11.h>

#include <optional>

#if defined(__GLIBCXX__)
#include <cxxabi.h>
#endif

namespace vit::python {

[[noreturn]] void wait_for_exit();  // gil.cpp

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

// pybind11::gil_scoped_release, but the GIL is taken back through take_gil_or_wait.
class NoGil {
 public:
  NoGil() : state_(PyEval_SaveThread()) {}
  ~NoGil() {
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
