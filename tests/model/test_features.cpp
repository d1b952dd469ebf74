// Features out (ViT::infer_features, timm's forward_head(pre_logits=True) and
// forward_features) and models without a head (num_classes 0). The features are tied to the
// logits, which the PyTorch fixtures check: the head applied to the pooled features gives
// the logits, and pooling the tokens as the model does gives the pooled features.
#include <cmath>
#include <string>
#include <vector>

#include "io/pretrained.h"
#include "model/vit.h"
#include "support/check.h"
#include "support/models.h"
#include "support/temp_dir.h"

namespace vit {

namespace {
// Weights at a scale where every layer matters (timm's 0.02 init makes the blocks near-identity).
void randomize(ViT& m, uint64_t seed) {
  Rng rng(seed);
  for (auto& s : m.table().specs())
    for (int64_t i = 0; i < s.numel(); ++i) m.params().data()[s.offset + i] = float(rng.normal() * 0.3);
}

struct Features {
  std::vector<float> logits, pooled, tokens;
};

Features run_all(ViT& m, const std::vector<float>& x, int64_t B) {
  const ViTConfig& c = m.config();
  Features f{std::vector<float>(B * c.num_classes), std::vector<float>(B * c.embed_dim),
             std::vector<float>(B * c.num_tokens() * c.embed_dim)};
  if (m.has_head()) m.infer(x.data(), B, nullptr, f.logits.data());
  m.infer_features(x.data(), B, nullptr, f.pooled.data(), f.tokens.data());
  return f;
}

// The variants of the final norm and pooling: token pooling with `norm`, avg with fc_norm
// (timm's default for avg), avg with `norm` over every token (and a register token), DeiT's
// distilled head (the mean of the class and distillation tokens), the attention pool (map).
ViTConfig variant(const std::string& v) {
  ViTConfig c = test::tiny_vit(v == "token" || v == "distilled" ? "token" : v == "map" ? "map" : "avg");
  if (v == "avg_norm") {
    c.fc_norm = false;
    c.reg_tokens = 1;
  }
  c.dist_token = c.head_dist = v == "distilled";
  return c;
}
}  // namespace

class FeaturesOf : public ::testing::TestWithParam<std::string> {};

// Tolerance 1e-5 of the largest value for the head and pooling recomputed here in double;
// 1e-4 where the model's pooled row came through the class-token tail (another kernel for
// the last block's attention than the full block the tokens came from).
TEST_P(FeaturesOf, HeadOfPooledIsTheLogitsAndPoolingTheTokensIsPooled) {
  const ViTConfig c = variant(GetParam());
  ViT m(c);
  randomize(m, 3);
  // A distilled head whose two linears are one: its logits (the mean of the heads') are then
  // that linear on the features (the mean of the two tokens).
  if (c.head_dist) {
    ops::copy(m.param("head_dist.weight"), m.param("head.weight"));
    ops::copy(m.param("head_dist.bias"), m.param("head.bias"));
  }
  const int64_t B = 3, D = c.embed_dim, T = c.num_tokens(), K = c.num_classes, pre = c.num_prefix_tokens();
  const auto x = test::randn(B * c.in_chans * c.img_h * c.img_w, 11);
  const Features f = run_all(m, x, B);

  const Tensor hw = m.param("head.weight"), hb = m.param("head.bias");
  std::vector<float> head(B * K);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t k = 0; k < K; ++k) {
      double z = hb.data[k];
      for (int64_t d = 0; d < D; ++d) z += double(hw.data[k * D + d]) * f.pooled[b * D + d];
      head[b * K + k] = float(z);
    }
  EXPECT_TRUE(test::close_rel_max("head(pooled) vs logits", head.data(), f.logits.data(), B * K, 1e-5));
  // The attention pool of the tokens is checked against PyTorch (TorchFixture's map_pool).
  if (c.map_pool()) return;

  std::vector<float> pooled(B * D);
  for (int64_t b = 0; b < B; ++b) {
    const float* t = f.tokens.data() + b * T * D;
    std::vector<double> v(D, 0.0);
    if (c.head_dist) {
      for (int64_t d = 0; d < D; ++d) v[d] = (double(t[d]) + t[D + d]) / 2;  // class, distillation
    } else if (!c.avg_pool()) {
      for (int64_t d = 0; d < D; ++d) v[d] = t[d];  // the class token
    } else {
      for (int64_t i = pre; i < T; ++i)
        for (int64_t d = 0; d < D; ++d) v[d] += t[i * D + d] / double(T - pre);
    }
    if (c.use_fc_norm()) {  // the tokens are not normed: fc_norm comes after the pooling
      double mean = 0, var = 0;
      for (double e : v) mean += e / double(D);
      for (double e : v) var += (e - mean) * (e - mean) / double(D);
      const Tensor w = m.param("fc_norm.weight"), bias = m.param("fc_norm.bias");
      for (int64_t d = 0; d < D; ++d)
        v[d] = (v[d] - mean) / std::sqrt(var + c.norm_eps) * w.data[d] + bias.data[d];
    }
    for (int64_t d = 0; d < D; ++d) pooled[b * D + d] = float(v[d]);
  }
  EXPECT_TRUE(test::close_rel_max("pooled tokens vs pooled", pooled.data(), f.pooled.data(), B * D,
                                  ViT::cls_tail_applies(c) ? 1e-4 : 1e-5));
}

INSTANTIATE_TEST_SUITE_P(Pooling, FeaturesOf,
                         ::testing::Values("token", "avg_fc_norm", "avg_norm", "distilled", "map"));

// Two shards give each row what one model gives it, to float rounding (the products' bits
// may depend on their row count).
TEST(Features, ShardsGiveTheRowsOneModelGives) {
  const ViTConfig c = variant("token");
  ViT one(c), two(c);
  randomize(one, 4);
  randomize(two, 4);
  one.set_shards(1);
  two.set_shards(2);
  const int64_t B = 4, D = c.embed_dim, T = c.num_tokens();
  const auto x = test::randn(B * c.in_chans * c.img_h * c.img_w, 12);
  const Features a = run_all(one, x, B), b = run_all(two, x, B);
  EXPECT_TRUE(test::close_rel_max("pooled", b.pooled.data(), a.pooled.data(), B * D, 1e-5));
  EXPECT_TRUE(test::close_rel_max("tokens", b.tokens.data(), a.tokens.data(), B * T * D, 1e-5));
}

TEST(Headless, ValidatesWithoutHeadParametersAndOnlyGivesFeatures) {
  ViTConfig c = test::tiny_vit();
  const ViTConfig with_head = c;
  c.num_classes = 0;
  EXPECT_NO_THROW(c.validate());
  ViT h(c), m(with_head);
  EXPECT_EQ(h.table().find("head.weight"), nullptr);
  EXPECT_EQ(h.table().find("head.bias"), nullptr);
  auto count = [](const ParamTable& t) {
    int64_t n = 0;
    for (const auto& s : t.specs()) n += s.numel();
    return n;
  };
  EXPECT_EQ(count(h.table()) + with_head.num_classes * (c.embed_dim + 1), count(m.table()));
  EXPECT_FALSE(h.has_head());

  const int64_t B = 2;
  const auto x = test::randn(B * c.in_chans * c.img_h * c.img_w, 13);
  std::vector<float> logits(B * 3);
  EXPECT_NE(test::error_of([&] { h.infer(x.data(), B, nullptr, logits.data()); }).find("no classifier head"),
            std::string::npos);
  EXPECT_NE(test::error_of([&] { h.forward(x.data(), B, nullptr, {}); }).find("no classifier head"),
            std::string::npos);

  // The same backbone with and without a head: the same features, bit for bit.
  randomize(m, 5);
  for (const auto& s : h.table().specs())
    std::copy_n(m.params().data() + m.table().at(s.name).offset, s.numel(), h.params().data() + s.offset);
  const Features a = run_all(m, x, B), b = run_all(h, x, B);
  EXPECT_EQ(a.pooled, b.pooled);
  EXPECT_EQ(a.tokens, b.tokens);

  c.num_classes = -1;
  EXPECT_NE(test::error_of([&] { c.validate(); }).find("num_classes"), std::string::npos);
}

// A headless timm checkpoint loads as a headless model; --num-classes gives it a new head.
TEST(Headless, TimmCheckpointWithoutHeadLoadsForFeatures) {
  ViTConfig c = test::tiny_vit();
  c.num_classes = 0;
  ViT h(c);
  randomize(h, 6);
  test::TempDir tmp("headless");
  export_timm(h, tmp.str(), {});
  const Pretrained p = load_pretrained(tmp.str());
  EXPECT_EQ(p.model->config().num_classes, 0);
  const int64_t B = 2;
  const auto x = test::randn(B * c.in_chans * c.img_h * c.img_w, 14);
  EXPECT_EQ(run_all(h, x, B).pooled, run_all(*p.model, x, B).pooled);

  LoadOptions opt;
  opt.num_classes = 4;
  const Pretrained q = load_pretrained(tmp.str(), opt);
  ASSERT_EQ(q.model->config().num_classes, 4);
  const Features f = run_all(*q.model, x, B);
  EXPECT_EQ(f.logits, std::vector<float>(B * 4, 0.f));  // the zero-initialized new head
}

}  // namespace vit
