// VIT_CHECK, vitcpp's own shorthand for throwing vit::Error, kept out of the installed headers:
// <vit/classifier.h> brought it into programs that embed vitcpp, where their own VIT_CHECK
// was then "redefined".
#pragma once
#include "vit/core/error.h"

// Throws vit::Error with the streamed arguments when cond is false.
#define VIT_CHECK(cond, ...)                                             \
  do {                                                                   \
    if (!(cond)) throw ::vit::Error(::vit::detail::concat(__VA_ARGS__)); \
  } while (0)

namespace vit {
// A setting whose value cannot work (a negative rate, an infinite decay, options that exclude
// each other): a usage error to a command line (exit 2, as argparse's), Python's ValueError.
class ValueError : public Error {
 public:
  using Error::Error;
};
}  // namespace vit

// Throws vit::ValueError with the streamed arguments when cond is false.
#define VIT_VALUE_CHECK(cond, ...)                                            \
  do {                                                                        \
    if (!(cond)) throw ::vit::ValueError(::vit::detail::concat(__VA_ARGS__)); \
  } while (0)
