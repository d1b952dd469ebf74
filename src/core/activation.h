// The MLP's activation, with timm's act_layer names: gelu (exact, erf: timm's and Hugging
// Face's default), gelu_tanh (GELU's tanh approximation: SigLIP) and quick_gelu
// (x sigmoid(1.702 x): OpenAI's CLIP). The model config, the ops and every backend share it.
#pragma once
#include <string>

namespace vit {

enum class Activation { gelu, gelu_tanh, quick_gelu };

bool is_activation_name(const std::string& name);  // "gelu", "gelu_tanh" or "quick_gelu"
// "gelu", "gelu_tanh", "quick_gelu"; anything else throws vit::Error naming the three.
Activation activation_from_name(const std::string& name);
const char* activation_name(Activation a);

}  // namespace vit
