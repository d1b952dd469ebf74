#include "engine.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/threads.h"
#include "data/image.h"
#include "data/preprocess.h"
#include "io/checkpoint.h"
#include "io/onnx_export.h"
#include "ops/ops.h"
#include "viz/attention.h"

namespace vit::python {

namespace fs = std::filesystem;

void LoadArgs::adjust(ViTConfig& c) const {
  for (auto [rate, field] : {std::pair{drop_rate, &ViTConfig::drop_rate},
                             {drop_path_rate, &ViTConfig::drop_path_rate},
                             {attn_drop_rate, &ViTConfig::attn_drop_rate},
                             {proj_drop_rate, &ViTConfig::proj_drop_rate},
                             {pos_drop_rate, &ViTConfig::pos_drop_rate}})
    if (rate >= 0) c.*field = rate;
}

std::unique_ptr<Engine> Engine::load(const std::string& path, const LoadArgs& a) {
  LoadOptions lo;
  lo.adjust = [&a](ViTConfig& c) { a.adjust(c); };
  lo.img_h = a.img_h;
  lo.img_w = a.img_w;
  lo.num_classes = a.num_classes > 0 ? a.num_classes : 0;
  lo.labels_file = a.labels_file;
  lo.pos_resample = a.pos_resample;
  // A name: the file must be that model (a bare state dict takes its and its tag's settings).
  Pretrained p = a.model_name.empty() ? load_pretrained(path, lo)
                                      : load_pretrained_as(path, a.model_name, lo, "create_model(path)");
  std::unique_ptr<Engine> e(new Engine);
  e->m_ = std::move(p.model);
  e->format_ = p.format;
  e->pos_resample_ = p.pos_resample;
  e->stored_dtype_ = p.stored_dtype;
  e->class_names_ = std::move(p.class_names);
  e->notes_ = std::move(p.notes);
  // timm's num_classes=0: the same model without its head (features only).
  if (a.num_classes == 0 && e->config().num_classes > 0) return e->with_head(0, a.seed);
  return e;
}

std::unique_ptr<Engine> Engine::create(const std::string& name, const LoadArgs& a) {
  ViTConfig c = named_config(name);
  if (a.num_classes >= 0) c.num_classes = a.num_classes;
  if (a.img_h > 0) {
    c.img_h = a.img_h;
    c.img_w = a.img_w;
  }
  if (!a.global_pool.empty()) c.global_pool = a.global_pool;
  a.adjust(c);
  c.validate();
  std::unique_ptr<Engine> e(new Engine);
  e->m_ = std::make_unique<ViT>(c, false);
  e->m_->init_weights(a.seed);
  e->format_ = "vitcpp";
  if (!a.labels_file.empty()) e->class_names_ = read_labels(a.labels_file);
  VIT_CHECK(e->class_names_.empty() || int64_t(e->class_names_.size()) == c.num_classes, a.labels_file,
            " has ", e->class_names_.size(), " names; the model has ", c.num_classes, " classes");
  return e;
}

std::unique_ptr<Engine> Engine::adopt(std::unique_ptr<ViT> trained, std::vector<std::string> class_names) {
  std::unique_ptr<Engine> t(new Engine);
  t->m_ = std::move(trained);
  t->format_ = "vitcpp";
  t->class_names_ = std::move(class_names);
  return t->copy_with(t->config(), false, 0);  // without the training buffers
}

void Engine::prepare(int64_t B) {
  if (m_->infer_dtype() != "fp32") return;
  if (ops::packed_linear_preferred(B * config().num_tokens()))
    m_->pack_weights();
  else
    m_->unpack_weights();
}

const float* Engine::fp32() const {
  m_->unpack_weights();  // exact: packing moves the values, it does not round them
  return m_->fp32_params("the model's weights");
}

int64_t Engine::num_params() const {
  int64_t n = 0;
  for (const ParamSpec& s : m_->table().specs()) n += s.numel();
  return n;
}

void Engine::logits(const float* x, int64_t B, float* out) {
  VIT_CHECK(m_->has_head(), "the model has no classifier head (num_classes 0): use forward_features");
  prepare(B);
  m_->infer(x, B, nullptr, out);
}

void Engine::features(const float* x, int64_t B, const uint8_t* mask, float* pooled, float* tokens) {
  prepare(B);
  m_->infer_features(x, B, mask, pooled, tokens);
}

void Engine::attention(const float* x, int64_t B, float* attn, float* pool_attn) {
  prepare(B);
  m_->infer(x, B, nullptr, nullptr, attn, pool_attn);
}

void Engine::intermediates(const float* x, int64_t B, const uint8_t* mask, const std::vector<int64_t>& ids,
                           float* out, float* tokens) {
  const ViTConfig& c = config();
  std::vector<float*> blocks(size_t(c.depth), nullptr);
  const int64_t each = B * c.num_tokens() * c.embed_dim;
  for (size_t k = 0; k < ids.size(); ++k) {
    VIT_CHECK(ids[k] >= 0 && ids[k] < c.depth, "block index ", ids[k], " out of range: the model has ",
              c.depth, " blocks");
    VIT_CHECK(!blocks[size_t(ids[k])], "block index ", ids[k], " given twice");
    blocks[size_t(ids[k])] = out + int64_t(k) * each;
  }
  prepare(B);
  m_->infer_blocks(x, B, mask, blocks, tokens);
}

void Engine::maps(const float* x, int64_t B, const std::string& method, int64_t layer, int64_t head,
                  float* maps) {
  const ViTConfig& c = config();
  const int64_t T = c.num_tokens(), H = c.num_heads, N = c.num_patches();
  VIT_CHECK(layer >= -c.depth && layer < c.depth, "layer ", layer, " out of range: the model has ", c.depth,
            " blocks (0 to ", c.depth - 1, ", or -1 for the last)");
  VIT_CHECK(head >= -1 && head < H, "head ", head, " out of range: the model has ", H, " heads (0 to ", H - 1,
            "; -1: their mean)");
  if (layer < 0) layer += c.depth;
  std::vector<float> attn(size_t(c.depth * B * H * T * T)), pool(c.map_pool() ? size_t(B * H * T) : 0);
  attention(x, B, attn.data(), c.map_pool() ? pool.data() : nullptr);
  for (int64_t b = 0; b < B; ++b) {
    const std::vector<float> m =
        viz::attention_map(attn.data(), c, B, b, method, layer, head, c.map_pool() ? pool.data() : nullptr);
    std::copy_n(m.data(), N, maps + b * N);
  }
}

void Engine::set_params(const std::vector<std::pair<std::string, const float*>>& values) {
  const WeightsRewrite rewrite;  // a fork sees the old weights or the new, in their dtype
  const std::string was = dtype();
  set_dtype("fp32");  // unpacked, and the old weights' bf16 or int8 copies dropped
  float* p = m_->params().data();
  for (const auto& [name, v] : values) {
    const ParamSpec* s = m_->table().find(name);
    VIT_CHECK(s, "set_params: the model has no parameter '", name, "'");
    std::copy_n(v, s->numel(), p + s->offset);
  }
  if (was != "fp32") set_dtype(was);
}

void Engine::set_dtype(const std::string& dtype) {
  VIT_CHECK(dtype == "fp32" || dtype == "bf16" || dtype == "int8",
            "dtype must be 'float32', 'bfloat16' or 'int8', got '", dtype, "'");
  m_->unpack_weights();
  m_->set_infer_dtype(dtype);
}

std::unique_ptr<Engine> Engine::copy_with(const ViTConfig& cfg, bool resample, uint64_t seed) const {
  const ViTConfig& old = config();
  const float* src = fp32();
  std::unique_ptr<Engine> e(new Engine);
  e->m_ = std::make_unique<ViT>(cfg, false);
  e->m_->init_weights(seed);  // what is not copied: a new head (timm's init), a sin-cos table
  float* dst = e->m_->params().data();
  for (const ParamSpec& s : e->m_->table().specs()) {
    const ParamSpec* o = m_->table().find(s.name);
    if (!o || is_head_param(s.name) != is_head_param(o->name)) continue;
    if (o->shape == s.shape && !(resample && s.name == "pos_embed")) {
      std::copy_n(src + o->offset, s.numel(), dst + s.offset);
    } else if (resample && s.name == "pos_embed" && cfg.pos_embed == "learn") {
      const int64_t prefix = old.no_embed_class ? 0 : old.num_prefix_tokens();
      if (pos_resample_ == "timm")
        resample_pos_embed(src + o->offset, prefix, old.grid_h(), old.grid_w(), old.embed_dim, dst + s.offset,
                           cfg.grid_h(), cfg.grid_w());
      else
        resample_pos_embed_hf(src + o->offset, prefix, old.grid_h(), old.grid_w(), old.embed_dim,
                              dst + s.offset, cfg.grid_h(), cfg.grid_w(), pos_resample_ == "hf-scale");
    }
  }
  e->format_ = format_;
  e->pos_resample_ = pos_resample_;
  e->class_names_ =
      int64_t(class_names_.size()) == cfg.num_classes ? class_names_ : std::vector<std::string>{};
  e->notes_ = notes_;
  e->set_dtype(dtype());
  return e;
}

std::unique_ptr<Engine> Engine::clone() const {
  const float* src = fp32();
  std::unique_ptr<Engine> e(new Engine);
  e->m_ = std::make_unique<ViT>(config(), /*randomize=*/false);
  std::copy_n(src, m_->table().total(), e->m_->params().data());
  e->format_ = format_;
  e->pos_resample_ = pos_resample_;
  e->stored_dtype_ = stored_dtype_;
  e->class_names_ = class_names_;
  e->notes_ = notes_;
  e->set_dtype(dtype());
  return e;
}

std::unique_ptr<Engine> Engine::with_head(int64_t num_classes, uint64_t seed) const {
  VIT_CHECK(num_classes >= 0, "num_classes must be >= 0 (0: no head), got ", num_classes);
  ViTConfig c = config();
  c.num_classes = num_classes;
  c.validate();
  std::unique_ptr<Engine> e = copy_with(c, false, seed);
  if (num_classes > 0) {  // a head of zeros: every class equal until fine-tuning moves it
    float* p = e->m_->params().data();
    for (const ParamSpec& s : e->m_->table().specs())
      if (is_head_param(s.name)) std::fill_n(p + s.offset, s.numel(), 0.0f);
  }
  return e;
}

std::unique_ptr<Engine> Engine::resized(int64_t img_h, int64_t img_w) const {
  ViTConfig c = config();
  c.img_h = img_h;
  c.img_w = img_w;
  c.validate();
  return copy_with(c, true, 0);
}

std::vector<Engine::Param> Engine::param_shapes(const std::vector<std::string>& prefixes) const {
  std::vector<Param> out;
  for (const ParamSpec& s : m_->table().specs())
    if (prefixes.empty() || std::any_of(prefixes.begin(), prefixes.end(),
                                        [&](const std::string& f) { return s.name.rfind(f, 0) == 0; }))
      out.push_back({s.name, std::vector<int64_t>(s.shape.begin(), s.shape.end()), nullptr});
  return out;
}

std::vector<Engine::Param> Engine::params(const std::vector<std::string>& prefixes) const {
  std::vector<Param> out = param_shapes(prefixes);
  // only the blocks' matrices are ever packed (ViT::pack_weights)
  const bool blocks =
      std::any_of(out.begin(), out.end(), [](const Param& p) { return p.name.rfind("blocks.", 0) == 0; });
  const float* base = blocks ? fp32() : m_->params().data();
  for (Param& p : out) p.data = base + m_->table().find(p.name)->offset;
  return out;
}

// An int8 model is saved as vit quantize writes it (format "vitcpp"; it reloads in int8, the same
// bits), or in float32 with a note (timm's and transformers' layouts have no int8).
std::vector<std::string> Engine::save(const std::string& dir, const std::string& format, bool fp32) const {
  this->fp32();
  const bool int8 = dtype() == "int8";
  if (format == "timm" || format == "hf") {
    std::vector<std::string> notes =
        format == "timm" ? export_timm(*m_, dir, class_names_) : export_hf(*m_, dir, class_names_);
    if (int8)
      notes.push_back(
          std::string("the int8 model is written in float32 (the weights it keeps beside its int8 ones: "
                      "int8 times their scales when it was loaded from an int8 file): ") +
          (format == "timm" ? "timm" : "transformers") + " has no int8 checkpoint layout");
    return notes;
  }
  VIT_CHECK(format == "vitcpp", "format must be 'timm', 'hf' or 'vitcpp', got '", format, "'");
  check_export_dir(dir);  // a run's model.safetensors would be read in place of its checkpoints
  fs::create_directories(dir);
  std::map<std::string, std::string> meta;
  if (!class_names_.empty()) meta["class_names"] = nlohmann::json(class_names_).dump();
  const std::string path = (fs::path(dir) / "model.safetensors").string();
  if (int8 && !fp32)
    save_int8_checkpoint(path, *m_, meta);
  else
    save_checkpoint(path, *m_, meta);
  return {};
}

void Engine::set_origin(std::string format, std::string pos_resample, std::vector<std::string> notes) {
  VIT_CHECK(pos_resample == "timm" || pos_resample == "hf" || pos_resample == "hf-scale",
            "pos_resample must be timm, hf or hf-scale, got '", pos_resample, "'");
  format_ = std::move(format);
  pos_resample_ = std::move(pos_resample);
  notes_ = std::move(notes);
}

void Engine::export_onnx(const std::string& path, bool int8) const {
  fp32();
  vit::export_onnx(*m_, path, class_names_, -1, int8);
}

void set_threads(int n) {
  set_process_threads(n);
}

int threads() {
  static const int fallback = default_threads();  // read once, at the first call
  const int n = process_threads();
  return std::min(n > 0 ? n : fallback, thread_limit());  // what calls run on (exact_teams)
}

}  // namespace vit::python
