// A copy of a pretrained checkpoint directory with its tensors changed, for tests of what the
// loaders make of such files.
#pragma once
#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "io/safetensors.h"

namespace vit::test {

// Copies dir's model.safetensors (as F32) to out/model.safetensors without `drop`, with `add`
// ([4] zeros each), and each name that starts with `from` starting with `to` instead (from ""
// and a `to`: every name prefixed); the JSON files come along.
inline void rewrite(const std::string& dir, const std::string& out, const std::vector<std::string>& drop,
                    const std::vector<std::string>& add, const std::string& from = "",
                    const std::string& to = "") {
  std::filesystem::create_directories(out);
  for (auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".json")
      std::filesystem::copy_file(e.path(), std::filesystem::path(out) / e.path().filename());
  const SafeTensors st = SafeTensors::open(dir + "/model.safetensors");
  std::vector<std::vector<float>> data;
  std::vector<TensorOut> t;
  data.reserve(st.tensors().size() + add.size());
  for (const auto& info : st.tensors()) {
    if (std::find(drop.begin(), drop.end(), info.name) != drop.end()) continue;
    data.push_back(st.to_float(info.name));
    const bool renamed = (!from.empty() || !to.empty()) && info.name.rfind(from, 0) == 0;
    t.push_back({renamed ? to + info.name.substr(from.size()) : info.name, info.shape, DType::F32,
                 data.back().data()});
  }
  for (const auto& name : add) {
    data.push_back(std::vector<float>(4, 0.f));
    t.push_back({name, {4}, DType::F32, data.back().data()});
  }
  write_safetensors(out + "/model.safetensors", t);
}

}  // namespace vit::test
