// Hugging Face transformers' ViT (ViTForImageClassification, ViTModel) and DeiT
// (DeiTForImageClassificationWithTeacher, DeiTForImageClassification, DeiTModel): config.json
// gives the architecture, preprocessor_config.json the preprocessing, and the names map onto
// timm's; query, key and value stack into one qkv, rows q, k, v as timm's.
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "core/check.h"
#include "core/json_number.h"
#include "core/resample.h"
#include "formats.h"

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

// A field of a transformers JSON file that may be absent or null (the default then); a value
// of another type is an error naming the file and the field.
bool flag(const json& j, const char* key, bool fallback, const char* file) {
  const json* v = field(j, key);
  return v ? json_bool(*v, std::string(file) + " " + key) : fallback;
}

std::string text(const json& j, const char* key, const char* fallback, const char* file) {
  const json* v = field(j, key);
  if (!v) return fallback;
  VIT_CHECK(v->is_string(), file, " ", key, " must be a string, got ", v->dump());
  return v->get<std::string>();
}

// image_mean or image_std: a list of one value per channel, or one number for all (transformers'
// normalize takes both); absent or null: `values` stays (the processor's default).
void channel_values(const json& p, const char* key, int64_t channels, std::vector<float>& values) {
  const json* v = field(p, key);
  if (!v) return;
  const std::string what = std::string("preprocessor_config.json ") + key;
  if (v->is_number()) {
    values.assign(size_t(channels), float(json_double(*v, what)));
    return;
  }
  VIT_CHECK(v->is_array(), what, " must be a number or a list of numbers, got ", v->dump());
  values.clear();
  for (const json& x : *v) values.push_back(float(json_double(x, what)));
  VIT_CHECK(int64_t(values.size()) == channels, what, " has ", values.size(), " values; the model has ",
            channels, " channels (config.json num_channels)");
}

// size or crop_size: {"height": H, "width": W}, or one number (older files). transformers'
// ViT and DeiT processors refuse the other forms ({"shortest_edge": N}, which resizes the
// shorter side keeping the aspect ratio), and so does this.
void height_width(const json& p, const char* key, int64_t& h, int64_t& w) {
  const json& s = p.at(key);
  const std::string what = std::string("preprocessor_config.json ") + key;
  if (s.is_number()) {
    h = w = json_int(s, what);
    return;
  }
  VIT_CHECK(
      s.is_object() && s.contains("height") && s.contains("width"), what, " ", s.dump(),
      " is not read: ViTImageProcessor and DeiTImageProcessor take {\"height\": H, \"width\": W} or one "
      "number (a resize of the shortest or longest edge keeping the aspect ratio is another processor's)");
  h = json_int(s.at("height"), what + ".height");
  w = json_int(s.at("width"), what + ".width");
}

// The processor's defaults where preprocessor_config.json leaves a field out (or has no file):
// transformers' ViTImageProcessor (resize to 224 x 224, bilinear, no crop) or
// DeiTImageProcessor (resize to 256 x 256, bicubic, center crop of 224 x 224).
struct Processor {
  std::string interpolation;
  int64_t size, crop;  // crop 0: none
};

// transformers' processors by name (a Fast variant too); nullopt for another.
std::optional<Processor> processor_named(const std::string& name) {
  if (name.rfind("DeiTImageProcessor", 0) == 0) return Processor{"bicubic", 256, 224};
  if (name.rfind("SiglipImageProcessor", 0) == 0) return Processor{"bicubic", 224, 0};
  if (name.rfind("ViTImageProcessor", 0) == 0) return Processor{"bilinear", 224, 0};
  return std::nullopt;
}

void read_preprocessor(const json& p, const Processor& proc, ViTConfig& c, Mapping& m) {
  const char* file = "preprocessor_config.json";
  const bool normalize = flag(p, "do_normalize", true, file), rescale = flag(p, "do_rescale", true, file);
  if (normalize) {
    channel_values(p, "image_mean", c.in_chans, c.mean);
    channel_values(p, "image_std", c.in_chans, c.std);
  } else {
    c.mean.assign(c.in_chans, 0.f);
    c.std.assign(c.in_chans, 1.f);
  }
  if (rescale) {
    const json* v = field(p, "rescale_factor");
    const double f = v ? json_double(*v, "preprocessor_config.json rescale_factor") : 1.0 / 255.0;
    VIT_CHECK(std::abs(f * 255.0 - 1.0) < 1e-6, "preprocessor_config.json rescale_factor ", f,
              " is not 1/255");
  } else {
    // Pixels stay 0..255: fold the missing 1/255 into mean and std.
    for (auto& v : c.mean) v /= 255.f;
    for (auto& v : c.std) v /= 255.f;
  }
  c.interpolation = proc.interpolation;
  if (const json* v = field(p, "resample"))
    c.interpolation = filter_name(filter_from_pil_code(json_int32(*v, "preprocessor_config.json resample")));
  int64_t h = proc.size, w = proc.size, ch = proc.crop, cw = proc.crop;
  if (field(p, "size")) height_width(p, "size", h, w);
  if (field(p, "crop_size")) height_width(p, "crop_size", ch, cw);
  // DeiTImageProcessor: resize both sides to `size`, then a center crop of `crop_size`, which
  // is vitcpp's squash at crop_pct crop_size / size.
  if (flag(p, "do_center_crop", proc.crop > 0, file) && flag(p, "do_resize", true, file)) {
    VIT_CHECK(ch > 0, "preprocessor_config.json do_center_crop without crop_size");
    VIT_CHECK(h >= ch && w >= cw && double(ch) / double(h) == double(cw) / double(w),
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
  if (field(p, "size") && flag(p, "do_resize", true, file) && (h != c.img_h || w != c.img_w))
    m.notes.push_back("preprocessor_config.json resizes to " + std::to_string(h) + "x" + std::to_string(w) +
                      ", the model takes " + std::to_string(c.img_h) + "x" + std::to_string(c.img_w) +
                      "; images are resized to the model's size");
}

}  // namespace

void hf_preprocessing(const SafeTensors& st, ViTConfig& c, Mapping& m, const std::string& processor) {
  // The processor AutoImageProcessor makes: the file's image_processor_type, else the model's;
  // its defaults fill the fields the file leaves out (or all, without the file). Another
  // processor's fields are read as the model's processor's, with a note.
  const std::optional<Processor> own = processor_named(processor);
  VIT_CHECK(own, "hf_preprocessing: no defaults for ", processor);
  Processor proc = *own;
  std::optional<json> pre = json_beside(st, "preprocessor_config.json");
  if (pre) {
    VIT_CHECK(pre->is_object(), "preprocessor_config.json is not a JSON object");
    const std::string type =
        text(*pre, "image_processor_type", processor.c_str(), "preprocessor_config.json");
    if (const std::optional<Processor> named = processor_named(type))
      proc = *named;
    else
      m.notes.push_back("preprocessor_config.json image_processor_type " + type +
                        ": its fields are read as " + processor + "'s");
  } else {
    m.notes.push_back("no preprocessor_config.json: " + processor + "'s defaults (" + proc.interpolation +
                      ", mean/std 0.5" + (proc.crop ? ", a center crop of 224 from 256" : "") + ")");
  }
  c.mean.assign(c.in_chans, 0.5f);
  c.std.assign(c.in_chans, 0.5f);
  c.crop_pct = 1.0;
  c.crop_mode = "squash";
  read_preprocessor(pre ? *pre : json::object(), proc, c, m);
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
  const json* e = field(j, "layer_norm_eps");
  c.norm_eps = e ? float(json_double(*e, "config.json layer_norm_eps")) : eps;
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
  const json* labels = field(j, "id2label");
  if (!labels || num_classes <= 0) return {};
  VIT_CHECK(labels->is_object(), "config.json id2label must be an object of index: name, got ",
            labels->dump());
  // transformers reads each key with int(key) and sizes the classifier by the count: keys 0 to
  // K - 1 for a classifier of K rows, each once.
  std::vector<std::string> names(static_cast<size_t>(num_classes));
  std::vector<bool> seen(static_cast<size_t>(num_classes));
  for (const auto& [k, v] : labels->items()) {
    int64_t i = -1;
    const auto [end, ec] = std::from_chars(k.data(), k.data() + k.size(), i);
    VIT_CHECK(ec == std::errc() && end == k.data() + k.size(), "config.json id2label key '", k,
              "' is not an integer");
    VIT_CHECK(i >= 0 && i < num_classes, "config.json id2label key ", i,
              " is not a class: the classifier has ", num_classes, " rows (0 to ", num_classes - 1, ")");
    VIT_CHECK(!seen[size_t(i)], "config.json id2label has class ", i, " twice");
    VIT_CHECK(v.is_string(), "config.json id2label[", i, "] must be a string, got ", v.dump());
    seen[size_t(i)] = true;
    names[size_t(i)] = v.get<std::string>();
  }
  VIT_CHECK(int64_t(labels->size()) == num_classes, "config.json id2label names ", labels->size(),
            " classes; the classifier has ", num_classes, " rows");
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
    VIT_CHECK(j.is_object(), "config.json is not a JSON object");
    const std::string type = text(j, "model_type", "vit", "config.json");
    VIT_CHECK(type == "vit" || type == "deit", "model_type '", type,
              "' is not read (vitcpp reads Hugging Face's ViT and DeiT, model_type 'vit' or 'deit')");
    // DeiT: a distillation token after the class token; ...WithTeacher's two heads
    // (cls_classifier, distillation_classifier) are averaged, DeiTForImageClassification's
    // one (classifier) reads the class token.
    c.dist_token = st.find(p + "embeddings.distillation_token") != nullptr;
    VIT_CHECK(c.dist_token == (type == "deit"), "model_type '", type, "' ", c.dist_token ? "has" : "needs",
              " a distillation token (", p, "embeddings.distillation_token)");
    c.head_dist = st.find("distillation_classifier.weight") != nullptr;
    c.act_layer = hf_activation(text(j, "hidden_act", "gelu", "config.json"));
    hf_read_sizes(j, c, 1e-12f);
    m.pos_resample = hf_pos_resample(j);
    c.qkv_bias = flag(j, "qkv_bias", true, "config.json");
    c.class_token = true;
    c.global_pool = "token";
    c.fc_norm = false;
    c.pos_embed = "learn";
    const TensorInfo* head = st.find(c.head_dist ? "cls_classifier.weight" : "classifier.weight");
    c.num_classes = head && head->shape.size() == 2 ? head->shape[0] : 0;
    if (const json* arch = field(j, "architectures"); c.num_classes == 0 && arch && arch->is_array())
      for (const json& a : *arch)
        if (a.is_string() && a.get<std::string>().find("ForImageClassification") != std::string::npos)
          m.notes.push_back("config.json names " + a.get<std::string>() +
                            ", but the file has no classifier: loaded without a head (features only)");
    hf_preprocessing(st, c, m, type == "deit" ? "DeiTImageProcessor" : "ViTImageProcessor");
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
