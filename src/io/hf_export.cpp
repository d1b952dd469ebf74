// Hugging Face transformers' ViTForImageClassification layout (ViTModel for a model without
// a head; DeiT's classes for a model with a distillation token), written: the inverse of
// hf_format.cpp's mapping (timm's qkv rows q, k, v become query, key and value), with
// config.json and preprocessor_config.json as transformers' save_pretrained writes them.
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "core/file.h"
#include "core/resample.h"
#include "io/formats.h"
#include "io/pretrained.h"

namespace vit {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// What HF's ViT (class token, learned positions over every token, post-block LayerNorm on
// the class token, plain residual blocks) cannot express, in words; empty when it can.
std::vector<std::string> hf_unsupported(const ViTConfig& c) {
  std::vector<std::string> why;
  if (!c.class_token) why.push_back("no class token (class_token=false)");
  if (c.avg_pool()) why.push_back("average pooling (global_pool=avg)");
  if (c.map_pool())
    why.push_back("attention pooling (global_pool=map; transformers has it as SiglipVisionModel)");
  if (c.use_fc_norm()) why.push_back("fc_norm after pooling");
  if (c.reg_tokens > 0) why.push_back("register tokens (reg_tokens=" + std::to_string(c.reg_tokens) + ")");
  if (c.layer_scale()) why.push_back("LayerScale (init_values)");
  if (c.pre_norm) why.push_back("a LayerNorm before the blocks (pre_norm)");
  if (!c.patch_bias) why.push_back("no patch-embedding bias");
  if (c.patch_norm) why.push_back("LayerNorms around the patch projection (patch_norm)");
  if (c.attn_dim() != c.embed_dim)
    why.push_back("attention heads of their own width (dim_head=" + std::to_string(c.head_dim()) + ")");
  return why;
}

// One number when square (what transformers writes), else [height, width].
json hf_size(int64_t h, int64_t w) {
  return h == w ? json(h) : json({h, w});
}

json hf_config(const ViTConfig& c, const std::vector<std::string>& names) {
  json id2label = json::object(), label2id = json::object();
  for (int64_t i = 0; i < c.num_classes; ++i) {
    const std::string name = names.empty() ? std::to_string(i) : names[size_t(i)];
    id2label[std::to_string(i)] = name;
    label2id[name] = i;
  }
  json j = {{"architectures", {hf_class(c)}},
            {"model_type", c.dist_token ? "deit" : "vit"},
            {"hidden_size", c.embed_dim},
            {"num_hidden_layers", c.depth},
            {"num_attention_heads", c.num_heads},
            {"intermediate_size", c.mlp_dim},
            {"hidden_act", c.act_layer == "gelu_tanh" ? "gelu_pytorch_tanh" : c.act_layer},
            {"hidden_dropout_prob", detail::tidy(c.proj_drop_rate)},
            {"attention_probs_dropout_prob", detail::tidy(c.attn_drop_rate)},
            {"initializer_range", 0.02},
            {"layer_norm_eps", detail::tidy(c.norm_eps)},
            {"image_size", hf_size(c.img_h, c.img_w)},
            {"patch_size", hf_size(c.patch_h, c.patch_w)},
            {"num_channels", c.in_chans},
            {"qkv_bias", c.qkv_bias},
            {"encoder_stride", c.patch_h},
            {"torch_dtype", "float32"}};
  if (c.num_classes > 0) {
    j["id2label"] = id2label;
    j["label2id"] = label2id;
  }
  return j;
}

// ViTImageProcessor resizes to the input size; DeiTImageProcessor resizes both sides to
// input / crop_pct and center-crops the input size (vitcpp's squash crop).
json hf_preprocessor(const ViTConfig& c) {
  json j = {{"image_processor_type", c.dist_token ? "DeiTImageProcessor" : "ViTImageProcessor"},
            {"do_resize", true},
            {"size", {{"height", c.img_h}, {"width", c.img_w}}},
            {"resample", pil_code(filter_from_name(c.interpolation))},
            {"do_rescale", true},
            {"rescale_factor", 1.0 / 255.0},
            {"do_normalize", true},
            {"image_mean", detail::tidy(c.mean)},
            {"image_std", detail::tidy(c.std)}};
  if (c.dist_token) {
    j["size"] = {{"height", scale_size(c.img_h, c.crop_pct)}, {"width", scale_size(c.img_w, c.crop_pct)}};
    j["do_center_crop"] = true;
    j["crop_size"] = {{"height", c.img_h}, {"width", c.img_w}};
  }
  return j;
}

}  // namespace

// ViT's class, or DeiT's with a distillation token (two heads averaged: ...WithTeacher; one
// on the class token: DeiTForImageClassification).
const char* hf_class(const ViTConfig& c) {
  if (c.num_classes == 0) return c.dist_token ? "DeiTModel" : "ViTModel";
  if (!c.dist_token) return "ViTForImageClassification";
  return c.head_dist ? "DeiTForImageClassificationWithTeacher" : "DeiTForImageClassification";
}

std::vector<std::string> export_hf(const ViT& model, const std::string& dir,
                                   const std::vector<std::string>& names) {
  check_export_dir(dir);
  const ViTConfig& c = model.config();
  const std::vector<std::string> class_names = names_for_every_class(names, c.num_classes);
  const std::vector<std::string> why = hf_unsupported(c);
  if (!why.empty()) {
    std::string list;
    for (const auto& w : why) list += (list.empty() ? "" : ", ") + w;
    const bool timm_too = c.patch_norm || c.attn_dim() != c.embed_dim;  // export_timm
    throw Error(dir + ": not exported: Hugging Face's ViT cannot express " + list +
                (timm_too ? " (use --format onnx)" : " (use --format timm or --format onnx)"));
  }
  VIT_CHECK(class_names.empty() || int64_t(class_names.size()) == c.num_classes, dir, ": ",
            class_names.size(), " class names for ", c.num_classes, " classes");
  const float* base = model.fp32_params(dir + ": not exported");
  std::vector<std::string> notes;
  if (c.pos_embed != "learn")
    notes.push_back(
        "the fixed sin-cos position embedding is written as HF's learned one (same values): "
        "fine-tuning the export would train it");
  if (!c.dist_token && (c.crop_mode != "squash" || c.crop_pct != 1.0))
    notes.push_back("ViTImageProcessor resizes to the input size without cropping; this model's " +
                    c.crop_mode + " crop (crop_pct " + json(c.crop_pct).dump() +
                    ") is not in preprocessor_config.json");
  if (c.dist_token && c.crop_mode != "squash")
    notes.push_back("DeiTImageProcessor resizes both sides before its center crop; this model's " +
                    c.crop_mode + " crop resizes the shorter side (the same on square images)");

  const int64_t D = c.embed_dim;
  auto at = [&](const std::string& name) {
    const ParamSpec* s = model.table().find(name);
    VIT_CHECK(s, "HF export: the model has no parameter '", name, "'");
    return base + s->offset;
  };
  std::vector<TensorOut> t;
  auto put = [&](const std::string& hf, const std::string& ours) {
    t.push_back(
        {hf, model.table().find(ours) ? model.table().find(ours)->shape : Shape{}, DType::F32, at(ours)});
  };
  // ViTForImageClassification nests the encoder under vit. (DeiT's classes under deit.); a
  // model without a head is a bare ViTModel or DeiTModel (transformers adds its pooler, which
  // classification does not use).
  const std::string v = c.num_classes == 0 ? "" : c.dist_token ? "deit." : "vit.";
  const std::string emb = v + "embeddings.";
  put(emb + "cls_token", "cls_token");
  if (c.dist_token) put(emb + "distillation_token", "dist_token");
  // HF adds position embeddings to every token: with no_embed_class the class token's row is 0.
  std::vector<float> pos(size_t(c.num_tokens() * D), 0.f);
  std::copy(at("pos_embed"), at("pos_embed") + c.pos_embed_len() * D, pos.end() - c.pos_embed_len() * D);
  t.push_back({emb + "position_embeddings", {1, c.num_tokens(), D}, DType::F32, pos.data()});
  put(emb + "patch_embeddings.projection.weight", "patch_embed.proj.weight");
  put(emb + "patch_embeddings.projection.bias", "patch_embed.proj.bias");
  for (int64_t i = 0; i < c.depth; ++i) {
    const std::string b = "blocks." + std::to_string(i) + ".",
                      l = v + "encoder.layer." + std::to_string(i) + ".";
    const std::string a = l + "attention.";
    const char* qkv[] = {"query", "key", "value"};
    for (int64_t j = 0; j < 3; ++j) {  // rows [j*D, (j+1)*D) of timm's qkv
      t.push_back(
          {a + "attention." + qkv[j] + ".weight", {D, D}, DType::F32, at(b + "attn.qkv.weight") + j * D * D});
      if (c.qkv_bias)
        t.push_back({a + "attention." + qkv[j] + ".bias", {D}, DType::F32, at(b + "attn.qkv.bias") + j * D});
    }
    for (const std::string wb : {"weight", "bias"}) {
      put(l + "layernorm_before." + wb, b + "norm1." + wb);
      put(a + "output.dense." + wb, b + "attn.proj." + wb);
      put(l + "layernorm_after." + wb, b + "norm2." + wb);
      put(l + "intermediate.dense." + wb, b + "mlp.fc1." + wb);
      put(l + "output.dense." + wb, b + "mlp.fc2." + wb);
    }
  }
  put(v + "layernorm.weight", "norm.weight");
  put(v + "layernorm.bias", "norm.bias");
  if (c.num_classes > 0) {
    const std::string head = c.head_dist ? "cls_classifier." : "classifier.";
    put(head + "weight", "head.weight");
    put(head + "bias", "head.bias");
  }
  if (c.num_classes > 0 && c.head_dist) {
    put("distillation_classifier.weight", "head_dist.weight");
    put("distillation_classifier.bias", "head_dist.bias");
  }

  fs::create_directories(dir);
  write_safetensors((fs::path(dir) / "model.safetensors").string(), t, {{"format", "pt"}});
  write_file_atomic((fs::path(dir) / "config.json").string(), hf_config(c, class_names).dump(2) + "\n");
  write_file_atomic((fs::path(dir) / "preprocessor_config.json").string(), hf_preprocessor(c).dump(2) + "\n");
  return notes;
}

}  // namespace vit
