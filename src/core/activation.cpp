#include "core/activation.h"

#include "core/check.h"

namespace vit {

bool is_activation_name(const std::string& name) {
  return name == "gelu" || name == "gelu_tanh" || name == "quick_gelu";
}

Activation activation_from_name(const std::string& name) {
  if (name == "gelu") return Activation::gelu;
  if (name == "gelu_tanh") return Activation::gelu_tanh;
  if (name == "quick_gelu") return Activation::quick_gelu;
  throw Error("unknown activation '" + name + "' (gelu, gelu_tanh or quick_gelu)");
}

const char* activation_name(Activation a) {
  switch (a) {
    case Activation::gelu_tanh: return "gelu_tanh";
    case Activation::quick_gelu: return "quick_gelu";
    default: return "gelu";
  }
}

}  // namespace vit
