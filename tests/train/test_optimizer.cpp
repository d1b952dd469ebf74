// Optimizers against the update rules of torch.optim written out in double, weight-decay
// groups, gradient clipping and the schedules.
#include <cmath>
#include <cstring>

#include "core/check.h"
#include "model/vit.h"
#include "support/check.h"
#include "train/optimizer.h"
#include "train/schedule.h"

namespace vit {

namespace {
// Reference updates for one scalar, as torch.optim documents them.
struct RefState {
  double m = 0, v = 0;
};
double ref_update(const OptimConfig& c, double p, double g, double lr, int t, RefState& s, bool decay) {
  const double wd = decay ? c.weight_decay : 0.0;
  if (c.name == "sgd") {
    double d = g + wd * p;
    if (c.momentum > 0) {
      s.m = t == 1 ? d : c.momentum * s.m + d;
      d = c.nesterov ? d + c.momentum * s.m : s.m;
    }
    return p - lr * d;
  }
  if (c.name == "adamw")
    p *= 1 - lr * wd;
  else
    g += wd * p;
  s.m = c.beta1 * s.m + (1 - c.beta1) * g;
  s.v = c.beta2 * s.v + (1 - c.beta2) * g * g;
  const double mh = s.m / (1 - std::pow(c.beta1, t)), vh = s.v / (1 - std::pow(c.beta2, t));
  return p - lr * mh / (std::sqrt(vh) + c.eps);
}
}  // namespace

class OptimizerRule : public ::testing::TestWithParam<OptimConfig> {};

TEST_P(OptimizerRule, MatchesTorchFormulas) {
  const OptimConfig oc = GetParam();
  ViTConfig cfg = preset("mnist-seed");
  ParamTable table(cfg);
  auto p = test::randn(table.total(), 1), p0 = p;
  Optimizer opt(table, oc);
  std::vector<double> ref(p.begin(), p.end());
  std::vector<RefState> st(table.total());
  for (int t = 1; t <= 4; ++t) {
    auto g = test::randn(table.total(), 100 + t);
    const float lr = 0.01f * t;
    opt.step(p.data(), g.data(), lr);
    for (auto& s : table.specs())
      for (int64_t i = s.offset; i < s.offset + s.numel(); ++i)
        if (s.trainable) ref[i] = ref_update(oc, ref[i], g[i], lr, t, st[i], s.decay);
  }
  std::vector<float> want(ref.begin(), ref.end());
  EXPECT_TRUE(
      test::close_rel_max(oc.name + " params after 4 steps", p.data(), want.data(), table.total(), 1e-6));
  // A fixed tensor (sincos pos_embed) never moves.
  const auto& pos = table.at("pos_embed");
  EXPECT_EQ(0, std::memcmp(p.data() + pos.offset, p0.data() + pos.offset, pos.numel() * sizeof(float)));
}

OptimConfig oc(std::string name, float wd, float momentum = 0.9f, bool nesterov = false) {
  OptimConfig c;
  c.name = std::move(name);
  c.weight_decay = wd;
  c.momentum = momentum;
  c.nesterov = nesterov;
  return c;
}

INSTANTIATE_TEST_SUITE_P(Rules, OptimizerRule,
                         ::testing::Values(oc("sgd", 0.f, 0.f), oc("sgd", 1e-2f),
                                           oc("sgd", 1e-2f, 0.9f, true), oc("adam", 0.f), oc("adam", 0.05f),
                                           oc("adamw", 0.05f)),
                         [](const auto& info) { return info.param.name + std::to_string(info.index); });

TEST(Optimizer, RejectsBadSettings) {
  ParamTable table(preset("mnist-seed"));
  EXPECT_THROW(Optimizer(table, oc("lars", 0.f)), Error);
  EXPECT_THROW(Optimizer(table, oc("sgd", -1.f)), Error);
  EXPECT_THROW(Optimizer(table, oc("sgd", 0.f, 0.f, true)), Error);
}

TEST(LayerDecay, ScalesAsTimmParamGroupsLayerDecay) {
  ViTConfig c = preset("mnist-seed");  // depth 2
  c.pos_embed = "learn";
  const ParamTable table(c);
  const auto s = lr_scales(table, 0.5f, false);
  auto at = [&](const std::string& name) {
    for (size_t k = 0; k < table.specs().size(); ++k)
      if (table.specs()[k].name == name) return s[k];
    ADD_FAILURE() << name;
    return -1.f;
  };
  EXPECT_FLOAT_EQ(at("patch_embed.proj.weight"), 0.125f);  // 0.5^(2 + 1 - 0)
  EXPECT_FLOAT_EQ(at("cls_token"), 0.125f);
  EXPECT_FLOAT_EQ(at("pos_embed"), 0.125f);
  EXPECT_FLOAT_EQ(at("blocks.0.attn.qkv.weight"), 0.25f);
  EXPECT_FLOAT_EQ(at("blocks.1.mlp.fc2.bias"), 0.5f);
  // timm's (r'^norm', MATCH_PREV_GROUP): the final norm with the last block (it had 1, the
  // head's, here: 1.54x timm's lr in a fine-tune at 0.65).
  EXPECT_FLOAT_EQ(at("norm.weight"), 0.5f);
  EXPECT_FLOAT_EQ(at("head.weight"), 1.f);
  {
    ViTConfig g = c;  // norm_pre matches the same regex; fc_norm does not (the head's group)
    g.pre_norm = true;
    g.global_pool = "avg";
    g.fc_norm = true;
    const ParamTable tg(g);
    const auto sg = lr_scales(tg, 0.5f, false);
    for (size_t k = 0; k < tg.specs().size(); ++k) {
      const std::string& n = tg.specs()[k].name;
      if (n.rfind("norm_pre.", 0) == 0) {
        EXPECT_FLOAT_EQ(sg[k], 0.5f) << n;
      }
      if (n.rfind("fc_norm.", 0) == 0) {
        EXPECT_FLOAT_EQ(sg[k], 1.f) << n;
      }
    }
  }
  for (float v : lr_scales(table, 0.f, false)) EXPECT_EQ(v, 1.f);
  const auto frozen = lr_scales(table, 0.75f, true);
  for (size_t k = 0; k < table.specs().size(); ++k)
    EXPECT_EQ(frozen[k], table.specs()[k].name.rfind("head.", 0) == 0 ? 1.f : 0.f) << table.specs()[k].name;
}

TEST(LayerDecay, FrozenTensorsDoNotMoveEvenWithWeightDecayAndScaledOnesMoveLess) {
  ViTConfig c = preset("mnist-seed");
  c.pos_embed = "learn";
  for (bool freeze : {true, false}) {
    ViT m(c);
    m.init_weights(1);
    const std::vector<float> before(m.params().data(), m.params().data() + m.table().total());
    const auto g = test::randn(m.table().total(), 2);
    OptimConfig oc;
    oc.name = "adamw";
    oc.weight_decay = 0.1f;
    oc.freeze_backbone = freeze;
    oc.layer_decay = 0.5f;
    Optimizer opt(m.table(), oc);
    opt.step(m.params().data(), g.data(), 1e-2f);
    for (const auto& s : m.table().specs()) {
      double moved = 0;
      for (int64_t i = 0; i < s.numel(); ++i)
        moved = std::max(moved, double(std::fabs(m.params().data()[s.offset + i] - before[s.offset + i])));
      const bool head = s.name.rfind("head.", 0) == 0;
      if (freeze && !head) {
        EXPECT_EQ(moved, 0.0) << s.name;
      } else if (!freeze && s.trainable) {
        // Adam's first step moves each weight by lr x scale (g / |g|), plus a little decay.
        const double want = 1e-2 * lr_scales(m.table(), 0.5f, false)[&s - &m.table().specs()[0]];
        EXPECT_NEAR(moved, want, 0.1 * want) << s.name;
      }
    }
  }
}

// mnist-seed's table is one chunk on one thread; cifar-seed's (5.4M floats) is many 64K
// chunks summed on all threads, and a second call reuses the first's buffers.
TEST(ClipGrad, ScalesToMaxNormAndReportsTheNorm) {
  for (const char* name : {"mnist-seed", "cifar-seed"}) {
    ParamTable table(preset(name));
    auto g = test::randn(table.total(), 3);
    double want = 0;
    for (auto& s : table.specs())
      if (s.trainable)
        for (int64_t i = s.offset; i < s.offset + s.numel(); ++i) want += double(g[i]) * g[i];
    want = std::sqrt(want);
    EXPECT_NEAR(clip_grad_norm(table, g.data(), 1.0), want, 1e-9 * want) << name;
    EXPECT_NEAR(grad_norm(table, g.data()), 1.0, 1e-5) << name;
    EXPECT_NEAR(clip_grad_norm(table, g.data(), 10.0), 1.0, 1e-5) << name;  // below the limit: unchanged
    EXPECT_NEAR(grad_norm(table, g.data()), 1.0, 1e-5) << name;
  }
}

TEST(Schedule, WarmupCosineAndStep) {
  ScheduleConfig s;
  s.name = "cosine";
  s.lr = 1.f;
  s.min_lr = 0.1f;
  s.warmup_lr = 0.f;
  s.warmup_steps = 10;
  s.total_steps = 110;
  EXPECT_FLOAT_EQ(lr_at(s, 0), 0.f);
  EXPECT_FLOAT_EQ(lr_at(s, 5), 0.5f);
  EXPECT_FLOAT_EQ(lr_at(s, 10), 1.f);
  EXPECT_NEAR(lr_at(s, 60), 0.55f, 1e-6);  // halfway: (1 + 0.1) / 2
  EXPECT_NEAR(lr_at(s, 110), 0.1f, 1e-6);
  EXPECT_NEAR(lr_at(s, 500), 0.1f, 1e-6);  // floor holds past the end
  s.name = "step";
  s.warmup_steps = 0;
  s.decay_steps = 30;
  s.decay_rate = 0.5f;
  EXPECT_FLOAT_EQ(lr_at(s, 29), 1.f);
  EXPECT_FLOAT_EQ(lr_at(s, 30), 0.5f);
  EXPECT_FLOAT_EQ(lr_at(s, 95), 0.125f);
  s.decay_steps = 4.5;  // --decay-epochs 1.5 at 3 steps an epoch: timm's 9 // 4.5 = 2, not 9 // 5
  EXPECT_FLOAT_EQ(lr_at(s, 4), 1.f);
  EXPECT_FLOAT_EQ(lr_at(s, 5), 0.5f);
  EXPECT_FLOAT_EQ(lr_at(s, 9), 0.25f);
  EXPECT_FLOAT_EQ(lr_at(s, 13), 0.25f);
  EXPECT_FLOAT_EQ(lr_at(s, 14), 0.125f);
  s.decay_steps = 30;
  // multistep as timm's MultiStepLRScheduler: milestone m applies from step m - 1.
  s.name = "multistep";
  s.milestones = {30, 80};
  EXPECT_FLOAT_EQ(lr_at(s, 27), 1.f);
  EXPECT_FLOAT_EQ(lr_at(s, 28), 1.f);
  EXPECT_FLOAT_EQ(lr_at(s, 29), 0.5f);
  EXPECT_FLOAT_EQ(lr_at(s, 78), 0.5f);
  EXPECT_FLOAT_EQ(lr_at(s, 79), 0.25f);
  EXPECT_FLOAT_EQ(lr_at(s, 5000), 0.25f);
  s.warmup_steps = 10;  // the warmup overrides the first steps only
  EXPECT_FLOAT_EQ(lr_at(s, 4), 0.4f);
  EXPECT_FLOAT_EQ(lr_at(s, 29), 0.5f);
  s.warmup_steps = 0;
  s.milestones = {80, 30};
  EXPECT_THROW(s.validate(), Error);
  s.milestones = {};
  s.name = "none";
  EXPECT_FLOAT_EQ(lr_at(s, 1000), 1.f);
  s.lr = -1.f;
  EXPECT_THROW(s.validate(), Error);
}

}  // namespace vit

namespace vit {

// Lamb's trust ratio is a whole tensor's: fc1's 131,072 floats are two pieces of the kernel's
// 64K, whose sums must add up before the ratio. Checked against Lamb's first step computed
// here in double (the fixture test, OptimizerFixtures.LambAsTimms, checks the rule on small
// tensors); tolerance 1e-5 of each tensor's largest weight.
TEST(Optimizer, LambTrustRatiosSpanEveryPieceOfATensor) {
  ViTConfig c = preset("mnist-seed");
  c.embed_dim = 64, c.num_heads = 4, c.mlp_dim = 2048, c.depth = 1;
  ParamTable table(c);
  ASSERT_GT(table.at("blocks.0.mlp.fc1.weight").numel(), int64_t(1) << 16);
  auto params = test::randn(table.total(), 21, 0.05f), grads = test::randn(table.total(), 22, 0.01f);
  // fc1's pieces unlike each other (the second's weights 4x larger, its gradients 4x smaller), so
  // that a ratio per piece would differ from the tensor's.
  const ParamSpec& fc1 = table.at("blocks.0.mlp.fc1.weight");
  for (int64_t i = int64_t(1) << 16; i < fc1.numel(); ++i)
    params[size_t(fc1.offset + i)] *= 4.f, grads[size_t(fc1.offset + i)] *= 0.25f;
  OptimConfig cfg;
  cfg.name = "lamb", cfg.eps = 1e-6f, cfg.weight_decay = 0.05f;
  const float lr = 0.01f;
  std::vector<double> want(params.begin(), params.end());
  double norm = 0;
  for (const auto& s : table.specs())
    for (int64_t i = 0; s.trainable && i < s.numel(); ++i)
      norm += double(grads[s.offset + i]) * grads[s.offset + i];
  const double clip = std::max(std::sqrt(norm), 1.0), b1 = cfg.beta1, b2 = cfg.beta2;
  for (const auto& s : table.specs()) {
    if (!s.trainable) continue;  // mnist-seed's fixed sincos position embedding
    const double wd = s.decay ? cfg.weight_decay : 0.0;
    std::vector<double> u(size_t(s.numel()));
    double uu = 0, pp = 0;
    for (int64_t i = 0; i < s.numel(); ++i) {
      const double g = grads[s.offset + i] / clip, p = params[s.offset + i];
      const double m = (1 - b1) * g, v = (1 - b2) * g * g;  // the first step's moments
      u[size_t(i)] = (m / (1 - b1)) / (std::sqrt(v) / std::sqrt(1 - b2) + cfg.eps) + wd * p;
      uu += u[size_t(i)] * u[size_t(i)], pp += p * p;
    }
    const double ratio = wd != 0 && pp > 0 && uu > 0 ? std::sqrt(pp) / std::sqrt(uu) : 1.0;
    for (int64_t i = 0; i < s.numel(); ++i) want[size_t(s.offset + i)] -= lr * ratio * u[size_t(i)];
  }
  Optimizer opt(table, cfg);
  opt.step(params.data(), grads.data(), lr);
  for (const auto& s : table.specs()) {
    std::vector<float> w(want.begin() + s.offset, want.begin() + s.offset + s.numel());
    EXPECT_TRUE(test::close_rel_max(s.name, params.data() + s.offset, w.data(), s.numel(), 1e-5));
  }
}

}  // namespace vit
