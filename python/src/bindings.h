// The parts of the _vitcpp module defined outside module.cpp.
#pragma once
#include <pybind11/pybind11.h>

#include <optional>
#include <type_traits>
#include <utility>

#include "core/threads.h"
#include "engine.h"
#include "gil.h"

namespace vit::python {

// f() as every call that computes runs: without the GIL, on vitcpp's own thread count
// (threads()), through core's run_openmp (which also works in a process forked from one that
// ran vitcpp). Returns f's result; f's exception is rethrown.
template <typename F>
auto compute(F&& f) {
  NoGil nogil;  // not pybind11::gil_scoped_release: see gil.h
  using R = decltype(f());
  if constexpr (std::is_void_v<R>) {
    run_openmp(threads(), f);
  } else {
    std::optional<R> r;
    run_openmp(threads(), [&] { r.emplace(f()); });
    return std::move(*r);
  }
}

void bind_train(pybind11::module_& m);  // train.cpp: vitcpp.train's run

}  // namespace vit::python
