#include "io/pretrained.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <new>
#include <nlohmann/json.hpp>
#include <set>

#include "core/check.h"
#include "core/file.h"
#include "core/json_parse.h"
#include "core/resample.h"
#include "core/utf8.h"
#include "formats.h"
#include "io/checkpoint.h"

namespace vit {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string weights_file(const std::string& path, bool last) {
  if (!fs::is_directory(path)) {
    VIT_CHECK(!last, "--last: ", path, " is a file; --last picks last.safetensors in a run directory");
    return path;
  }
  const fs::path dir(path), model = dir / "model.safetensors", run = dir / (last ? "last" : "best");
  if (!last && fs::exists(model)) return model.string();
  VIT_CHECK(fs::exists(run.string() + ".safetensors"), path, ": a directory without ",
            last ? "last.safetensors (--last wants a vit train run directory)"
                 : "model.safetensors (timm, Hugging Face) or best.safetensors (a vit train run)");
  return run.string() + ".safetensors";
}

std::string detect_format(const SafeTensors& st) {
  // transformers' names: MODEL.embeddings.patch_embeddings.* (vit., deit.; also dinov2., beit.
  // and the like, whose config.json then names the model_type vitcpp does not read), bare, or
  // SigLIP's vision_model.
  for (const auto& t : st.tensors()) {
    const size_t at = t.name.find("embeddings.patch_embeddings.");
    if ((at == 0 || (at != std::string::npos && t.name[at - 1] == '.' &&
                     t.name.find('.') == at - 1)) ||  // one name before it, no more
        t.name.rfind("vit.embeddings.", 0) == 0 ||
        t.name.rfind("deit.embeddings.", 0) == 0 ||
        t.name.rfind("vision_model.embeddings.patch_embedding.", 0) == 0)
      return "hf";
  }
  if (st.metadata().count("vit_config")) return "vitcpp";
  if (detail::is_vit_pytorch(st)) return "vit-pytorch";
  // A vitcpp config.json (mlp_dim) rather than timm's (architecture, model_args).
  if (auto j = detail::json_beside(st, "config.json"); j && j->contains("mlp_dim")) return "vitcpp";
  return "timm";
}

std::vector<std::string> read_labels(const std::string& path) {
  check_not_directory(path);
  VIT_CHECK(std::ifstream(path).good(), path, ": cannot open the labels file");
  return read_lines(path, "class names go into checkpoints and JSON as text");
}

namespace {
// The prefix rows copied, the grid resized by resize(planes [C, gh, gw], out [C, nh, nw]):
// tokens [g, C] <-> planes [C, g] around it, as permute(0, 3, 1, 2) in timm and transformers.
template <typename F>
void resample_grid(const float* src, int64_t prefix, int64_t gh, int64_t gw, int64_t C, float* dst,
                   int64_t nh, int64_t nw, F&& resize) {
  std::copy(src, src + prefix * C, dst);
  std::vector<float> planes(C * gh * gw), out(C * nh * nw);
  const float* grid = src + prefix * C;
  for (int64_t t = 0; t < gh * gw; ++t)
    for (int64_t c = 0; c < C; ++c) planes[c * gh * gw + t] = grid[t * C + c];
  resize(planes.data(), out.data());
  float* dgrid = dst + prefix * C;
  for (int64_t t = 0; t < nh * nw; ++t)
    for (int64_t c = 0; c < C; ++c) dgrid[t * C + c] = out[c * nh * nw + t];
}
}  // namespace

void resample_pos_embed(const float* src, int64_t prefix, int64_t gh, int64_t gw, int64_t C, float* dst,
                        int64_t nh, int64_t nw, bool bilinear) {
  resample_grid(src, prefix, gh, gw, C, dst, nh, nw, [&](const float* in, float* out) {
    if (bilinear)
      resize_bilinear(in, C, gh, gw, out, nh, nw);
    else
      resize_planes_aa(in, C, gh, gw, out, nh, nw, Filter::Bicubic);
  });
}

void resample_pos_embed_hf(const float* src, int64_t prefix, int64_t gh, int64_t gw, int64_t C, float* dst,
                           int64_t nh, int64_t nw, bool scale_factor) {
  resample_grid(src, prefix, gh, gw, C, dst, nh, nw, [&](const float* in, float* out) {
    // Before 4.45: scale_factor = ((nh + 0.1) / sqrt(N), (nw + 0.1) / sqrt(N)), sqrt(N) the
    // square grid's side (here each axis's own, so that a non-square grid resamples too).
    if (scale_factor)
      resize_bicubic(in, C, gh, gw, out, nh, nw, (double(nh) + 0.1) / double(gh),
                     (double(nw) + 0.1) / double(gw));
    else
      resize_bicubic(in, C, gh, gw, out, nh, nw);
  });
}

namespace {

// LoadOptions::infer_dtype: each block's products prepared once its four weights are read.
class BlockPreparer {
 public:
  BlockPreparer(ViT& model, std::string dtype) : model_(model), dtype_(std::move(dtype)) {}
  void loaded(const std::string& param) {
    if (dtype_.empty() || !int8_stored(param)) return;  // int8_stored: the four products' names
    if (++products_ < 4) return;
    model_.prepare_next_infer_block(dtype_);
    products_ = 0;
  }
  void finish() {
    if (!dtype_.empty()) model_.set_infer_dtype(dtype_, /*release_fp32=*/true);
  }

 private:
  ViT& model_;
  const std::string dtype_;
  int products_ = 0;  // of the block being read
};

detail::Mapping vitcpp_mapping(const SafeTensors& st) {
  detail::Mapping m;
  m.cfg = checkpoint_config(st);
  for (const auto& t : st.tensors()) {
    // A product's scale is read with it (copy_weights); one beside a weight of another
    // integer type too, so that the weight's type is the error.
    if (t.dtype == DType::I8 || (t.dtype == DType::U8 && st.find(t.name + "_scale")))
      m.skipped.insert(t.name + "_scale");
    m.sources[t.name] = {t.name};
  }
  if (is_int8_checkpoint(st)) {
    m.stored_dtype = "int8";
    m.notes.push_back(
        "int8 checkpoint (vit quantize): read in fp32 (the int8 weights times their scales); inference "
        "(eval, predict, serve, Python) runs it in int8 as stored unless --dtype says otherwise");
  }
  if (auto it = st.metadata().find("class_names"); it != st.metadata().end()) {
    try {
      m.class_names = parse_json(it->second, st.path() + ": class_names").get<std::vector<std::string>>();
    } catch (const json::exception&) {
      throw Error(st.path() + ": metadata class_names is not a JSON list of strings");
    }
  }
  return m;
}

// The shape of the file tensors stacked along dim 0.
Shape stacked_shape(const SafeTensors& st, const std::vector<std::string>& names) {
  Shape s;
  for (const auto& n : names) {
    const TensorInfo* t = st.find(n);
    if (!t) return {};
    if (s.empty()) {
      s = t->shape;
    } else {
      if (t->shape.size() != s.size() || t->shape.empty()) return {-1};
      for (size_t d = 1; d < s.size(); ++d)
        if (t->shape[d] != s[d]) return {-1};
      s[0] += t->shape[0];
    }
  }
  return s;
}

// A shape without its leading 1s: a file's [N, D] (an nn.Embedding) holds pos_embed's [1, N, D].
Shape squeezed(Shape s) {
  while (s.size() > 1 && s.front() == 1) s.erase(s.begin());
  return s;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : " + ") + x;
  return s;
}

// The note's words for each way of resampling pos_embed.
std::string resample_words(const std::string& how) {
  if (how == "timm") return "as timm's resample_abs_pos_embed (bicubic, antialiased)";
  if (how == "timm-bilinear") return "as timm's loader does for FlexiViT (bilinear, not antialiased)";
  if (how == "hf") return "as transformers' interpolate_pos_encoding (bicubic to the size, 4.45 and later)";
  return "as transformers' interpolate_pos_encoding before 4.45 (bicubic by scale_factor (n + 0.1) / n)";
}

// num_heads is for a file that does not say; one that does is not overruled (its attention
// was trained with its own split), and the one given is said to be unused.
void note_unused_heads(const LoadOptions& opt, const ViTConfig& c, std::vector<std::string>& notes) {
  if (opt.num_heads > 0 && opt.num_heads != c.num_heads)
    notes.push_back("num_heads " + std::to_string(opt.num_heads) + " not used: the checkpoint's config or " +
                    "architecture gives " + std::to_string(c.num_heads) + " heads");
}

// How --img-size resamples pos_embed: the checkpoint's own way, or the one asked for. --pos-resample
// hf on a transformers checkpoint: its release's form; on others: today's. timm on a FlexiViT:
// timm's loader's bilinear.
std::string resample_how(const LoadOptions& opt, const detail::Mapping& m) {
  VIT_CHECK(opt.pos_resample.empty() || opt.pos_resample == "timm" || opt.pos_resample == "hf",
            "pos_resample must be 'timm' or 'hf', got '", opt.pos_resample, "'");
  if (opt.pos_resample.empty() || m.pos_resample.starts_with(opt.pos_resample)) return m.pos_resample;
  return opt.pos_resample;
}

// How a model loaded with `how` resamples at a later size change (Python's set_input_size,
// dynamic_img_size): timm's set_input_size is bicubic for FlexiViT too.
std::string later_resample(const std::string& how) {
  return how == "timm-bilinear" ? "timm" : how;
}

// A fixed (sin-cos) position table for the model's own grid.
void init_fixed_pos_embed(const ViTConfig& c, const ParamSpec& s, float* dst) {
  if (c.pos_embed == "sincos2d")
    sincos2d_pos_embed(dst, s.shape[1] - c.num_patches(), c.grid_h(), c.grid_w(), s.shape[2]);
  else
    sincos_pos_embed(dst, s.shape[1], s.shape[2]);
}

}  // namespace

ViTConfig named_config(const std::string& name) {
  const detail::TimmArchitecture* a = detail::find_timm_architecture(name);  // with or without a tag
  if (a && *a->unsupported)
    throw Error("timm's " + name + " " + a->unsupported + ": vitcpp does not build it");
  // Every runnable timm name as timm builds it (its table row); vitcpp's presets otherwise.
  if (auto c = detail::timm_architecture_config(name)) return *c;
  return preset(name);
}

namespace {
// The model c describes, for the file `file` of st: its config far larger than its weights
// (hidden_size 8192 over 8-wide tensors) said "out of memory: lower --batch-size", naming
// neither the file nor the mismatch.
std::unique_ptr<ViT> model_for(const ViTConfig& c, const SafeTensors& st, const std::string& file) {
  try {
    return std::make_unique<ViT>(c, /*randomize=*/false);
  } catch (const std::bad_alloc&) {
    int64_t wanted = 0, stored = 0;
    const ParamTable described(c);
    for (const auto& s : described.specs()) wanted += s.numel();
    for (const auto& t : st.tensors())
      stored += int64_t((t.end - t.begin) / std::max<size_t>(1, dtype_size(t.dtype)));
    // The config is to blame only where it asks for more than the file holds (the same
    // counts: memory is short, as for any model).
    if (wanted <= stored) throw;
    throw Error(detail::concat(file, ": out of memory making the model its config describes (", wanted,
                               " parameters; the file holds ", stored, " values): check the config"));
  }
}

// Every tensor in the file must land somewhere: one that does not is a layer vitcpp lacks.
void check_every_tensor_lands(const SafeTensors& st, const detail::Mapping& m, const ParamTable& table,
                              const std::string& file, const std::string& format) {
  std::set<std::string> used = m.skipped;
  for (const auto& s : table.specs())
    if (auto it = m.sources.find(s.name); it != m.sources.end())
      used.insert(it->second.begin(), it->second.end());
  std::vector<std::string> unsupported;
  for (const auto& t : st.tensors())
    if (!used.count(t.name)) unsupported.push_back(t.name + " " + shape_str(t.shape));
  if (unsupported.empty()) return;
  std::string list;
  for (size_t i = 0; i < unsupported.size() && i < 12; ++i) list += "\n  " + unsupported[i];
  if (unsupported.size() > 12) list += "\n  ... and " + std::to_string(unsupported.size() - 12) + " more";
  throw Error(file + ": " + std::to_string(unsupported.size()) + " tensor(s) of this " + format +
              " checkpoint have no place in a vitcpp ViT (a layer vitcpp does not support):" + list);
}
}  // namespace

Pretrained load_pretrained(const std::string& path, const LoadOptions& opt) {
  Pretrained out;
  out.file = weights_file(path, opt.last);
  SafeTensors st = SafeTensors::open(out.file, /*populate=*/false);  // tensor by tensor below
  // timm's clean_state_dict: the prefixes of a model saved inside torch's DDP wrapper
  // (module.) or torch.compile's (_orig_mod.) are not the model's names.
  st.rename([](const std::string& name) -> std::optional<std::string> {
    std::string_view n = name;
    for (std::string_view prefix : {"module.", "_orig_mod."})
      if (n.starts_with(prefix)) n.remove_prefix(prefix.size());
    return std::string(n);
  });
  // A vit train state (for --resume) holds the weights as param.*, beside the optimizer's
  // moments and the EMA: its weights are the model, as timm reads a training checkpoint's
  // state_dict (a run stopped in its first epoch has nothing else).
  if (st.metadata().count("vitcpp_state")) {
    const bool ema = std::any_of(st.tensors().begin(), st.tensors().end(),
                                 [](const TensorInfo& t) { return t.name.starts_with("ema."); });
    st.rename([](const std::string& name) -> std::optional<std::string> {
      if (!name.starts_with("param.")) return std::nullopt;
      return name.substr(6);
    });
    VIT_CHECK(!st.tensors().empty(), out.file, ": a vit train state without weights (param.*)");
    out.notes.push_back(
        "a vit train state: its weights (param.*)" +
        std::string(ema ? ", not its model EMA (in last_ema.safetensors after an epoch)" : ""));
  }
  out.format = detect_format(st);
  detail::Mapping m = out.format == "hf"       ? detail::hf_mapping(st)
                      : out.format == "vitcpp" ? vitcpp_mapping(st)
                      : out.format == "vit-pytorch"
                          ? detail::vit_pytorch_mapping(st, opt.num_heads)
                          : detail::timm_mapping(st, opt.num_heads, opt.architecture);
  ViTConfig c = m.cfg;
  note_unused_heads(opt, c, m.notes);
  const std::string how = resample_how(opt, m);
  // The file's own patch grid, for resampling the position embedding (a patch size of 0 from
  // a config.json would divide by zero here before validate() said so; found by
  // fuzz_pretrained_config).
  VIT_CHECK(c.patch_h > 0 && c.patch_w > 0, out.file, ": config: patch_size must be positive, got ",
            c.patch_h, "x", c.patch_w);
  const int64_t gh0 = c.grid_h(), gw0 = c.grid_w();
  if (opt.img_h > 0) {
    c.img_h = opt.img_h;
    c.img_w = opt.img_w > 0 ? opt.img_w : opt.img_h;
  }
  const bool new_head = opt.num_classes > 0 && opt.num_classes != c.num_classes;
  if (opt.num_classes > 0) c.num_classes = opt.num_classes;
  // c.num_classes 0: a checkpoint without a classifier head (timm's num_classes=0, or a
  // ViTModel) gives a model that only infers features (ViT::infer_features).
  if (opt.adjust) opt.adjust(c);
  try {
    c.validate();
  } catch (const Error& e) {
    throw Error(out.file + ": " + e.what());
  }
  out.config = c;
  const ParamTable table(c);

  check_every_tensor_lands(st, m, table, out.file, out.format);
  // What a new input size does to the position embedding, said by the load and by a config alone.
  const bool regrid = c.grid_h() != gh0 || c.grid_w() != gw0;
  const std::string regrid_note = [&] {
    const std::string grids = "from a " + std::to_string(gh0) + "x" + std::to_string(gw0) + " grid to " +
                              std::to_string(c.grid_h()) + "x" + std::to_string(c.grid_w());
    return c.pos_embed != "learn" ? "pos_embed: the fixed " + c.pos_embed + " table computed anew " + grids
                                  : "pos_embed resampled " + grids + " " + resample_words(how);
  }();
  if (opt.config_only) {
    if (regrid) m.notes.push_back(regrid_note);
    out.class_names = new_head ? std::vector<std::string>{} : m.class_names;
    out.notes.insert(out.notes.end(), m.notes.begin(), m.notes.end());
    out.pos_resample = later_resample(how);
    out.stored_dtype = m.stored_dtype;
    return out;
  }
  // Not randomized: the loop below writes every parameter (from the file, resampled, or the
  // zero head) or throws.
  std::unique_ptr<ViT> model = model_for(c, st, out.file);
  const std::string dtype = opt.infer_dtype == "stored" ? m.stored_dtype : opt.infer_dtype;
  BlockPreparer blocks(*model, dtype == "fp32" ? "" : dtype);

  for (const auto& s : table.specs()) {
    float* dst = model->params().data() + s.offset;
    if (new_head && is_head_param(s.name)) {
      std::fill(dst, dst + s.numel(), 0.f);  // the paper's zero-initialized head
      continue;
    }
    if (auto f = m.fills.find(s.name); f != m.fills.end()) {
      f->second(dst);
      continue;
    }
    if (s.name == "pos_embed" && c.pos_embed != "learn" && !m.sources.count(s.name)) {
      init_fixed_pos_embed(c, s, dst);  // a fixed table the file does not store (SimpleViT's)
      continue;
    }
    auto it = m.sources.find(s.name);
    const std::vector<std::string> srcs = it == m.sources.end() ? std::vector<std::string>{} : it->second;
    const Shape shape = stacked_shape(st, srcs);
    VIT_CHECK(!srcs.empty() && !shape.empty(), out.file, ": missing tensor '",
              srcs.empty() ? s.name : joined(srcs), "' (", s.name, " ", shape_str(s.shape), ")");
    VIT_CHECK(shape != Shape{-1}, out.file, ": tensors ", joined(srcs), " do not stack into ", s.name);
    if (s.name == "pos_embed" && regrid) {
      const int64_t prefix = c.no_embed_class ? 0 : c.num_prefix_tokens();
      const Shape want = {1, prefix + gh0 * gw0, c.embed_dim};
      VIT_CHECK(squeezed(shape) == squeezed(want), out.file, ": tensor 'pos_embed' has shape ",
                shape_str(shape), ", expected ", shape_str(want));
      if (c.pos_embed != "learn") {
        init_fixed_pos_embed(c, s, dst);
      } else {
        const std::vector<float> pos = st.to_float(srcs[0]);
        if (how.starts_with("timm"))
          resample_pos_embed(pos.data(), prefix, gh0, gw0, c.embed_dim, dst, c.grid_h(), c.grid_w(),
                             how == "timm-bilinear");
        else
          resample_pos_embed_hf(pos.data(), prefix, gh0, gw0, c.embed_dim, dst, c.grid_h(), c.grid_w(),
                                how == "hf-scale");
      }
      m.notes.push_back(regrid_note);
      continue;
    }
    VIT_CHECK(squeezed(shape) == squeezed(s.shape), out.file, ": tensor '", joined(srcs), "' has shape ",
              shape_str(shape), ", the model expects ", shape_str(s.shape), " for ", s.name);
    for (const auto& n : srcs) {
      st.populate(n);
      copy_weights(st, n, dst);
      st.release(n);  // the file's pages go as the model's fill: the peak is one copy, not two
      dst += numel(st.at(n).shape);
    }
    blocks.loaded(s.name);
  }
  blocks.finish();
  if (new_head) {
    m.notes.push_back("new head: " + std::to_string(c.num_classes) + " classes, zero-initialized");
    m.class_names.clear();
  }
  out.class_names = opt.labels_file.empty() ? m.class_names : read_labels(opt.labels_file);
  if (!opt.labels_file.empty())
    VIT_CHECK(int64_t(out.class_names.size()) == c.num_classes, opt.labels_file, " has ",
              out.class_names.size(), " names; the model has ", c.num_classes, " classes");
  out.notes.insert(out.notes.end(), m.notes.begin(), m.notes.end());
  out.pos_resample = later_resample(how);
  out.stored_dtype = m.stored_dtype;
  out.model = std::move(model);
  return out;
}

namespace {
// timm builds int(embed_dim * mlp_ratio) hidden units, in doubles: M / D can come out a unit
// short (int(100 * 1.15) is 114), and timm then refused the export's weights. The smallest
// double at or above M / D that gives M back.
double timm_mlp_ratio(int64_t D, int64_t M) {
  double r = double(M) / double(D);
  while (int64_t(double(D) * r) < M) r = std::nextafter(r, double(M));
  return r;
}
}  // namespace

std::string timm_config_json(const ViTConfig& c, const std::vector<std::string>& class_names) {
  auto size = [](int64_t h, int64_t w) { return h == w ? json(h) : json({h, w}); };
  // A registered timm architecture with the model's LayerNorm eps, which model_args cannot
  // set; they give every dimension, so any such name builds the model.
  const std::string arch = detail::timm_architecture_for(c.embed_dim, c.norm_eps, c.head_dist);
  json args = {{"img_size", size(c.img_h, c.img_w)},
               {"patch_size", size(c.patch_h, c.patch_w)},
               {"in_chans", c.in_chans},
               {"num_classes", c.num_classes},
               {"global_pool", c.global_pool},
               {"embed_dim", c.embed_dim},
               {"depth", c.depth},
               {"num_heads", c.num_heads},
               {"mlp_ratio", timm_mlp_ratio(c.embed_dim, c.mlp_dim)},
               {"qkv_bias", c.qkv_bias},
               {"class_token", c.class_token},
               {"reg_tokens", c.reg_tokens},
               {"no_embed_class", c.no_embed_class},
               {"pre_norm", c.pre_norm},
               {"fc_norm", c.use_fc_norm()},
               {"init_values", c.layer_scale() ? detail::tidy(c.init_values) : json(nullptr)}};
  if (c.act_layer != "gelu") args["act_layer"] = c.act_layer;     // the name's own is GELU
  if (c.pool_include_prefix) args["pool_include_prefix"] = true;  // timm 1.0's pool()
  json pcfg = {{"input_size", {c.in_chans, c.img_h, c.img_w}},
               {"interpolation", c.interpolation},
               {"crop_pct", c.crop_pct},
               {"crop_mode", c.crop_mode},
               {"mean", detail::tidy(c.mean)},
               {"std", detail::tidy(c.std)},
               {"num_classes", c.num_classes},
               {"classifier", c.head_dist ? json({"head", "head_dist"}) : json("head")}};
  // first_conv makes timm's loader adapt the patch weights to its in_chans from 3 channels:
  // of 2 or 4+ channels it cannot, and it loaded them at random with only a log line.
  if (c.in_chans == 1 || c.in_chans == 3) pcfg["first_conv"] = "patch_embed.proj";
  json j = {{"architecture", arch},         {"num_classes", c.num_classes}, {"num_features", c.embed_dim},
            {"global_pool", c.global_pool}, {"model_args", args},           {"pretrained_cfg", pcfg}};
  if (!class_names.empty()) j["label_names"] = class_names;
  return j.dump(2) + "\n";
}

void check_export_dir(const std::string& dir) {
  VIT_CHECK(!fs::exists(fs::path(dir) / "args.json"), dir,
            ": a training run's directory (args.json); an export there would be read in place of its "
            "checkpoints: choose another directory");
}

std::vector<std::string> names_for_every_class(const std::vector<std::string>& names, int64_t num_classes) {
  std::vector<std::string> out = names;
  if (names.empty()) return out;
  for (int64_t k = int64_t(names.size()); k < num_classes; ++k) {
    const std::string index = std::to_string(k);
    out.push_back(std::find(names.begin(), names.end(), index) != names.end() ? "#" + index : index);
  }
  return out;
}

std::vector<std::string> export_timm(const ViT& model, const std::string& dir,
                                     const std::vector<std::string>& names) {
  check_export_dir(dir);
  const std::vector<std::string> class_names = names_for_every_class(names, model.config().num_classes);
  const ViTConfig& c = model.config();
  std::vector<std::string> notes;
  if (c.norm_eps != 1e-6f && c.norm_eps != 1e-5f)
    notes.push_back("timm's ViT uses LayerNorm eps 1e-6 (CLIP's 1e-5); this model was trained with " +
                    json(double(c.norm_eps)).dump() +
                    " (a Hugging Face model), so timm's logits will differ slightly");
  VIT_CHECK(c.patch_bias != c.pre_norm,
            "timm has a patch-embedding bias exactly when pre_norm is off; this model "
            "has pre_norm=",
            c.pre_norm, " and patch_bias=", c.patch_bias);
  VIT_CHECK(c.attn_dim() == c.embed_dim, dir,
            ": not exported: timm's ViT splits embed_dim over the heads; this "
            "model's heads are ",
            c.head_dim(), " wide (dim_head), ", c.attn_dim(), " channels for embed_dim ", c.embed_dim,
            " (use --format onnx)");
  VIT_CHECK(!c.patch_norm, dir,
            ": not exported: timm's ViT has no LayerNorm before the patch projection (patch_norm; use "
            "--format onnx)");
  VIT_CHECK(c.head_dist || !c.dist_token, dir,
            ": not exported: timm's distilled DeiT has a second head on its distillation token; this "
            "model's head reads the class token alone (transformers' DeiTForImageClassification; use "
            "--format hf or onnx)");
  if (c.pos_embed != "learn")
    notes.push_back(
        "the fixed sin-cos position embedding is written as timm's learned one (same values): "
        "fine-tuning the export would train it");
  if (c.pool_include_prefix)
    notes.push_back(
        "pooling over the prefix tokens too is model_args.pool_include_prefix, which timm "
        "before 1.0 does not take");
  const float* params = model.fp32_params(dir + ": not exported");
  fs::create_directories(dir);
  std::vector<TensorOut> tensors;
  for (const auto& s : model.table().specs())
    tensors.push_back({s.name, s.shape, DType::F32, params + s.offset});
  write_safetensors((fs::path(dir) / "model.safetensors").string(), tensors, {{"format", "pt"}});
  write_file_atomic((fs::path(dir) / "config.json").string(), timm_config_json(c, class_names));
  return notes;
}

}  // namespace vit
