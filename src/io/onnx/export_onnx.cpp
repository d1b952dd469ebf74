// The ViT's inference forward (src/model/vit.cpp's run_forward without dropout or masks) as
// an ONNX graph, opset 17, built with ONNX's own protobuf classes:
//
//   pixel_values [N,C,H,W] -Conv(stride = patch)-> [N,D,gh,gw] -> tokens [N,L,D]
//   (+ pos_embed before the prefix tokens with no_embed_class) ++ [cls, reg] expanded to N
//   (+ pos_embed over every token otherwise), norm_pre (pre_norm)
//   per block: x += ls1 * proj(attention(norm1(x))), x += ls2 * fc2(gelu(fc1(norm2(x))))
//   token pooling: row 0, then norm (or fc_norm); avg pooling: mean of the patch rows,
//   normed first (norm) or after (fc_norm); attention pooling (map): norm, then timm's
//   AttentionPoolLatent; head -> logits [N,K] (without a head: the
//   pooled features [N,D] are the output)
//
// int8 (export_onnx's int8): the blocks' four products as ONNX Runtime's quantize_dynamic
// writes them with per_channel=True, which ORT fuses into its own int8 kernels:
//   DynamicQuantizeLinear(x) -> x_q u8, x_scale, x_zp (one scale per tensor, as ONNX defines it)
//   MatMulInteger(x_q, W_q + 128 as u8 [in, out], x_zp, 128) -> int32; Cast -> float;
//   Mul by x_scale * W_scale[out]; Add the bias.
// W_q and W_scale are the int8 values and scales vitcpp's --dtype int8 runs (symmetric per
// output channel); only the activations' scheme differs (vitcpp: s8 per row). The weights
// are stored as u8 with zero point 128 (quantize_dynamic's weight_type=QUInt8 form), the same
// values: ORT's u8 x s8 kernels on x86 without VNNI (AVX2, AVX-512 before VNNI) add product
// pairs in saturating int16 (vpmaddubsw: 255 x 127 x 2 > 32767), which put the logits up to 0.23
// (of the largest) off on Zen 3; its u8 x u8 kernels widen to int16 first and do not saturate.
//
// Linear weights are stored transposed ([in, out], for MatMul on [N, T, in]) under their
// timm name plus ".T"; everything else under its timm name. opset 17 has no Gelu op: the exact
// GELU is written 0.5 x (1 + erf(x / sqrt 2)) (ONNX Runtime fuses this form), its tanh form
// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), QuickGELU x sigmoid(1.702 x).
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <streambuf>
#include <string_view>
#include <vector>

#include "core/check.h"
#include "core/decimal.h"
#include "core/file.h"
#include "io/checkpoint.h"  // int8_stored
#include "io/onnx_export.h"
#include "ops/ops.h"
#include "vit/core/version.h"

namespace vit {

namespace fs = std::filesystem;

namespace {

constexpr int64_t kOpset = 17;

// Adds nodes and initializers to a graph, naming every intermediate output uniquely.
class GraphBuilder {
 public:
  explicit GraphBuilder(onnx::GraphProto& g) : g_(g) {}

  // A float initializer copied from data (row-major, `shape`).
  std::string weight(const std::string& name, const std::vector<int64_t>& shape, const float* data) {
    onnx::TensorProto* t = g_.add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    int64_t n = 1;
    for (int64_t d : shape) {
      t->add_dims(d);
      n *= d;
    }
    t->set_raw_data(reinterpret_cast<const char*>(data), size_t(n) * sizeof(float));
    return name;
  }
  // The transpose of a [rows, cols] matrix, as [cols, rows].
  std::string weight_t(const std::string& name, int64_t rows, int64_t cols, const float* data) {
    std::vector<float> t(size_t(rows * cols));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) t[size_t(c * rows + r)] = data[r * cols + c];
    return weight(name + ".T", {cols, rows}, t.data());
  }
  // q [rows, cols] int8 transposed and offset by 128, as UINT8 [cols, rows] named name.T.
  std::string uint8_t_weight(const std::string& name, int64_t rows, int64_t cols, const int8_t* q) {
    std::string t(size_t(rows * cols), '\0');
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) t[size_t(c * rows + r)] = char(uint8_t(int(q[r * cols + c]) + 128));
    return raw(name + ".T", onnx::TensorProto::UINT8, {cols, rows}, std::move(t));
  }
  // n uint8 values 128: MatMulInteger's zero point of the offset symmetric weights.
  std::string uint8_128s(int64_t n) {
    return raw(fresh("zero_point"), onnx::TensorProto::UINT8, {n}, std::string(size_t(n), char(128)));
  }
  std::string scalar(float v) { return weight(fresh("const"), {}, &v); }
  std::string ints(const std::vector<int64_t>& v) {
    onnx::TensorProto* t = g_.add_initializer();
    const std::string name = fresh("shape");
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(int64_t(v.size()));
    for (int64_t x : v) t->add_int64_data(x);
    return name;
  }
  std::string int_scalar(int64_t v) {
    onnx::TensorProto* t = g_.add_initializer();
    const std::string name = fresh("index");
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_int64_data(v);
    return name;
  }

  // A node's extra outputs (DynamicQuantizeLinear has three), named freshly.
  void more_outputs(onnx::NodeProto* n, int count) {
    for (int i = 0; i < count; ++i) n->add_output(fresh(n->op_type() + "_out"));
  }

  // One node; returns its (single) output's name, `out` if given.
  onnx::NodeProto* node(const std::string& op, const std::vector<std::string>& inputs, std::string out = "") {
    onnx::NodeProto* n = g_.add_node();
    n->set_op_type(op);
    n->set_name(fresh(op));
    for (const auto& i : inputs) n->add_input(i);
    n->add_output(out.empty() ? fresh(op + "_out") : out);
    return n;
  }
  std::string op(const std::string& op, const std::vector<std::string>& inputs, std::string out = "") {
    return node(op, inputs, std::move(out))->output(0);
  }

  static void attr(onnx::NodeProto* n, const std::string& name, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void attr(onnx::NodeProto* n, const std::string& name, float v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  static void attr(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }

 private:
  std::string raw(const std::string& name, int type, const std::vector<int64_t>& shape, std::string bytes) {
    onnx::TensorProto* t = g_.add_initializer();
    t->set_name(name);
    t->set_data_type(type);
    for (int64_t d : shape) t->add_dims(d);
    t->set_raw_data(std::move(bytes));
    return name;
  }
  std::string fresh(const std::string& stem) { return stem + "_" + std::to_string(counter_++); }
  onnx::GraphProto& g_;
  int64_t counter_ = 0;
};

// The model's forward as nodes of b; `x` names the input, the result names the logits.
// params: the model's fp32 parameters (ViT::fp32_params), laid out by its table.
class VitGraph {
 public:
  VitGraph(const ViT& m, const float* params, GraphBuilder& b, bool int8)
      : m_(m), params_(params), c_(m.config()), b_(b), int8_(int8) {}

  // `out` names the logits, or for a model without a head the pooled features.
  std::string build(const std::string& pixels, const std::string& out) {
    const int64_t T = c_.num_tokens();
    std::string x = patch_embed(pixels);
    x = tokens(x);
    if (c_.pre_norm) x = layernorm(x, "norm_pre");
    for (int64_t l = 0; l < c_.depth; ++l) x = block(x, "blocks." + std::to_string(l) + ".", T);
    const std::string norm = c_.use_fc_norm() ? "fc_norm" : "norm";
    std::string pooled;
    // The tokens avg and attention pooling read: the patches, or every token (timm 1.0's pool()).
    auto pooled_tokens = [&](const std::string& t) {
      return b_.node("Slice", {t, b_.ints({c_.first_pooled()}), b_.ints({T}), b_.ints({1})})->output(0);
    };
    if (c_.avg_pool()) {
      if (!c_.use_fc_norm()) x = layernorm(x, norm);  // timm's norm on every token, then the mean
      auto* mean = b_.node("ReduceMean", {pooled_tokens(x)});
      GraphBuilder::attr(mean, "axes", std::vector<int64_t>{1});
      GraphBuilder::attr(mean, "keepdims", int64_t(0));
      pooled = mean->output(0);
      if (c_.use_fc_norm()) pooled = layernorm(pooled, norm);
    } else if (c_.map_pool()) {
      // timm's norm on every token, then the pool over the tokens it reads.
      pooled = attn_pool(pooled_tokens(layernorm(x, norm)), T - c_.first_pooled());
    } else if (!c_.head_dist) {
      pooled = layernorm(token_row(x, 0), norm);  // the class token: [N, D]
    }
    if (!c_.head_dist) {
      if (c_.num_classes == 0) return b_.op("Identity", {pooled}, out);
      auto* head = b_.node("Gemm", {pooled, w("head.weight"), w("head.bias")}, out);
      GraphBuilder::attr(head, "transB", int64_t(1));
      return out;
    }
    // DeiT's distilled head: the class and distillation tokens, each through its own head
    // (or, without heads, the features), averaged as timm does: (a + b) / 2.
    auto* two = b_.node("Slice", {x, b_.ints({0}), b_.ints({2}), b_.ints({1})});  // [N, 2, D]
    const std::string normed = layernorm(two->output(0), norm);
    pooled = token_row(normed, 0);
    const std::string dist = token_row(normed, 1);
    const std::string sum = c_.num_classes == 0
                                ? b_.op("Add", {pooled, dist})
                                : b_.op("Add", {linear(pooled, "head"), linear(dist, "head_dist")});
    return b_.op("Div", {sum, b_.scalar(2.f)}, out);
  }

 private:
  const float* data(const std::string& name) const {
    const ParamSpec* s = m_.table().find(name);
    VIT_CHECK(s, "ONNX export: the model has no parameter '", name, "'");
    return params_ + s->offset;
  }
  const Shape& shape(const std::string& name) const { return m_.table().find(name)->shape; }
  // Token t of x [N, T, D]: [N, D].
  std::string token_row(const std::string& x, int64_t t) {
    auto* g = b_.node("Gather", {x, b_.int_scalar(t)});
    GraphBuilder::attr(g, "axis", int64_t(1));
    return g->output(0);
  }
  bool has(const std::string& name) const { return m_.table().find(name) != nullptr; }
  // A parameter as it is.
  std::string w(const std::string& name) { return b_.weight(name, shape(name), data(name)); }

  std::string layernorm(const std::string& x, const std::string& name) {
    auto* n = b_.node("LayerNormalization", {x, w(name + ".weight"), w(name + ".bias")});
    GraphBuilder::attr(n, "axis", int64_t(-1));
    GraphBuilder::attr(n, "epsilon", c_.norm_eps);
    return n->output(0);
  }
  // x [.., in] times the transpose of `name.weight` [out, in], plus `name.bias` if any.
  std::string linear(const std::string& x, const std::string& name) {
    const Shape& s = shape(name + ".weight");
    std::string y =
        int8_ && int8_stored(name + ".weight")
            ? int8_product(x, name, s[0], s[1])
            : b_.op("MatMul", {x, b_.weight_t(name + ".weight", s[0], s[1], data(name + ".weight"))});
    if (has(name + ".bias")) y = b_.op("Add", {y, w(name + ".bias")});
    return y;
  }

  // x times name.weight [N, K]^T in int8, as quantize_dynamic writes it (the header comment).
  std::string int8_product(const std::string& x, const std::string& name, int64_t N, int64_t K) {
    std::vector<int8_t> q(static_cast<size_t>(N * K));
    std::vector<float> scale(static_cast<size_t>(N));
    ops::quantize_int8_weights(q.data(), scale.data(), data(name + ".weight"), N, K);
    onnx::NodeProto* dq = b_.node("DynamicQuantizeLinear", {x});
    b_.more_outputs(dq, 2);
    auto* mm = b_.node("MatMulInteger", {dq->output(0), b_.uint8_t_weight(name + ".weight", N, K, q.data()),
                                         dq->output(2), b_.uint8_128s(N)});
    auto* cast = b_.node("Cast", {mm->output(0)});
    GraphBuilder::attr(cast, "to", int64_t(onnx::TensorProto::FLOAT));
    const std::string scales =
        b_.op("Mul", {dq->output(1), b_.weight(name + ".weight_scale", {N}, scale.data())});
    return b_.op("Mul", {cast->output(0), scales});
  }

  // The MLP's activation of h (the model's act_layer).
  std::string activation(const std::string& h) {
    if (c_.act_layer == "quick_gelu")
      return b_.op("Mul", {h, b_.op("Sigmoid", {b_.op("Mul", {h, b_.scalar(1.702f)})})});
    std::string inner;
    if (c_.act_layer == "gelu_tanh") {
      const std::string cube = b_.op("Mul", {b_.op("Mul", {h, h}), h});
      const std::string u = b_.op("Add", {h, b_.op("Mul", {cube, b_.scalar(0.044715f)})});
      inner = b_.op("Tanh", {b_.op("Mul", {u, b_.scalar(0.7978845608028654f)})});
    } else {
      inner = b_.op("Erf", {b_.op("Div", {h, b_.scalar(std::sqrt(2.f))})});
    }
    return b_.op("Mul", {b_.op("Mul", {h, b_.op("Add", {inner, b_.scalar(1.f)})}), b_.scalar(0.5f)});
  }

  std::string patch_embed(const std::string& pixels) {
    if (c_.patch_norm) return normed_patch_embed(pixels);
    std::vector<std::string> in = {pixels, w("patch_embed.proj.weight")};
    if (has("patch_embed.proj.bias")) in.push_back(w("patch_embed.proj.bias"));
    auto* conv = b_.node("Conv", in);
    GraphBuilder::attr(conv, "kernel_shape", std::vector<int64_t>{c_.patch_h, c_.patch_w});
    GraphBuilder::attr(conv, "strides", std::vector<int64_t>{c_.patch_h, c_.patch_w});
    // [N, D, gh, gw] -> [N, D, gh*gw] -> [N, gh*gw, D]
    const std::string flat = b_.op("Reshape", {conv->output(0), b_.ints({0, c_.embed_dim, -1})});
    auto* tr = b_.node("Transpose", {flat});
    GraphBuilder::attr(tr, "perm", std::vector<int64_t>{0, 2, 1});
    return tr->output(0);
  }

  // vit-pytorch's: each patch flattened in (channel, row, column) order as vitcpp's im2col,
  // LayerNorm, the projection as a product, LayerNorm.
  std::string normed_patch_embed(const std::string& pixels) {
    const int64_t gh = c_.grid_h(), gw = c_.grid_w(), P = c_.patch_dim(), D = c_.embed_dim;
    // [N, C, H, W] -> [N, C, gh, ph, gw, pw] -> [N, gh, gw, C, ph, pw] -> [N, gh*gw, P]
    const std::string r6 =
        b_.op("Reshape", {pixels, b_.ints({0, c_.in_chans, gh, c_.patch_h, gw, c_.patch_w})});
    auto* tr = b_.node("Transpose", {r6});
    GraphBuilder::attr(tr, "perm", std::vector<int64_t>{0, 2, 4, 1, 3, 5});
    const std::string cols = b_.op("Reshape", {tr->output(0), b_.ints({0, gh * gw, P})});
    std::string y =
        b_.op("MatMul", {layernorm(cols, "patch_embed.norm_in"),
                         b_.weight_t("patch_embed.proj.weight", D, P, data("patch_embed.proj.weight"))});
    if (has("patch_embed.proj.bias")) y = b_.op("Add", {y, w("patch_embed.proj.bias")});
    return layernorm(y, "patch_embed.norm");
  }

  // [cls, reg... (or DeiT's dist), patches] with the position embedding, as tokens_forward.
  std::string tokens(std::string x) {
    const bool pos_all = !c_.no_embed_class;
    if (!pos_all) x = b_.op("Add", {x, w("pos_embed")});
    const int64_t P = c_.num_prefix_tokens(), D = c_.embed_dim;
    if (P > 0) {
      std::vector<float> prefix;
      if (c_.class_token) prefix.insert(prefix.end(), data("cls_token"), data("cls_token") + D);
      if (c_.dist_token) prefix.insert(prefix.end(), data("dist_token"), data("dist_token") + D);
      if (c_.reg_tokens > 0)
        prefix.insert(prefix.end(), data("reg_token"), data("reg_token") + c_.reg_tokens * D);
      const std::string pre = b_.weight("prefix_tokens", {1, P, D}, prefix.data());
      // [N, 1, 1] from the input's batch: Expand broadcasts the prefix to [N, P, D].
      auto* batch = b_.node("Shape", {x});
      GraphBuilder::attr(batch, "end", int64_t(1));
      auto* target = b_.node("Concat", {batch->output(0), b_.ints({1, 1})});
      GraphBuilder::attr(target, "axis", int64_t(0));
      auto* cat = b_.node("Concat", {b_.op("Expand", {pre, target->output(0)}), x});
      GraphBuilder::attr(cat, "axis", int64_t(1));
      x = cat->output(0);
    }
    if (pos_all) x = b_.op("Add", {x, w("pos_embed")});
    return x;
  }
  std::string block(const std::string& x, const std::string& p, int64_t T) {
    const int64_t H = c_.num_heads, Dh = c_.head_dim();
    // Attention: qkv [N, T, 3 H Dh] -> [3, N, H, T, Dh] (rows q, k, v as timm's qkv).
    const std::string qkv = linear(layernorm(x, p + "norm1"), p + "attn.qkv");
    const std::string r5 = b_.op("Reshape", {qkv, b_.ints({0, T, 3, H, Dh})});
    auto* tr = b_.node("Transpose", {r5});
    GraphBuilder::attr(tr, "perm", std::vector<int64_t>{2, 0, 3, 1, 4});
    auto part = [&](int64_t i) {
      auto* g = b_.node("Gather", {tr->output(0), b_.int_scalar(i)});
      GraphBuilder::attr(g, "axis", int64_t(0));
      return g->output(0);  // [N, H, T, Dh]
    };
    const std::string q = part(0), k = part(1), v = part(2);
    auto* kt = b_.node("Transpose", {k});
    GraphBuilder::attr(kt, "perm", std::vector<int64_t>{0, 1, 3, 2});
    const std::string scores =
        b_.op("Mul", {b_.op("MatMul", {q, kt->output(0)}), b_.scalar(1.f / std::sqrt(float(Dh)))});
    auto* sm = b_.node("Softmax", {scores});
    GraphBuilder::attr(sm, "axis", int64_t(-1));
    auto* ot = b_.node("Transpose", {b_.op("MatMul", {sm->output(0), v})});
    GraphBuilder::attr(ot, "perm", std::vector<int64_t>{0, 2, 1, 3});
    const std::string ao = b_.op("Reshape", {ot->output(0), b_.ints({0, T, H * Dh})});
    std::string branch = linear(ao, p + "attn.proj");
    if (c_.layer_scale()) branch = b_.op("Mul", {branch, w(p + "ls1.gamma")});
    const std::string r1 = b_.op("Add", {x, branch});
    const std::string h = linear(layernorm(r1, p + "norm2"), p + "mlp.fc1");
    branch = linear(activation(h), p + "mlp.fc2");
    if (c_.layer_scale()) branch = b_.op("Mul", {branch, w(p + "ls2.gamma")});
    return b_.op("Add", {r1, branch});
  }

  // timm's AttentionPoolLatent on x [N, T, D] -> [N, D]: the latent's query (one, shared by
  // the batch: [1, H, 1, Dh], broadcast by MatMul) over kv(x)'s keys and values, proj, then
  // y + mlp(norm(y)).
  std::string attn_pool(const std::string& x, int64_t T) {
    const int64_t H = c_.num_heads, D = c_.embed_dim, Dh = D / H;
    const std::string q0 = linear(w("attn_pool.latent"), "attn_pool.q");  // [1, 1, D]
    auto* q = b_.node("Transpose", {b_.op("Reshape", {q0, b_.ints({1, 1, H, Dh})})});
    GraphBuilder::attr(q, "perm", std::vector<int64_t>{0, 2, 1, 3});
    const std::string kv = b_.op("Reshape", {linear(x, "attn_pool.kv"), b_.ints({0, T, 2, H, Dh})});
    auto* tr = b_.node("Transpose", {kv});
    GraphBuilder::attr(tr, "perm", std::vector<int64_t>{2, 0, 3, 1, 4});  // [2, N, H, T, Dh]
    auto part = [&](int64_t i) {
      auto* g = b_.node("Gather", {tr->output(0), b_.int_scalar(i)});
      GraphBuilder::attr(g, "axis", int64_t(0));
      return g->output(0);
    };
    auto* kt = b_.node("Transpose", {part(0)});
    GraphBuilder::attr(kt, "perm", std::vector<int64_t>{0, 1, 3, 2});
    const std::string scores =
        b_.op("Mul", {b_.op("MatMul", {q->output(0), kt->output(0)}), b_.scalar(1.f / std::sqrt(float(Dh)))});
    auto* sm = b_.node("Softmax", {scores});
    GraphBuilder::attr(sm, "axis", int64_t(-1));
    const std::string ao = b_.op("Reshape", {b_.op("MatMul", {sm->output(0), part(1)}), b_.ints({0, D})});
    const std::string y = linear(ao, "attn_pool.proj");  // [N, D]
    const std::string h = linear(layernorm(y, "attn_pool.norm"), "attn_pool.mlp.fc1");
    return b_.op("Add", {y, linear(activation(h), "attn_pool.mlp.fc2")});
  }

  const ViT& m_;
  const float* params_;
  const ViTConfig& c_;
  GraphBuilder& b_;
  bool int8_;  // the blocks' products in int8
};

// An ostream's buffer onto an AtomicFile, 1 MiB at a time (protobuf serializes to an ostream).
// A failed write (a full disk) is kept, not thrown: protobuf's stream flushes in its
// destructor, where an exception ends the program. error() then says what failed.
class AtomicFileBuf : public std::streambuf {
 public:
  explicit AtomicFileBuf(AtomicFile& f) : f_(f), buf_(size_t(1) << 20) {
    setp(buf_.data(), buf_.data() + buf_.size());
  }
  size_t written() const { return written_ + size_t(pptr() - pbase()); }
  const std::string& error() const { return error_; }

 protected:
  int_type overflow(int_type c) override {
    if (sync() != 0) return traits_type::eof();
    if (!traits_type::eq_int_type(c, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(c);
      pbump(1);
    }
    return traits_type::not_eof(c);
  }
  int sync() override {
    if (!error_.empty()) return -1;
    const size_t n = size_t(pptr() - pbase());
    try {
      f_.write(std::string_view(pbase(), n));
    } catch (const Error& e) {  // names the file and the reason
      error_ = e.what();
      return -1;
    }
    written_ += n;
    setp(buf_.data(), buf_.data() + buf_.size());
    return 0;
  }

 private:
  AtomicFile& f_;
  std::vector<char> buf_;
  size_t written_ = 0;
  std::string error_;
};

void set_shape(onnx::ValueInfoProto* v, const std::string& name, const std::vector<int64_t>& dims) {
  v->set_name(name);
  auto* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  auto* s = t->mutable_shape();
  s->add_dim()->set_dim_param("batch");
  for (int64_t d : dims) s->add_dim()->set_dim_value(d);
}

// Moves every initializer of at least 1 KiB (ONNX's convert_model_to_external_data
// threshold) out of the model into one data file, `data_path` beside it, as ONNX's external
// data: each tensor keeps its name, shape and type and says where its bytes are (location,
// offset, length; offsets aligned to 64 bytes). Written as it goes, each initializer's
// memory freed once written: the data file was built whole in memory first (ViT-H's export
// held it beside the initializers and the model).
// out is committed by the caller, once the model is written too.
void externalize(onnx::GraphProto& g, const std::string& data_path, AtomicFile& out) {
  const std::string data_name = fs::path(data_path).filename().string();
  size_t size = 0;
  for (onnx::TensorProto& t : *g.mutable_initializer()) {
    if (t.raw_data().size() < 1024) continue;
    const size_t offset = (size + 63) / 64 * 64, length = t.raw_data().size();
    out.write(std::string(offset - size, '\0'));
    out.write(t.raw_data());
    size = offset + length;
    std::string().swap(*t.mutable_raw_data());  // clear_raw_data() kept the capacity
    t.clear_raw_data();
    t.set_data_location(onnx::TensorProto::EXTERNAL);
    for (auto [key, value] : {std::pair<std::string, std::string>{"location", data_name},
                              {"offset", std::to_string(offset)},
                              {"length", std::to_string(length)}}) {
      auto* e = t.add_external_data();
      e->set_key(key);
      e->set_value(value);
    }
  }
}

void add_metadata(onnx::ModelProto& m, const std::string& key, const std::string& value) {
  auto* p = m.add_metadata_props();
  p->set_key(key);
  p->set_value(value);
}

}  // namespace

bool onnx_export_available() {
  return true;
}

OnnxExportInfo export_onnx(const ViT& model, const std::string& path,
                           const std::vector<std::string>& class_names, int64_t external_from, bool int8) {
  const ViTConfig& c = model.config();
  const float* params = model.fp32_params(path + ": not exported");
  onnx::ModelProto m;
  m.set_ir_version(onnx::IR_VERSION);
  m.set_producer_name("vitcpp");
  m.set_producer_version(version());
  m.set_model_version(1);
  m.set_doc_string(
      "Vision Transformer exported by vitcpp: pixel_values (normalized) -> logits (features "
      "for a model without a head)");
  auto* opset = m.add_opset_import();
  opset->set_domain("");
  opset->set_version(kOpset);
  onnx::GraphProto& g = *m.mutable_graph();
  g.set_name("vit");
  set_shape(g.add_input(), "pixel_values", {c.in_chans, c.img_h, c.img_w});
  // A model without a head (num_classes 0) gives its embedding: timm's pre-logits.
  const std::string out = c.num_classes > 0 ? "logits" : "features";
  set_shape(g.add_output(), out, {c.num_classes > 0 ? c.num_classes : c.embed_dim});
  GraphBuilder b(g);
  VitGraph(model, params, b, int8).build("pixel_values", out);

  using json = nlohmann::json;
  add_metadata(m, "vitcpp_config", c.to_json(-1));
  add_metadata(m, "input_size", json({c.in_chans, c.img_h, c.img_w}).dump());
  // timm's pretrained_cfg keys, floats as their shortest decimal (0.485, not 0.48500001430511475).
  auto decimals = [](const std::vector<float>& v) {
    json out = json::array();
    for (float f : v) out.push_back(shortest_decimal(f));
    return out.dump();
  };
  add_metadata(m, "mean", decimals(c.mean));
  add_metadata(m, "std", decimals(c.std));
  add_metadata(m, "interpolation", c.interpolation);
  add_metadata(m, "crop_pct", json(c.crop_pct).dump());
  add_metadata(m, "crop_mode", c.crop_mode);
  if (!class_names.empty()) add_metadata(m, "class_names", json(class_names).dump());
  if (int8)
    add_metadata(m, "quantization",
                 "int8: the blocks' products as onnxruntime's quantize_dynamic(per_channel=True)");

  try {
    onnx::checker::check_model(m);
    // Strict shape inference: every node's output shape must follow from its inputs.
    onnx::shape_inference::InferShapes(m, onnx::OpSchemaRegistry::Instance(),
                                       onnx::ShapeInferenceOptions(true, 1, false));
  } catch (const std::exception& e) {
    throw Error(path +
                ": the ONNX graph vitcpp built does not pass ONNX's checks (a vitcpp bug): " + e.what());
  }
  // protobuf refuses messages of 2 GiB or more (ViT-H/14's weights alone are 2.5 GB): the
  // weights then go to a data file beside the model, as ONNX's external data.
  OnnxExportInfo info{g.node_size(), g.initializer_size(), kOpset, 0, ""};
  // The initializers as written (an int8 graph's products in bytes: ViT-H's 0.6 GB went out
  // as if it were its 2.5 GB of floats).
  int64_t weight_bytes = 0;
  for (const onnx::TensorProto& t : g.initializer())
    weight_bytes += int64_t(t.raw_data().size()) + 4 * int64_t(t.float_data_size()) +
                    4 * int64_t(t.int32_data_size()) + 8 * int64_t(t.int64_data_size());
  // The data file goes in place with the model, after the model is written: a failed model write
  // left the new data beside the old model, which then read weights of another model.
  std::optional<AtomicFile> data;
  if (external_from >= 0 ? weight_bytes >= external_from : weight_bytes > (int64_t(1) << 30) * 3 / 2) {
    // /dev/stdout (even redirected to a file: the data went to /dev/stdout.data), a pipe: no
    // file to set the data beside.
    std::error_code ec;
    const bool stream = path.starts_with("/dev/") || path.starts_with("/proc/self/fd/") ||
                        (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec));
    VIT_CHECK(!stream, path, ": the ", weight_bytes >> 20,
              " MiB of weights go to ONNX external data, a file beside the model's: give "
              "the model a file name, not a stream");
    info.data_file = path + ".data";
    data.emplace(info.data_file);
    externalize(g, info.data_file, *data);
  }
  // Streamed to the file (a whole string of it was one more copy of the weights).
  AtomicFile file(path);
  AtomicFileBuf buf(file);
  std::ostream os(&buf);
  const bool serialized = m.SerializeToOstream(&os) && os.flush();
  if (!buf.error().empty()) throw Error(buf.error());
  VIT_CHECK(serialized, path, ": protobuf could not serialize the ONNX model");
  if (data) data->commit();
  file.commit();
  info.bytes = buf.written();
  return info;
}

std::string check_onnx_file(const std::string& path) {
  check_not_directory(path);
  onnx::ModelProto m;
  VIT_CHECK(m.ParseFromString(read_text_file(path)), path,
            ": not an ONNX model (protobuf could not parse it)");
  try {
    onnx::checker::check_model(path);  // reads the file itself, as onnx.checker.check_model(path)
  } catch (const std::exception& e) {
    throw Error(path + ": ONNX's checker: " + e.what());
  }
  // "name float [batch,3,224,224]", appended to out.
  auto describe = [](const onnx::ValueInfoProto& v, std::string& out) {
    out.append(v.name());
    out.append(v.type().tensor_type().elem_type() == onnx::TensorProto::FLOAT ? " float [" : " ? [");
    const auto& shape = v.type().tensor_type().shape();
    for (int i = 0; i < shape.dim_size(); ++i) {
      if (i) out.append(",");
      out.append(shape.dim(i).has_dim_param() ? shape.dim(i).dim_param()
                                              : std::to_string(shape.dim(i).dim_value()));
    }
    out.append("]");
  };
  std::string out;
  for (int i = 0; i < m.graph().input_size(); ++i) {
    if (i) out.append(", ");
    describe(m.graph().input(i), out);
  }
  out.append(" ->");
  for (const auto& v : m.graph().output()) {
    out.append(" ");
    describe(v, out);
  }
  return out;
}

}  // namespace vit
