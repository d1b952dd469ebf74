// timm's layout: the tensors already carry vitcpp's names; the architecture comes from the
// shapes, with config.json (architecture, model_args, pretrained_cfg) for what shapes
// cannot tell: the heads, the input size, the pooling and the preprocessing.
#include <cmath>
#include <filesystem>
#include <regex>

#include "core/check.h"
#include "core/decimal.h"
#include "core/file.h"
#include "core/json_number.h"
#include "core/json_parse.h"
#include "formats.h"

namespace vit::detail {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::optional<json> json_beside(const SafeTensors& st, const std::string& name) {
  const fs::path p = fs::path(st.path()).parent_path() / name;
  if (!fs::exists(p)) return std::nullopt;
  try {
    json j = parse_json(read_text_file(p.string()), p.string());
    VIT_CHECK(j.is_object(), p.string(), ": expected a JSON object");
    return j;
  } catch (const json::exception& e) {
    throw Error(p.string() + ": not valid JSON (" + e.what() + ")");
  }
}

json tidy(float f) {
  return shortest_decimal(f);
}

json tidy(const std::vector<float>& v) {
  json out = json::array();
  for (float f : v) out.push_back(shortest_decimal(f));
  return out;
}

int64_t heads_from_architecture(const std::string& arch, int64_t embed_dim) {
  static const std::regex re(
      R"(^(?:vit|deit|deit3)_(tiny|small|medium|base|large|huge|giant|gigantic)_patch\d+)");
  struct Width {
    const char* name;
    int64_t dim, heads;
  };
  static const Width widths[] = {{"tiny", 192, 3},    {"small", 384, 6},     {"medium", 512, 8},
                                 {"base", 768, 12},   {"large", 1024, 16},   {"huge", 1280, 16},
                                 {"giant", 1408, 16}, {"gigantic", 1664, 16}};
  std::smatch m;
  if (!std::regex_search(arch, m, re)) return 0;
  for (const auto& w : widths)
    if (m[1] == w.name && w.dim == embed_dim) return w.heads;
  return 0;
}

const json* field(const json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

bool read_size(const json* v, int64_t& h, int64_t& w, const char* what) {
  if (!v) return false;
  if (v->is_number()) {
    h = w = json_int(*v, what);
  } else {
    VIT_CHECK(v->is_array() && v->size() == 2, what, ": expected an int or [h, w], got ", v->dump());
    h = json_int((*v)[0], what);
    w = json_int((*v)[1], what);
  }
  return true;
}

namespace {

void read_pretrained_cfg(const json& p, ViTConfig& c, Mapping& m) {
  if (auto* v = field(p, "mean")) c.mean = v->get<std::vector<float>>();
  if (auto* v = field(p, "std")) c.std = v->get<std::vector<float>>();
  if (auto* v = field(p, "interpolation")) c.interpolation = v->get<std::string>();
  if (auto* v = field(p, "crop_pct")) c.crop_pct = v->get<double>();
  if (auto* v = field(p, "crop_mode")) {
    c.crop_mode = v->get<std::string>();
    if (c.crop_mode != "center" && c.crop_mode != "squash") {
      m.notes.push_back("pretrained_cfg crop_mode '" + c.crop_mode + "' is not supported; using 'center'");
      c.crop_mode = "center";
    }
  }
}

}  // namespace

namespace {

// Reading one timm state dict and its config.json, in parts.
struct Reader {
  Reader(const SafeTensors& st, int64_t num_heads, std::string fallback_arch);
  void read_architecture();  // what the name and the tensors say: widths, depth, tokens, norms
  void read_heads();
  void require_heads();  // after read_pool and read_input_size: the error's hints need them
  void read_pool();
  void read_input_size();  // and whether pos_embed covers the prefix tokens
  void read_preprocessing();

  const Shape* shape(const std::string& name) const {
    const TensorInfo* t = st.find(name);
    return t ? &t->shape : nullptr;
  }

  const SafeTensors& st;
  const int64_t num_heads;
  Mapping m;
  ViTConfig& c = m.cfg;
  std::optional<json> config;
  json args = json::object(), pcfg = json::object();  // model_args, pretrained_cfg
  std::string arch;
  const TimmArchitecture* known = nullptr;
};

Reader::Reader(const SafeTensors& st_, int64_t num_heads_, std::string fallback_arch)
    : st(st_),
      num_heads(num_heads_),
      config(json_beside(st_, "config.json")),
      arch(std::move(fallback_arch)) {}

void Reader::read_architecture() {
  if (config && field(*config, "model_args")) args = (*config)["model_args"];
  if (config && field(*config, "pretrained_cfg")) pcfg = (*config)["pretrained_cfg"];
  if (config && field(*config, "architecture")) arch = (*config)["architecture"].get<std::string>();
  // What the name says that the tensors may not (the activation, the eps, the heads).
  known = find_timm_architecture(arch);
  VIT_CHECK(!known || !*known->unsupported, "timm's ", arch, " ", known ? known->unsupported : "",
            ": vitcpp runs timm's VisionTransformer with LayerNorm, GELU or QuickGELU MLPs and token or "
            "average or attention (map) pooling");
  c.act_layer = known ? known->act : "gelu";
  // timm's loader resamples FlexiViT's position embeddings bilinear, not antialiased
  // (_create_vision_transformer's checkpoint_filter_fn for 'flexi' names): bicubic gave logits
  // 12-20% off timm's at a new size.
  if (arch.starts_with("flexivit")) m.pos_resample = "timm-bilinear";
  if (const json* v = field(args, "act_layer")) {
    VIT_CHECK(v->is_string() && is_activation_name(v->get<std::string>()),
              "config.json model_args act_layer ", v->dump(),
              " is not supported (gelu, gelu_tanh or quick_gelu)");
    c.act_layer = v->get<std::string>();
  }
  if (const json* v = field(args, "norm_layer"))
    VIT_CHECK(*v == "layernorm", "config.json model_args norm_layer ", v->dump(),
              " is not supported (vitcpp's blocks use LayerNorm)");
  const Shape* proj = shape("patch_embed.proj.weight");
  VIT_CHECK(proj && proj->size() == 4, "no patch_embed.proj.weight [D, C, P, P]: not a ViT in timm's layout");
  c.embed_dim = (*proj)[0];
  c.in_chans = (*proj)[1];
  c.patch_h = (*proj)[2];
  c.patch_w = (*proj)[3];
  c.depth = 0;
  while (st.find("blocks." + std::to_string(c.depth) + ".norm1.weight")) ++c.depth;
  VIT_CHECK(c.depth > 0, "no blocks.0.norm1.weight");
  const Shape* fc1 = shape("blocks.0.mlp.fc1.weight");
  VIT_CHECK(fc1 && fc1->size() == 2, "no blocks.0.mlp.fc1.weight [M, D]");
  c.mlp_dim = (*fc1)[0];
  c.qkv_bias = st.find("blocks.0.attn.qkv.bias") != nullptr;
  c.class_token = st.find("cls_token") != nullptr;
  const Shape* reg = shape("reg_token");
  c.reg_tokens = reg && reg->size() == 3 ? (*reg)[1] : 0;
  // DeiT's VisionTransformerDistilled: the distillation token and its head (the mean of the
  // two at inference; without heads, the features are the mean of the two tokens).
  c.dist_token = c.head_dist = st.find("dist_token") != nullptr;
  c.pre_norm = st.find("norm_pre.weight") != nullptr;
  c.patch_bias = st.find("patch_embed.proj.bias") != nullptr;
  c.fc_norm = st.find("fc_norm.weight") != nullptr;
  c.init_values = 0.f;
  if (st.find("blocks.0.ls1.gamma")) {
    const json* iv = field(args, "init_values");
    c.init_values = iv ? iv->get<float>() : 1e-5f;  // only the init of new LayerScales
  }
  const Shape* head = shape("head.weight");
  c.num_classes = head ? (*head)[0] : 0;
  c.norm_eps = known ? known->norm_eps : 1e-6f;  // timm's ViT LayerNorm; CLIP's 1e-5
  c.pos_embed = "learn";

  for (const char* key : {"embed_dim", "depth"})
    if (const json* v = field(args, key))
      VIT_CHECK(json_int(*v, std::string("config.json model_args ") + key) ==
                    (key[0] == 'e' ? c.embed_dim : c.depth),
                "config.json model_args ", key, " = ", v->dump(), " disagrees with the tensors (",
                key[0] == 'e' ? c.embed_dim : c.depth, ")");
}

void Reader::read_heads() {
  // Heads: model_args, then the architecture's name (timm's table, then the family's
  // pattern), then the caller's.
  c.num_heads = 0;
  if (const json* v = field(args, "num_heads"))
    c.num_heads = json_int(*v, "config.json model_args num_heads");
  // The name's heads where the width is the name's, or where model_args changed the width
  // alone: timm built that model with the name's heads (a save that overrides embed_dim only).
  if (!c.num_heads && known && (known->embed_dim == c.embed_dim || field(args, "embed_dim")) &&
      c.embed_dim % known->num_heads == 0)
    c.num_heads = known->num_heads;
  if (!c.num_heads) c.num_heads = heads_from_architecture(arch, c.embed_dim);
  if (!c.num_heads) c.num_heads = num_heads;
}

void Reader::require_heads() {
  if (c.num_heads > 0) return;
  // The names it may be: timm's with these tensors (widths, tokens, norms, pooling; those of
  // its input size first). The hint named vit_small_patch16_224 whatever the width, and a
  // name to copy where several fit (they differ in preprocessing: DeiT's mean is not ViT's).
  const std::vector<std::string> like = timm_architectures_like(c, 6);
  std::string names;
  for (const std::string& n : like) names += (names.empty() ? "" : ", ") + n;
  const std::string example = like.size() == 1 ? like.front() : "NAME";
  throw Error(detail::concat(
      "the number of attention heads is not in config.json (model_args.num_heads) and ",
      arch.empty() ? std::string("there is no architecture name")
      : known      ? "'" + arch + "' has " + std::to_string(known->num_heads) + " heads of width " +
                    std::to_string(known->embed_dim) + ", not " + std::to_string(c.embed_dim)
              : "'" + arch + "' is not a name vitcpp knows",
      "; name the model it is: --model ", example, " with --checkpoint or --pretrained, create_model(\"",
      example, "\", checkpoint_path=FILE) in Python, or --num-heads (embed_dim is ", c.embed_dim,
      "); where neither is taken (--teacher, vit serve, vit plot) write it with its config first: vit export "
      "--model ",
      example, " --checkpoint FILE --out DIR",
      names.empty() ? std::string() : ". timm's models with these tensors: " + names));
}

void Reader::read_pool() {
  // Pooling: config.json's global_pool, else what the tensors suggest.
  std::string pool;
  if (config && field(*config, "global_pool")) pool = (*config)["global_pool"].get<std::string>();
  if (const json* v = field(args, "global_pool")) {
    pool = v->get<std::string>();
    // timm's model_args global_pool='' pools nothing: its head runs on every token (logits
    // [B, T, K]). It was read as 'token', one row of those.
    VIT_CHECK(!pool.empty(),
              "model_args global_pool '' (timm's head on every token, no pooling) is not "
              "supported: token, avg or map");
  }
  // A hub config.json names the architecture alone: timm builds its pooling from the name.
  const std::optional<ViTConfig> named = timm_architecture_config(arch);
  if (pool.empty() && named) pool = named->global_pool;
  const Shape* latent = shape("attn_pool.latent");
  if (pool.empty()) pool = latent ? "map" : *c.fc_norm || !c.class_token ? "avg" : "token";
  VIT_CHECK(pool == "token" || pool == "avg" || pool == "map", "global_pool '", pool,
            "' is not supported (token, avg or map)");
  c.global_pool = pool;
  // timm 1.0: avg and attention pooling take the prefix tokens too (the default leaves them out).
  if (const json* v = field(args, "pool_include_prefix"))
    c.pool_include_prefix = v->get<bool>() && pool != "token";
  else if (named)  // test_vit3's, from its name
    c.pool_include_prefix = named->pool_include_prefix && pool != "token";
  if (pool == "map") {  // timm's AttentionPoolLatent as VisionTransformer builds it
    VIT_CHECK(latent, "global_pool 'map' without attn_pool.latent");
    VIT_CHECK(*latent == Shape({1, 1, c.embed_dim}), "attn_pool.latent has shape ", shape_str(*latent),
              "; vitcpp's attention pool has one latent query [1, 1, ", c.embed_dim, "]");
    const Shape* pool_fc1 = shape("attn_pool.mlp.fc1.weight");
    VIT_CHECK(pool_fc1 && *pool_fc1 == Shape({c.mlp_dim, c.embed_dim}), "attn_pool.mlp.fc1.weight has shape ",
              pool_fc1 ? shape_str(*pool_fc1) : std::string("(none)"),
              "; vitcpp's attention pool has the blocks' MLP width [", c.mlp_dim, ", ", c.embed_dim, "]");
  }
}

void Reader::read_input_size() {
  // Input size: model_args.img_size, pretrained_cfg.input_size, the name's _224 suffix, or
  // a square grid of pos_embed.
  const Shape* pos = shape("pos_embed");
  VIT_CHECK(pos && pos->size() == 3 && (*pos)[2] == c.embed_dim, "no pos_embed [1, L, ", c.embed_dim,
            "] (timm's pos_embed='none' is not supported)");
  const int64_t L = (*pos)[1], prefix = c.num_prefix_tokens();
  // model_args first: timm builds the model from them, and its save_for_hf keeps the
  // architecture's default pretrained_cfg (224x224) beside a model made at another size (a
  // 32x32 CIFAR ViT was refused for a 224x224 input nobody chose).
  bool sized = read_size(field(args, "img_size"), c.img_h, c.img_w, "config.json model_args img_size");
  if (const json* v = field(pcfg, "input_size")) {
    VIT_CHECK(v->is_array() && v->size() == 3, "pretrained_cfg.input_size must be [C, H, W]");
    const int64_t h = json_int((*v)[1], "pretrained_cfg.input_size"),
                  w = json_int((*v)[2], "pretrained_cfg.input_size");
    // pos_embed's rows for an input of h x w.
    const auto fits = [&](int64_t hh, int64_t ww) {
      if (hh % c.patch_h != 0 || ww % c.patch_w != 0) return false;
      const int64_t n = (hh / c.patch_h) * (ww / c.patch_w);
      return L == n || L == n + prefix;
    };
    if (sized && (h != c.img_h || w != c.img_w)) {
      // Where pos_embed is pretrained_cfg's grid, not model_args' (timm would resample it to
      // model_args' size on load), the file is read at its grid, as before model_args came first.
      const bool theirs = !fits(c.img_h, c.img_w) && fits(h, w);
      m.notes.push_back("pretrained_cfg.input_size " + std::to_string(h) + "x" + std::to_string(w) +
                        " is not model_args img_size " + std::to_string(c.img_h) + "x" +
                        std::to_string(c.img_w) +
                        (theirs ? ": read at pretrained_cfg's, pos_embed's grid (--img-size resamples it)"
                                : ": read at the model's, as timm builds it"));
      if (theirs) c.img_h = h, c.img_w = w;
    }
    if (!sized) c.img_h = h, c.img_w = w;
    sized = true;
  }
  // The square grid of pos_embed's rows (with or without the prefix rows), or 0.
  auto square_grid = [&] {
    for (int64_t rows : {L, L - prefix}) {
      const auto g = int64_t(std::llround(std::sqrt(double(std::max<int64_t>(rows, 0)))));
      if (g > 0 && g * g == rows) return g;
    }
    return int64_t(0);
  };
  static const std::regex res(R"(_(\d+)(?:\.|$))");
  std::smatch sm;
  if (!sized && std::regex_search(arch, sm, res) && sm[1].length() <= 9) {  // 9 digits: no stoll overflow
    c.img_h = c.img_w = std::stoll(sm[1]);
    sized = true;
    // The name's size is its pretrained weights'; a file of another resolution under that name
    // (weights fine-tuned at 384 named vit_*_224) is read at its own grid, and resampled from it.
    const int64_t N = c.num_patches(), g = square_grid();
    if (L != N && L != N + prefix && g > 0) {
      c.img_h = g * c.patch_h;
      c.img_w = g * c.patch_w;
      m.notes.push_back("pos_embed is a " + std::to_string(g) + "x" + std::to_string(g) + " grid, not " +
                        arch + "'s " + sm[1].str() + ": read at " + std::to_string(c.img_h) + "x" +
                        std::to_string(c.img_w) + " (img_size, --img-size resample it)");
    }
  }
  if (!sized) {
    const int64_t g = square_grid();
    VIT_CHECK(g > 0, "pos_embed has ", L, " rows, not a square grid: put the input size in config.json");
    c.img_h = g * c.patch_h;
    c.img_w = g * c.patch_w;
    m.notes.push_back("input size " + std::to_string(c.img_h) + "x" + std::to_string(c.img_w) +
                      " inferred from pos_embed (a square grid)");
  }
  const int64_t N = c.num_patches();
  if (const json* v = field(args, "no_embed_class")) {
    c.no_embed_class = v->get<bool>();
  } else {
    VIT_CHECK(L == N || L == N + prefix, "pos_embed has ", L, " rows; a ", c.img_h, "x", c.img_w,
              " input in ", c.patch_h, "x", c.patch_w, " patches has ", N, " patches and ", prefix,
              " prefix tokens");
    c.no_embed_class = prefix > 0 && L == N;
  }
}

void Reader::read_preprocessing() {
  read_pretrained_cfg(pcfg, c, m);
  if (c.mean.size() != size_t(c.in_chans) || c.std.size() != size_t(c.in_chans)) {
    // A pretrained_cfg of other channels than the model's is the architecture's default,
    // which timm's save_for_hf keeps beside a model of other in_chans: its mean and std are
    // not this model's.
    const json* size = field(pcfg, "input_size");
    const bool defaults = size && size->is_array() && !size->empty() && (*size)[0].is_number_integer() &&
                          (*size)[0].get<int64_t>() != c.in_chans;
    VIT_CHECK(!field(pcfg, "mean") || defaults, "pretrained_cfg mean/std have ", c.mean.size(),
              " entries for ", c.in_chans, " input channels");
    if (field(pcfg, "mean"))
      m.notes.push_back("pretrained_cfg is for " + std::to_string((*size)[0].get<int64_t>()) +
                        " input channels, the model has " + std::to_string(c.in_chans) +
                        ": its mean and std are not the model's; 0.5 and 0.5 used");
    c.mean.assign(c.in_chans, 0.5f);
    c.std.assign(c.in_chans, 0.5f);
  }
  if (!config || !field(*config, "pretrained_cfg")) {
    // timm's defaults for its ViTs (vision_transformer.py's _cfg).
    c.interpolation = "bicubic";
    c.crop_pct = 0.9;
    c.crop_mode = "center";
    // A bare state dict loaded as a named model (create_model(name, checkpoint_path=...)):
    // the name's pretrained_cfg, as timm keeps it (DeiT's ImageNet mean and std, crop 0.9).
    std::optional<ViTConfig> named;
    if (!config && !arch.empty()) try {
        named = timm_architecture_config(arch);
        if (!named) named = preset(arch);
      } catch (const Error&) {  // a name vitcpp does not build: timm's defaults
      }
    if (named && named->mean.size() == size_t(c.in_chans)) {
      c.mean = named->mean;
      c.std = named->std;
      c.crop_pct = named->crop_pct;
      c.interpolation = named->interpolation;
      c.crop_mode = named->crop_mode;
      m.notes.push_back("no config.json: the preprocessing of " + arch);
    } else {
      m.notes.push_back(config
                            ? "config.json has no pretrained_cfg: timm's default preprocessing"
                            : "no config.json: architecture inferred from the tensor shapes, timm's default "
                              "preprocessing");
    }
  }
  if (config && field(*config, "label_names")) {
    m.class_names = (*config)["label_names"].get<std::vector<std::string>>();
    if (int64_t(m.class_names.size()) != c.num_classes) {
      m.notes.push_back(detail::concat("config.json's label_names has ", m.class_names.size(),
                                       " names for a head of ", c.num_classes,
                                       " classes: they are not used (--labels FILE gives names)"));
      m.class_names.clear();
    }
  }
}

}  // namespace

Mapping timm_mapping(const SafeTensors& st, int64_t num_heads, const std::string& architecture) {
  Reader r(st, num_heads, architecture);
  naming_file(
      st.path(),
      [&] {
        r.read_architecture();
        r.read_heads();
        r.read_pool();
        r.read_input_size();
        r.require_heads();
        r.read_preprocessing();
      },
      "config.json: ");
  for (const auto& t : st.tensors()) r.m.sources[t.name] = {t.name};
  return std::move(r.m);
}

}  // namespace vit::detail
