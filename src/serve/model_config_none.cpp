// A build without protobuf: no model configuration is read (model_config.h).
#include "core/check.h"
#include "serve/model_config.h"

namespace vit::serve {

bool model_configs_supported() {
  return false;
}

ModelSettings apply_model_config(std::string_view, bool, const std::string&, const std::string& where,
                                 ModelSettings, std::vector<std::string>&) {
  throw Error(where +
              ": this build of vitcpp reads no model configuration (install libprotobuf-dev and "
              "protobuf-compiler, then build again)");
}

}  // namespace vit::serve
