// Hugging Face transformers' ViT (ViTForImageClassification, ViTModel) and DeiT
// (DeiTForImageClassificationWithTeacher, DeiTForImageClassification, DeiTModel): config.json
// gives the architecture, preprocessor_config.json the preprocessing, and the names map onto
// timm's; query, key and value stack into one qkv, rows q, k, v as timm's.
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "core/json_number.h"
#include "core/resample.h"
#include "formats.h"
#include "vit/core/error.h"

namespace vit::detail {

using json = nlohmann::json;

namespace {

// transformers' image_size and patch_size: one number, or a pair [height, width] (ViTConfig
// takes both; ViTPatchEmbeddings makes a pair of a number).
void size_of(const json& v, const char* what, int64_t& h, int64_t& w) {
  const std::string where = std::string("config.json ") + what;
  if (!v.is_array()) {
    h = w = json_int(v, where);
    return;
  }
  VIT_CHECK(v.size() == 2, where, " ", v.dump(), ": a number or [height, width]");
  h = json_int(v[0], where);
  w = json_int(v[1], where);
}

}  // namespace

namespace {
void read_preprocessor(const json& p, ViTConfig& c, Mapping& m) {
  const bool normalize = p.value("do_normalize", true), rescale = p.value("do_rescale", true);
  if (normalize) {
    if (p.contains("image_mean")) c.mean = p["image_mean"].get<std::vector<float>>();
    if (p.contains("image_std")) c.std = p["image_std"].get<std::vector<float>>();
  } else {
    c.mean.assign(c.in_chans, 0.f);
    c.std.assign(c.in_chans, 1.f);
  }
  if (rescale) {
    const double f = p.value("rescale_factor", 1.0 / 255.0);
    VIT_CHECK(std::abs(f * 255.0 - 1.0) < 1e-6, "preprocessor_config.json rescale_factor ", f,
              " is not 1/255");
  } else {
    // Pixels stay 0..255: fold the missing 1/255 into mean and std.
    for (auto& v : c.mean) v /= 255.f;
    for (auto& v : c.std) v /= 255.f;
  }
  if (p.contains("resample"))
    c.interpolation =
        filter_name(filter_from_pil_code(json_int32(p["resample"], "preprocessor_config.json resample")));
  // {"height": H, "width": W} or one number (older files).
  auto hw = [&](const char* key, int64_t& h, int64_t& w) {
    const json& s = p[key];
    const std::string what = std::string("preprocessor_config.json ") + key;
    if (s.is_object() && s.contains("height")) {
      h = json_int(s["height"], what + ".height");
      w = json_int(s["width"], what + ".width");
    } else if (s.is_number()) {
      h = w = json_int(s, what);
    }
  };
  // DeiTImageProcessor: resize both sides to `size`, then a center crop of `crop_size`, which
  // is vitcpp's squash at crop_pct crop_size / size.
  if (p.value("do_center_crop", false) && p.contains("crop_size") && p.contains("size") &&
      p.value("do_resize", true)) {
    int64_t ch = 0, cw = 0, h = 0, w = 0;
    hw("crop_size", ch, cw);
    hw("size", h, w);
    VIT_CHECK(ch > 0 && h >= ch && w >= cw && double(ch) / double(h) == double(cw) / double(w),
              "preprocessor_config.json crop_size ", ch, "x", cw, " of size ", h, "x", w,
              " is not one center crop of both sides alike");
    c.crop_mode = "squash";
    // crop / size, nudged down where rounding would make the size preprocessing resizes to
    // (scale_size) one short of `size`.
    c.crop_pct = double(ch) / double(h);
    while (scale_size(ch, c.crop_pct) < h) c.crop_pct = std::nextafter(c.crop_pct, 0.0);
    if (ch != c.img_h || cw != c.img_w)
      m.notes.push_back("preprocessor_config.json crops to " + std::to_string(ch) + "x" + std::to_string(cw) +
                        ", the model takes " + std::to_string(c.img_h) + "x" + std::to_string(c.img_w) +
                        "; images are resized to the model's size");
    return;
  }
  if (p.contains("size") && p.value("do_resize", true)) {
    int64_t h = 0, w = 0;
    hw("size", h, w);
    if (h && (h != c.img_h || w != c.img_w))
      m.notes.push_back("preprocessor_config.json resizes to " + std::to_string(h) + "x" + std::to_string(w) +
                        ", the model takes " + std::to_string(c.img_h) + "x" + std::to_string(c.img_w) +
                        "; images are resized to the model's size");
  }
}

}  // namespace

void hf_preprocessing(const SafeTensors& st, ViTConfig& c, Mapping& m, const std::string& interpolation,
                      const std::string& processor) {
  c.mean.assign(c.in_chans, 0.5f);
  c.std.assign(c.in_chans, 0.5f);
  c.interpolation = interpolation;
  c.crop_pct = 1.0;
  c.crop_mode = "squash";
  if (auto pre = json_beside(st, "preprocessor_config.json"))
    read_preprocessor(*pre, c, m);
  else
    m.notes.push_back("no preprocessor_config.json: " + processor + "'s defaults (" + interpolation +
                      ", mean/std 0.5)");
}

void hf_block_sources(Mapping& m, int64_t depth, const std::string& layers, const HfBlockNames& n) {
  for (int64_t i = 0; i < depth; ++i) {
    const std::string b = "blocks." + std::to_string(i) + ".", l = layers + std::to_string(i) + ".";
    for (const std::string wb : {"weight", "bias"}) {
      m.sources[b + "norm1." + wb] = {l + n.norm1 + wb};
      m.sources[b + "attn.qkv." + wb] = {l + n.q + wb, l + n.k + wb, l + n.v + wb};  // rows q, k, v
      m.sources[b + "attn.proj." + wb] = {l + n.proj + wb};
      m.sources[b + "norm2." + wb] = {l + n.norm2 + wb};
      m.sources[b + "mlp.fc1." + wb] = {l + n.fc1 + wb};
      m.sources[b + "mlp.fc2." + wb] = {l + n.fc2 + wb};
    }
  }
}

void hf_read_sizes(const json& j, ViTConfig& c, float eps) {
  auto integer = [&](const char* key, int64_t fallback) {
    return j.contains(key) ? json_int(j[key], std::string("config.json ") + key) : fallback;
  };
  c.embed_dim = integer("hidden_size", 768);
  c.depth = integer("num_hidden_layers", 12);
  c.num_heads = integer("num_attention_heads", 12);
  c.mlp_dim = integer("intermediate_size", 3072);
  c.norm_eps = j.value("layer_norm_eps", eps);
  size_of(j.value("image_size", json(224)), "image_size", c.img_h, c.img_w);
  size_of(j.value("patch_size", json(16)), "patch_size", c.patch_h, c.patch_w);
  c.in_chans = integer("num_channels", 3);
}

std::string hf_pos_resample(const json& j) {
  // transformers PR 33226 ("Fix torch.jit.trace for interpolate_pos_encoding in all vision
  // models"), first released in 4.45.0, replaced scale_factor=((h + 0.1) / sqrt(N), ...) by
  // size=(h, w).
  int major = 0, minor = 0;
  if (const json* v = field(j, "transformers_version");
      v && v->is_string() && std::sscanf(v->get<std::string>().c_str(), "%d.%d", &major, &minor) == 2)
    return major < 4 || (major == 4 && minor < 45) ? "hf-scale" : "hf";
  return "hf";
}

std::string hf_activation(const std::string& act) {
  // transformers' ACT2FN: gelu (erf); gelu_pytorch_tanh, gelu_new and gelu_fast are GELU's
  // tanh form (written three ways); quick_gelu is x sigmoid(1.702 x).
  if (act == "gelu") return "gelu";
  if (act == "gelu_pytorch_tanh" || act == "gelu_new" || act == "gelu_fast") return "gelu_tanh";
  if (act == "quick_gelu") return "quick_gelu";
  throw Error("hidden_act '" + act +
              "' is not supported (gelu, gelu_pytorch_tanh, gelu_new, gelu_fast or quick_gelu)");
}

std::vector<std::string> hf_class_names(const json& j, int64_t num_classes) {
  if (!j.contains("id2label") || num_classes <= 0) return {};
  std::vector<std::string> names(num_classes);
  for (auto& [k, v] : j["id2label"].items()) {
    int64_t i = -1;
    try {
      i = std::stoll(k);
    } catch (const std::invalid_argument&) {
      throw Error("config.json id2label has a key that is not an integer");
    } catch (const std::out_of_range&) {
      throw Error("config.json id2label has a key past int64's range");
    }
    if (i >= 0 && i < num_classes) names[i] = v.get<std::string>();
  }
  return names;
}

Mapping hf_mapping(const SafeTensors& st) {
  if (st.find("vision_model.embeddings.patch_embedding.weight")) return hf_siglip_mapping(st);
  Mapping m;
  ViTConfig& c = m.cfg;
  const std::string& where = st.path();
  const std::string p = st.find("vit.embeddings.patch_embeddings.projection.weight")    ? "vit."
                        : st.find("deit.embeddings.patch_embeddings.projection.weight") ? "deit."
                                                                                        : "";
  naming_file(where, [&] {
    const std::optional<json> config = json_beside(st, "config.json");
    VIT_CHECK(config, "a Hugging Face ViT needs its config.json beside the weights");
    const json& j = *config;
    const std::string type = j.value("model_type", "vit");
    VIT_CHECK(type == "vit" || type == "deit", "model_type '", type,
              "' is not read (vitcpp reads Hugging Face's ViT and DeiT, model_type 'vit' or 'deit')");
    // DeiT: a distillation token after the class token; ...WithTeacher's two heads
    // (cls_classifier, distillation_classifier) are averaged, DeiTForImageClassification's
    // one (classifier) reads the class token.
    c.dist_token = st.find(p + "embeddings.distillation_token") != nullptr;
    VIT_CHECK(c.dist_token == (type == "deit"), "model_type '", type, "' ", c.dist_token ? "has" : "needs",
              " a distillation token (", p, "embeddings.distillation_token)");
    c.head_dist = st.find("distillation_classifier.weight") != nullptr;
    c.act_layer = hf_activation(j.value("hidden_act", "gelu"));
    hf_read_sizes(j, c, 1e-12f);
    m.pos_resample = hf_pos_resample(j);
    c.qkv_bias = j.value("qkv_bias", true);
    c.class_token = true;
    c.global_pool = "token";
    c.fc_norm = false;
    c.pos_embed = "learn";
    const TensorInfo* head = st.find(c.head_dist ? "cls_classifier.weight" : "classifier.weight");
    c.num_classes = head && head->shape.size() == 2 ? head->shape[0] : 0;
    hf_preprocessing(st, c, m, "bilinear", "ViTImageProcessor");
    m.class_names = hf_class_names(j, c.num_classes);
  });

  const std::string emb = p + "embeddings.";
  m.sources["patch_embed.proj.weight"] = {emb + "patch_embeddings.projection.weight"};
  m.sources["patch_embed.proj.bias"] = {emb + "patch_embeddings.projection.bias"};
  m.sources["cls_token"] = {emb + "cls_token"};
  m.sources["dist_token"] = {emb + "distillation_token"};
  m.sources["pos_embed"] = {emb + "position_embeddings"};
  hf_block_sources(m, c.depth, p + "encoder.layer.",
                   {"layernorm_before.", "attention.attention.query.", "attention.attention.key.",
                    "attention.attention.value.", "attention.output.dense.", "layernorm_after.",
                    "intermediate.dense.", "output.dense."});
  m.sources["norm.weight"] = {p + "layernorm.weight"};
  m.sources["norm.bias"] = {p + "layernorm.bias"};
  const std::string head = c.head_dist ? "cls_classifier." : "classifier.";
  m.sources["head.weight"] = {head + "weight"};
  m.sources["head.bias"] = {head + "bias"};
  m.sources["head_dist.weight"] = {"distillation_classifier.weight"};
  m.sources["head_dist.bias"] = {"distillation_classifier.bias"};
  for (const char* wb : {"weight", "bias"}) {
    const std::string pooler = p + "pooler.dense." + wb;
    if (st.find(pooler)) m.skipped.insert(pooler);
  }
  if (!m.skipped.empty())
    m.notes.push_back("the pooler (" + p + "pooler.dense) is not used for classification: skipped");
  if (const std::string mask = emb + "mask_token"; st.find(mask)) {  // masked image modeling's
    m.skipped.insert(mask);
    m.notes.push_back("the mask token (" + mask + ") is not used for classification: skipped");
  }
  return m;
}

}  // namespace vit::detail
