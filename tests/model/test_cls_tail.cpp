// The class-token tail (ViT::use_cls_tail): with class-token pooling the last block runs for
// the class token's row alone after its qkv product. Against the same model with the tail
// off (every row of the last block computed): the same logits, loss and every gradient to
// float rounding, in training and in every inference path (plain, packed, bf16, attention
// maps), over the model's options: a patch mask, attention dropout and drop path (whose draws
// both paths share), LayerScale, register tokens, pos_embed on the patches only, norm_pre, no
// qkv bias, widths that run in oneDNN, shards, and mixed precision.
#include <cstring>

#include "core/threads.h"
#include "model/vit.h"
#include "support/check.h"
#include "support/models.h"
#include "train/step.h"

namespace vit {

struct TailCase {
  std::string name;
  bool mask = false;
  bool dropout = false;  // attention dropout and drop path: the same draws with the tail
  bool extras = false;   // LayerScale, 2 register tokens, no_embed_class, norm_pre, no qkv bias
  bool wide = false;     // 48 dims, mlp 96: the products run in oneDNN's sgemm
  int shards = 1;
  bool amp = false;
  int64_t dim_head = 0;    // heads of their own width (vit-pytorch's): 2 heads of 32 on 48 dims
  bool distilled = false;  // DeiT's distillation token and head: the tail keeps two rows a sample
  bool kd = false;         // a distilling step (a teacher's logits): the two heads apart
};
void PrintTo(const TailCase& tc, std::ostream* os) {
  *os << tc.name;
}

namespace {

ViTConfig config(const TailCase& tc) {
  ViTConfig c = tc.wide ? test::with_width(test::tiny_vit(), 48, 2, 96) : test::tiny_vit();
  if (tc.dropout) {
    c.attn_drop_rate = 0.2f;
    c.drop_path_rate = 0.5f;
    c.pos_drop_rate = 0.1f;
    c.drop_rate = 0.1f;
  }
  if (tc.extras) {
    c.init_values = 0.5f;
    c.reg_tokens = 2;
    c.no_embed_class = true;
    c.pre_norm = true;
    c.qkv_bias = false;
  }
  c.dim_head = tc.dim_head;
  if (tc.distilled) {
    c.dist_token = c.head_dist = true;
    c.drop_rate = 0.f;  // a distilled head has no dropout
  }
  return c;
}

void randomize(ViT& m, uint64_t seed, double scale) {
  Rng rng(seed);
  for (auto& s : m.table().specs())
    if (s.trainable)
      for (int64_t i = 0; i < s.numel(); ++i) m.params().data()[s.offset + i] = float(rng.normal() * scale);
}

struct Result {
  std::vector<float> logits, grads;
  double loss = 0;
  size_t activation_bytes = 0;
};

Result train_step(const TailCase& tc, bool tail) {
  const ViTConfig c = config(tc);
  ViT m(c);
  randomize(m, 5, 0.4 * std::sqrt(8.0 / double(c.embed_dim)));
  m.set_cls_tail(tail);
  m.set_shards(tc.shards);
  if (tc.amp) m.set_amp(true);
  const int64_t B = 4;
  auto x = test::randn(B * 2 * 8 * 12, 7);
  std::vector<int64_t> labels = {0, 2, 1, 1};
  std::vector<uint8_t> mask = {1, 1, 1, 1, 0, 1, 1, 0, 1, 1, 1, 0, 0, 0, 1, 1};  // [B, 4 patches]
  LossStep step;
  m.zero_grad();
  Result r;
  const std::vector<float> teacher = test::randn(B * c.num_classes, 9);
  const Distillation kd{teacher.data(), {}};
  r.loss = step.run(m, Batch{x.data(), B, labels.data(), nullptr, tc.mask ? mask.data() : nullptr}, 0.1f,
                    ForwardMode{true, 17, 3}, nullptr, 1.f, tc.kd ? &kd : nullptr);
  const Tensor logits = m.forward(x.data(), B, tc.mask ? mask.data() : nullptr, ForwardMode{true, 17, 3});
  r.logits.assign(logits.data, logits.data + logits.numel());
  r.grads.assign(m.grads().data(), m.grads().data() + m.table().total());
  r.activation_bytes = m.activation_bytes();
  return r;
}
}  // namespace

class ClsTail : public ::testing::TestWithParam<TailCase> {};

TEST_P(ClsTail, TrainingStepMatchesTheFullLastBlock) {
  const TailCase tc = GetParam();
  if (tc.amp && !ops::bf16_available()) GTEST_SKIP() << "no bf16 matrix product on this CPU";
  if (tc.shards > 1) set_num_threads(tc.shards);
  const Result full = train_step(tc, false), tail = train_step(tc, true);
  if (tc.shards > 1) set_num_threads(0);
  // The tail is what ran: it keeps less (the last block's activations on one row a sample).
  EXPECT_LT(tail.activation_bytes, full.activation_bytes);
  // amp rounds each product's input to bf16, and the tail's rows go through other products.
  const double tol = tc.amp ? 2e-2 : 1e-4;
  EXPECT_NEAR(tail.loss, full.loss, tol * std::abs(full.loss));
  EXPECT_TRUE(test::close_rel_max(tc.name + ": logits", tail.logits.data(), full.logits.data(),
                                  int64_t(full.logits.size()), tol));
  ViT names(config(tc), false);
  for (auto& s : names.table().specs()) {
    if (!s.trainable) continue;
    EXPECT_TRUE(test::close_rel_max(tc.name + ": grad " + s.name, tail.grads.data() + s.offset,
                                    full.grads.data() + s.offset, s.numel(), tol, 1e-6));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Variants, ClsTail,
    ::testing::Values(TailCase{"plain"}, TailCase{"mask", true}, TailCase{"dropout", true, true},
                      TailCase{"extras", true, false, true}, TailCase{"wide", false, false, false, true},
                      TailCase{"shards", true, true, false, false, 2},
                      TailCase{"amp", false, false, false, true, 1, true},
                      TailCase{"dim_head", true, true, false, true, 2, false, 32},
                      TailCase{"amp_dim_head", false, false, false, true, 1, true, 32},
                      TailCase{"distilled", true, true, false, false, 1, false, 0, true},
                      TailCase{"distilled_wide_shards_kd", true, true, false, true, 2, false, 0, true, true}),
    [](const auto& info) { return info.param.name; });

// Inference: plain fp32, weights packed, bf16 products, and with attention maps (which run
// the full last block, whose class-token row the maps show): the tail's logits.
TEST(ClsTailInference, EveryPathGivesTheFullLastBlocksLogits) {
  TailCase tc{"infer", true, false, true, true};
  const ViTConfig c = config(tc);
  ViT full(c), tail(c);
  randomize(full, 6, 0.2);
  std::memcpy(tail.params().data(), full.params().data(), sizeof(float) * full.params().size());
  full.set_cls_tail(false);
  const int64_t B = 3, K = 3;
  auto x = test::randn(B * 2 * 8 * 12, 8);
  std::vector<uint8_t> mask = {1, 0, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1};
  std::vector<float> want(B * K), got(B * K);
  full.infer(x.data(), B, mask.data(), want.data());
  tail.infer(x.data(), B, mask.data(), got.data());
  // Inference keeps one block's buffers for every block: the tail's few rows come on top.
  EXPECT_GT(tail.activation_bytes(), full.activation_bytes());
  EXPECT_TRUE(test::close_rel_max("fp32", got.data(), want.data(), B * K, 1e-5));
  const int64_t T = c.num_tokens();
  std::vector<float> maps(size_t(c.depth * B * c.num_heads * T * T));
  tail.infer(x.data(), B, mask.data(), got.data(), maps.data());
  EXPECT_TRUE(test::close_rel_max("with attention maps", got.data(), want.data(), B * K, 1e-5));
  full.pack_weights();
  tail.pack_weights();
  full.infer(x.data(), B, mask.data(), want.data());
  tail.infer(x.data(), B, mask.data(), got.data());
  EXPECT_TRUE(test::close_rel_max("packed", got.data(), want.data(), B * K, 1e-5));
  if (!ops::bf16_available()) return;
  full.unpack_weights();
  tail.unpack_weights();
  full.set_infer_dtype("bf16");
  tail.set_infer_dtype("bf16");
  full.infer(x.data(), B, mask.data(), want.data());
  tail.infer(x.data(), B, mask.data(), got.data());
  EXPECT_TRUE(test::close_rel_max("bf16", got.data(), want.data(), B * K, 1e-2));
}

// Average pooling reads every token: no tail there.
TEST(ClsTailInference, AvgPoolingKeepsEveryRow) {
  ViTConfig c = config(TailCase{"avg"});
  c.global_pool = "avg";
  EXPECT_FALSE(ViT::cls_tail_applies(c));
  c.global_pool = "token";
  EXPECT_TRUE(ViT::cls_tail_applies(c));
  c.class_token = false;
  EXPECT_FALSE(ViT::cls_tail_applies(c));
}

}  // namespace vit
