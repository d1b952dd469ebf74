#include "io/checkpoint.h"

#include <filesystem>

#include "core/check.h"
#include "vit/core/version.h"

namespace vit {

namespace fs = std::filesystem;

void save_checkpoint(const std::string& path, const ViT& model,
                     const std::map<std::string, std::string>& extra_metadata, bool write_config_json) {
  const float* params = model.fp32_params(path + ": not saved");
  std::vector<TensorOut> out;
  for (const auto& s : model.table().specs()) out.push_back({s.name, s.shape, DType::F32, params + s.offset});
  auto meta = extra_metadata;
  meta["format"] = "pt";  // what timm and transformers expect
  meta["vit_config"] = model.config().to_json(-1);
  meta["vitcpp_version"] = version();  // the version that wrote it
  write_safetensors(path, out, meta);
  if (write_config_json) {
    fs::path dir = fs::path(path).parent_path();
    model.config().save((dir.empty() ? fs::path("config.json") : dir / "config.json").string());
  }
}

ViTConfig checkpoint_config(const SafeTensors& st) {
  auto it = st.metadata().find("vit_config");
  if (it != st.metadata().end()) {
    try {
      return ViTConfig::from_json(it->second);
    } catch (const Error& e) {
      throw Error(st.path() + ": " + e.what());
    }
  }
  fs::path beside = fs::path(st.path()).parent_path() / "config.json";
  VIT_CHECK(fs::exists(beside), st.path(), ": no vit_config in its metadata and no ", beside.string(),
            " beside it");
  return ViTConfig::load(beside.string());
}

void load_weights(ViT& model, const SafeTensors& st) {
  // A model packed or released for inference would go on serving its prepared copies of the
  // old weights: the model refuses (the same check as saving).
  model.fp32_params(st.path() + ": load_weights");
  const ParamTable& table = model.table();
  for (const auto& t : st.tensors())
    VIT_CHECK(table.find(t.name) ||
                  (t.name.ends_with("_scale") && int8_stored(t.name.substr(0, t.name.size() - 6))),
              st.path(), ": unexpected tensor '", t.name, "' ", shape_str(t.shape),
              " (not a parameter of this model)");
  for (const auto& s : table.specs()) {
    const TensorInfo* t = st.find(s.name);
    VIT_CHECK(t, st.path(), ": missing tensor '", s.name, "' ", shape_str(s.shape));
    VIT_CHECK(t->shape == s.shape, st.path(), ": tensor '", s.name, "' has shape ", shape_str(t->shape),
              ", the model expects ", shape_str(s.shape));
  }
  for (const auto& s : table.specs()) copy_weights(st, s.name, model.params().data() + s.offset);
}

std::unique_ptr<ViT> load_checkpoint(const std::string& path) {
  SafeTensors st = SafeTensors::open(path);
  auto model = std::make_unique<ViT>(checkpoint_config(st), /*randomize=*/false);
  load_weights(*model, st);  // writes every parameter or throws
  return model;
}

}  // namespace vit
