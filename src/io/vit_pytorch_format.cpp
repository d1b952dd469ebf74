// vit-pytorch's layout (lucidrains/vit-pytorch's ViT, the model of seed
// vit-pytorch-code-review.md), as `safetensors.torch.save_file(model.state_dict(), ...)`
// writes it:
//
//   to_patch_embedding.{1,2,3}    LayerNorm(patch_dim), Linear(patch_dim, dim), LayerNorm(dim):
//                                 a patch flattened as (row, column, channel)
//   pos_embedding [1, n+1, dim], cls_token [1, 1, dim] (with pool='mean': [1, n, dim] and
//                                 [1, 0, dim], no class token; since 1.16.1 both without
//                                 the leading 1)
//   transformer.layers.i.0        Attention: norm, to_qkv (no bias), to_out.0 (absent when
//                                 heads == 1 and dim_head == dim)
//   transformer.layers.i.1.net    FeedForward: 0 LayerNorm, 1 Linear, 4 Linear
//   transformer.norm, mlp_head    the final LayerNorm (older versions: mlp_head.0, after
//                                 pooling) and the classifier
//
// Its SimpleViT (big_vision's plain ViT baseline) differs: no class token, no pos_embedding in
// the state dict (a fixed 2-D sin-cos table: sincos2d), to_out without a bias (a zero bias
// here), FeedForward's second Linear at net.3, and linear_head (older: LayerNorm + Linear,
// no transformer.norm).
//
// The constructor's arguments (image_size, patch_size, channels, heads, dim_head, pool, ...)
// come from a config.json beside the weights; without one, what the shapes leave open is
// vit-pytorch's defaults (dim_head 64, pool 'cls') and square images, each said in a note
// (SimpleViT's state dict does not tell the image size: it needs config.json).
#include <algorithm>
#include <cmath>
#include <set>

#include "core/check.h"
#include "core/json_number.h"
#include "formats.h"

namespace vit::detail {

using json = nlohmann::json;

bool is_vit_pytorch(const SafeTensors& st) {
  return st.find("to_patch_embedding.2.weight") || st.find("transformer.layers.0.0.to_qkv.weight");
}

namespace {

// The constructor's arguments vit-pytorch's ViT takes, and vitcpp's preprocessing.
const std::set<std::string> kKeys = {"image_size", "patch_size",  "num_classes", "dim",      "depth",
                                     "heads",      "mlp_dim",     "pool",        "channels", "dim_head",
                                     "dropout",    "emb_dropout", "mean",        "std",      "label_names"};

}  // namespace

namespace {

// Reading one vit-pytorch state dict (and its config.json): the config in parts, then the
// tensors' names.
struct Reader {
  Reader(const SafeTensors& st, int64_t num_heads);
  void read_architecture();  // widths, depth, heads from the tensors and config.json
  void read_geometry();      // image, patch and channels; the class token
  void read_pool_and_head();
  void read_preprocessing();  // the fixed parts of vit-pytorch's model; mean, std, labels
  void map_tensors();

  Shape shape(const std::string& name) const {
    const TensorInfo* t = st.find(name);
    return t ? t->shape : Shape{};
  }
  // cls_token and pos_embedding as [1, rows, dim]: vit-pytorch 1.16.1 (2025-11-27) and later
  // store them without the leading 1 ([rows, dim]); the values are the same.
  Shape token_shape(const std::string& name) const {
    Shape s = shape(name);
    if (s.size() == 2) s.insert(s.begin(), 1);
    return s;
  }
  int64_t integer(const char* key, int64_t fallback) const {
    const json* v = field(args, key);
    return v ? json_int(*v, std::string("config.json ") + key) : fallback;
  }

  const SafeTensors& st;
  const int64_t num_heads;
  Mapping m;
  ViTConfig& c = m.cfg;
  json args;
  // SimpleViT's classifier is linear_head (ViT's mlp_head); older versions of both put a
  // LayerNorm in it (head.0) instead of transformer.norm.
  bool simple = false, old_head = false;
  std::string head;
  int64_t P = 0, inner = 0;  // patch_dim, the attention's width
  Shape cls;
};

Reader::Reader(const SafeTensors& st_, int64_t num_heads_) : st(st_), num_heads(num_heads_) {
  const std::optional<json> config = json_beside(st, "config.json");
  args = config ? *config : json::object();
  simple = st.find("linear_head.weight") || st.find("linear_head.1.weight");
  head = simple ? "linear_head" : "mlp_head";
  old_head = st.find(head + ".1.weight") != nullptr;
}

void Reader::read_architecture() {
  for (const auto& [key, v] : args.items())
    VIT_CHECK(kKeys.count(key), "config.json: unknown key '", key,
              "' (vit-pytorch's ViT arguments: image_size, patch_size, num_classes, dim, depth, heads, "
              "mlp_dim, pool, channels, dim_head, dropout, emb_dropout; and mean, std, label_names)");
  for (const char* key : {"heads", "dim_head", "channels", "dim", "depth", "mlp_dim", "num_classes"})
    VIT_CHECK(integer(key, 1) > 0, "config.json ", key, " must be positive, got ", integer(key, 1));

  const Shape proj = shape("to_patch_embedding.2.weight");
  VIT_CHECK(proj.size() == 2,
            "no to_patch_embedding.2.weight [dim, patch_dim]: not vit-pytorch's ViT or SimpleViT (its "
            "other models are not supported)");
  c.embed_dim = proj[0];
  P = proj[1];
  c.depth = 0;
  while (st.find("transformer.layers." + std::to_string(c.depth) + ".0.to_qkv.weight")) ++c.depth;
  VIT_CHECK(c.depth > 0, "no transformer.layers.0.0.to_qkv.weight");
  const Shape qkv = shape("transformer.layers.0.0.to_qkv.weight");
  VIT_CHECK(qkv.size() == 2 && qkv[0] > 0 && qkv[0] % 3 == 0,
            "transformer.layers.0.0.to_qkv.weight is not [3 * inner, dim]");
  inner = qkv[0] / 3;
  const Shape fc1 = shape("transformer.layers.0.1.net.1.weight");
  VIT_CHECK(fc1.size() == 2, "no transformer.layers.0.1.net.1.weight [mlp_dim, dim]");
  c.mlp_dim = fc1[0];
  for (const auto& [key, have] : {std::pair{"dim", c.embed_dim}, {"depth", c.depth}, {"mlp_dim", c.mlp_dim}})
    VIT_CHECK(integer(key, have) == have, "config.json ", key, " = ", integer(key, have),
              " disagrees with the tensors (", have, ")");

  // Heads: config.json, the caller's, or vit-pytorch's default dim_head of 64.
  c.num_heads = integer("heads", num_heads);
  if (c.num_heads <= 0 && field(args, "dim_head"))
    c.num_heads = std::max<int64_t>(1, inner / integer("dim_head", 64));
  if (c.num_heads <= 0) {
    VIT_CHECK(inner % 64 == 0, "the attention is ", inner,
              " wide, not a multiple of vit-pytorch's default dim_head 64: put heads in config.json or "
              "give --num-heads");
    c.num_heads = inner / 64;
    m.notes.push_back(std::to_string(c.num_heads) + (c.num_heads == 1 ? " head" : " heads") +
                      " of 64 (vit-pytorch's default dim_head) for an attention " + std::to_string(inner) +
                      " wide; config.json's heads or --num-heads says otherwise");
  }
  VIT_CHECK(inner % c.num_heads == 0, c.num_heads, " heads do not divide the attention's width ", inner);
  c.dim_head = inner / c.num_heads;
  VIT_CHECK(integer("dim_head", c.dim_head) == c.dim_head, "config.json dim_head = ", integer("dim_head", 0),
            " disagrees with the tensors (", inner, " wide in ", c.num_heads, " heads)");
  if (c.dim_head * c.num_heads == c.embed_dim) c.dim_head = 0;  // timm's split: the plain config
}

void Reader::read_geometry() {
  // Image, patches and channels: config.json, else a square grid of square patches of 3 or
  // 1 channels that pos_embedding's rows and patch_dim allow.
  VIT_CHECK(!simple || (field(args, "image_size") && field(args, "patch_size")),
            "a SimpleViT's state dict does not say the image and patch size (its position table is "
            "not stored): put image_size and patch_size in config.json");
  const Shape pos = simple ? Shape{1, 0, c.embed_dim} : token_shape("pos_embedding");
  VIT_CHECK(pos.size() == 3 && pos[2] == c.embed_dim, "no pos_embedding [1, n + 1, ", c.embed_dim, "]");
  // Today's vit-pytorch has a class token only with pool='cls' (cls_token [1, 0, dim] with
  // 'mean'); the seed's version always has one, and averages it in with the patches.
  cls = simple ? Shape{1, 0, c.embed_dim} : token_shape("cls_token");
  VIT_CHECK(cls.size() == 3 && (cls[1] == 0 || cls[1] == 1) && cls[2] == c.embed_dim, "no cls_token [1, 1, ",
            c.embed_dim, "] (or [1, 0, ", c.embed_dim, "] with pool='mean')");
  c.class_token = cls[1] == 1;
  if (!c.class_token && !simple) m.skipped.insert("cls_token");
  const int64_t patches = pos[1] - (c.class_token ? 1 : 0);
  c.in_chans = integer("channels", 3);
  bool sized = false;
  if (const json* v = field(args, "patch_size")) {
    read_size(v, c.patch_h, c.patch_w, "config.json patch_size");
    VIT_CHECK(field(args, "image_size"), "config.json has patch_size but no image_size");
    read_size(field(args, "image_size"), c.img_h, c.img_w, "config.json image_size");
    sized = true;
  } else {
    const auto g = int64_t(std::llround(std::sqrt(double(std::max<int64_t>(patches, 0)))));
    for (int64_t ch :
         field(args, "channels") ? std::vector<int64_t>{c.in_chans} : std::vector<int64_t>{3, 1}) {
      const auto p = int64_t(std::llround(std::sqrt(double(P / ch))));
      if (g > 0 && g * g == patches && P % ch == 0 && p * p * ch == P) {
        c.in_chans = ch;
        c.patch_h = c.patch_w = p;
        c.img_h = c.img_w = g * p;
        sized = true;
        break;
      }
    }
    VIT_CHECK(sized, "cannot tell the image and patch size from the tensors (", patches, " patches of ", P,
              " values): put image_size, patch_size and channels in config.json");
    m.notes.push_back("no patch_size in config.json: " + std::to_string(c.img_h) + "x" +
                      std::to_string(c.img_w) + " images of " + std::to_string(c.in_chans) +
                      " channel(s) in " + std::to_string(c.patch_h) + "x" + std::to_string(c.patch_w) +
                      " patches, from the tensors' shapes");
  }
  VIT_CHECK(c.patch_h > 0 && c.patch_w > 0 && c.in_chans > 0 && c.patch_dim() == P, "patch_dim is ", P,
            ", not channels x patch_size (", c.in_chans, " x ", c.patch_h, " x ", c.patch_w, ")");
  VIT_CHECK(c.img_h % c.patch_h == 0 && c.img_w % c.patch_w == 0 && (simple || c.num_patches() == patches),
            "pos_embedding has ", pos[1], " rows; a ", c.img_h, "x", c.img_w, " image in ", c.patch_h, "x",
            c.patch_w, " patches has ",
            c.img_h / std::max<int64_t>(1, c.patch_h) * (c.img_w / std::max<int64_t>(1, c.patch_w)),
            c.class_token ? " patches and a class token" : " patches");
}

void Reader::read_pool_and_head() {
  // Pooling and the final norm: vit-pytorch norms every token (transformer.norm) and pools;
  // its older versions norm after pooling (mlp_head.0), as timm's fc_norm.
  const std::string pool = field(args, "pool") ? args["pool"].get<std::string>()
                           : c.class_token     ? "cls"
                                               : "mean";
  VIT_CHECK(pool == "cls" || pool == "mean", "config.json pool must be 'cls' or 'mean', got '", pool, "'");
  VIT_CHECK(pool == "mean" || c.class_token, "config.json pool is 'cls', but cls_token is ", shape_str(cls),
            ": the model was built with pool='mean'");
  c.global_pool = pool == "mean" ? "avg" : "token";
  c.pool_include_prefix = pool == "mean" && c.class_token;
  c.fc_norm = old_head && pool == "mean";
  if (!field(args, "pool") && c.class_token)
    m.notes.push_back("no pool in config.json: class-token pooling (vit-pytorch's default pool='cls')");
  const std::string classifier = head + (old_head ? ".1" : "");
  const Shape hw = shape(classifier + ".weight");
  VIT_CHECK(hw.size() == 2 && hw[1] == c.embed_dim, "no ", classifier, ".weight [num_classes, ", c.embed_dim,
            "]");
  c.num_classes = hw[0];
  VIT_CHECK(integer("num_classes", c.num_classes) == c.num_classes, "config.json num_classes disagrees with ",
            classifier, ".weight (", c.num_classes, ")");
}

void Reader::read_preprocessing() {
  c.patch_norm = true;
  c.patch_bias = st.find("to_patch_embedding.2.bias") != nullptr;
  c.qkv_bias = false;
  c.pos_embed = simple ? "sincos2d" : "learn";
  c.norm_eps = 1e-5f;  // nn.LayerNorm's default
  if (simple) m.notes.push_back("SimpleViT's attention projection has no bias: a zero one here");
  if (const json* v = field(args, "dropout")) c.attn_drop_rate = c.proj_drop_rate = v->get<float>();
  if (const json* v = field(args, "emb_dropout")) c.pos_drop_rate = v->get<float>();
  // vit-pytorch takes tensors as they come: ToTensor()'s [0, 1] unless the user normalized.
  c.mean.assign(size_t(c.in_chans), 0.f);
  c.std.assign(size_t(c.in_chans), 1.f);
  if (const json* v = field(args, "mean")) c.mean = v->get<std::vector<float>>();
  if (const json* v = field(args, "std")) c.std = v->get<std::vector<float>>();
  if (!field(args, "mean"))
    m.notes.push_back(
        "pixels scaled to [0, 1] and not normalized (torchvision's ToTensor()); config.json's "
        "mean and std say otherwise");
  c.crop_pct = 1.0;
  c.crop_mode = "squash";
  if (const json* v = field(args, "label_names")) {
    m.class_names = v->get<std::vector<std::string>>();
    VIT_CHECK(int64_t(m.class_names.size()) == c.num_classes, "config.json label_names has ",
              m.class_names.size(), " names for ", c.num_classes, " classes");
  }
}

void Reader::map_tensors() {
  const std::string& where = st.path();
  // The tensors: vitcpp's names, with the patch's values reordered from (row, column,
  // channel) to im2col's (channel, row, column).
  auto same = [&](const std::string& ours, const std::string& theirs) { m.sources[ours] = {theirs}; };
  const int64_t C = c.in_chans, ph = c.patch_h, pw = c.patch_w, D = c.embed_dim;
  auto patch_order = [&, C, ph, pw](const std::string& ours, const std::string& theirs, int64_t rows) {
    m.sources[ours] = {theirs};
    m.fills[ours] = [file = &st, theirs, rows, C, ph,
                     pw](float* dst) {  // the file outlives the mapping's use
      const int64_t P = C * ph * pw;
      const Shape want = rows == 1 ? Shape{P} : Shape{rows, P};
      VIT_CHECK(file->at(theirs).shape == want, file->path(), ": tensor '", theirs, "' has shape ",
                shape_str(file->at(theirs).shape), ", expected ", shape_str(want));
      const std::vector<float> src = file->to_float(theirs);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t ch = 0; ch < C; ++ch)
          for (int64_t i = 0; i < ph; ++i)
            for (int64_t j = 0; j < pw; ++j)
              dst[r * P + (ch * ph + i) * pw + j] = src[r * P + (i * pw + j) * C + ch];
    };
  };
  patch_order("patch_embed.norm_in.weight", "to_patch_embedding.1.weight", 1);
  patch_order("patch_embed.norm_in.bias", "to_patch_embedding.1.bias", 1);
  patch_order("patch_embed.proj.weight", "to_patch_embedding.2.weight", D);
  same("patch_embed.proj.bias", "to_patch_embedding.2.bias");
  same("patch_embed.norm.weight", "to_patch_embedding.3.weight");
  same("patch_embed.norm.bias", "to_patch_embedding.3.bias");
  if (c.class_token) same("cls_token", "cls_token");
  if (!simple) same("pos_embed", "pos_embedding");  // SimpleViT's fixed table is made on load
  const int64_t I = c.attn_dim();
  auto zero_bias = [&](const std::string& ours) {
    m.fills[ours] = [D](float* dst) { std::fill(dst, dst + D, 0.f); };
  };
  for (int64_t l = 0; l < c.depth; ++l) {
    const std::string ours = "blocks." + std::to_string(l) + ".",
                      theirs = "transformer.layers." + std::to_string(l);
    same(ours + "norm1.weight", theirs + ".0.norm.weight");
    same(ours + "norm1.bias", theirs + ".0.norm.bias");
    same(ours + "attn.qkv.weight", theirs + ".0.to_qkv.weight");
    if (simple) {  // nn.Linear(inner_dim, dim, bias=False)
      same(ours + "attn.proj.weight", theirs + ".0.to_out.weight");
      zero_bias(ours + "attn.proj.bias");
    } else if (st.find(theirs + ".0.to_out.0.weight")) {
      same(ours + "attn.proj.weight", theirs + ".0.to_out.0.weight");
      same(ours + "attn.proj.bias", theirs + ".0.to_out.0.bias");
    } else {  // one head as wide as the model: vit-pytorch's to_out is the identity
      VIT_CHECK(I == D, where, ": ", theirs,
                ".0.to_out.0.weight is missing (only a single head as wide as dim "
                "goes without it)");
      m.fills[ours + "attn.proj.weight"] = [D](float* dst) {
        for (int64_t i = 0; i < D * D; ++i) dst[i] = i % (D + 1) == 0 ? 1.f : 0.f;
      };
      zero_bias(ours + "attn.proj.bias");
    }
    same(ours + "norm2.weight", theirs + ".1.net.0.weight");
    same(ours + "norm2.bias", theirs + ".1.net.0.bias");
    same(ours + "mlp.fc1.weight", theirs + ".1.net.1.weight");
    same(ours + "mlp.fc1.bias", theirs + ".1.net.1.bias");
    const std::string fc2 = theirs + (simple ? ".1.net.3" : ".1.net.4");  // SimpleViT has no dropout
    same(ours + "mlp.fc2.weight", fc2 + ".weight");
    same(ours + "mlp.fc2.bias", fc2 + ".bias");
  }
  // The final norm: transformer.norm, or in older versions the head's LayerNorm.
  const std::string norm = c.use_fc_norm() ? "fc_norm" : "norm",
                    theirs_norm = old_head ? head + ".0" : "transformer.norm";
  same(norm + ".weight", theirs_norm + ".weight");
  same(norm + ".bias", theirs_norm + ".bias");
  same("head.weight", head + (old_head ? ".1.weight" : ".weight"));
  same("head.bias", head + (old_head ? ".1.bias" : ".bias"));
}

}  // namespace

Mapping vit_pytorch_mapping(const SafeTensors& st, int64_t num_heads) {
  Reader r(st, num_heads);
  naming_file(
      st.path(),
      [&] {
        r.read_architecture();
        r.read_geometry();
        r.read_pool_and_head();
        r.read_preprocessing();
      },
      "config.json: ");
  r.map_tensors();
  return std::move(r.m);
}

}  // namespace vit::detail
