// The parts of the _vitcpp module defined outside module.cpp.
#pragma once
#include <pybind11/pybind11.h>

#include "engine.h"

namespace vit::python {

// What every call that computes runs under: the GIL released, vitcpp's own thread count
// (OwnThreads) set for the calling thread; both given back at the end of the scope.
struct Compute {
  pybind11::gil_scoped_release nogil;
  OwnThreads own;
};

void bind_train(pybind11::module_& m);  // train.cpp: vitcpp.train's run

}  // namespace vit::python
