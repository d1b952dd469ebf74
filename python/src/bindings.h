// The parts of the _vitcpp module defined outside module.cpp.
#pragma once
#include <pybind11/pybind11.h>

namespace vit::python {

void bind_train(pybind11::module_& m);  // train.cpp: vitcpp.train's run

}  // namespace vit::python
