// The training losses and gradient clipping against PyTorch: tools/make_train_fixtures.py
// writes each loss case's logits, targets, loss and d loss / d logits (timm's
// BinaryCrossEntropy in float64), and a small ViT's weights and gradients before and after
// timm's adaptive_clip_grad and torch's clip_grad_value_, and three steps of timm's Lamb, to
// tests/fixtures/train_losses.safetensors. Tolerances: a loss 1e-6 relative, a gradient 1e-5
// relative to its largest magnitude (float32 against float64).
#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "model/config.h"
#include "model/params.h"
#include "ops/ops.h"
#include "support/check.h"
#include "train/optimizer.h"

namespace vit {

namespace {
SafeTensors open_losses() {
  return SafeTensors::open(std::string(VIT_FIXTURE_DIR) + "/train_losses.safetensors");
}

BceOptions bce_options(const nlohmann::json& c) {
  BceOptions o;
  o.threshold = c.contains("target_threshold");
  o.target_threshold = c.value("target_threshold", 0.f);
  o.pos_weight = c.value("pos_weight", 1.f);
  o.sum_classes = c.value("sum_classes", false);
  return o;
}
}  // namespace

TEST(LossFixtures, BinaryCrossEntropyAsTimms) {
  const SafeTensors st = open_losses();
  const auto cases = nlohmann::json::parse(st.metadata().at("cases"));
  ASSERT_GE(cases.size(), 6u);
  for (const auto& c : cases) {
    const std::string n = c.at("name");
    SCOPED_TRACE(n);
    auto logits = st.to_float(n + ".logits");
    const auto& shape = st.at(n + ".logits").shape;
    const int64_t B = shape[0], K = shape[1];
    std::vector<int64_t> labels;
    std::vector<float> targets, probs(B * K), grad(B * K);
    if (st.find(n + ".labels")) labels = st.to_int64(n + ".labels");
    if (st.find(n + ".targets")) targets = st.to_float(n + ".targets");
    Tensor Z(logits.data(), {B, K}), P(probs.data(), {B, K}), TG(targets.data(), {B, K});
    const int64_t* lp = labels.empty() ? nullptr : labels.data();
    const Tensor* tp = targets.empty() ? nullptr : &TG;
    const BceOptions o = bce_options(c);
    const float smoothing = c.value("smoothing", 0.f);
    const float loss = float(ops::bce_forward(P, Z, lp, tp, smoothing, o));
    const auto want_loss = st.to_float(n + ".loss");
    EXPECT_TRUE(test::close_rel_max(n + " loss", &loss, want_loss.data(), 1, 1e-6));
    // The gradient at scale 0.5 (a shard's share of its batch) is half the loss's.
    ops::bce_backward(Tensor(grad.data(), {B, K}), P, lp, tp, smoothing, o, 0.5f);
    auto want = st.to_float(n + ".grad");
    for (float& g : want) g *= 0.5f;
    EXPECT_TRUE(test::close_rel_max(n + " d loss / d logits", grad.data(), want.data(), B * K, 1e-5));
  }
}

TEST(LossFixtures, BinaryCrossEntropyRefusesWhatItCannotRead) {
  std::vector<float> z(6), p(6);
  std::vector<int64_t> labels = {0, 3};
  Tensor Z(z.data(), {2, 3}), P(p.data(), {2, 3});
  EXPECT_NE(test::error_of([&] {
              ops::bce_forward(P, Z, labels.data(), nullptr, 0.f, {});
            }).find("label 3 of sample 1 is out of range for 3 classes"),
            std::string::npos);
  BceOptions o;
  o.pos_weight = -1.f;
  labels[1] = 2;
  EXPECT_NE(test::error_of([&] {
              ops::bce_forward(P, Z, labels.data(), nullptr, 0.f, o);
            }).find("positive weight must be a finite number >= 0, got -1"),
            std::string::npos);
}

namespace {
// The fixture's ViT: its table, and weights and gradients laid out by it.
struct ClipFixture {
  SafeTensors st = open_losses();
  nlohmann::json settings = nlohmann::json::parse(st.metadata().at("clip"));
  ParamTable table{ViTConfig::from_json(settings.at("vit_config").dump())};
  std::vector<float> params = laid_out("clip.param."), grads = laid_out("clip.grad.");

  std::vector<float> laid_out(const std::string& prefix) const {
    std::vector<float> v(size_t(table.total()));
    for (const auto& s : table.specs()) {
      EXPECT_EQ(st.at(prefix + s.name).shape, s.shape) << s.name;
      st.copy_float(prefix + s.name, v.data() + s.offset);
    }
    return v;
  }
  void expect_grads(const std::string& prefix, const std::vector<float>& got) const {
    for (const auto& s : table.specs()) {
      const auto want = st.to_float(prefix + s.name);
      EXPECT_TRUE(test::close_rel_max(prefix + s.name, got.data() + s.offset, want.data(), s.numel(), 1e-5));
    }
  }
};
}  // namespace

TEST(ClipFixtures, AdaptiveClippingAsTimms) {
  ClipFixture f;
  ASSERT_EQ(f.table.specs().back().name, "head.bias");
  auto g = f.grads;
  const int64_t clipped = adaptive_clip_grad(f.table, f.params.data(), g.data(), f.settings.at("agc_factor"));
  // The fixture mixes rows under and over their bound (the script prints how many it clips).
  EXPECT_GT(clipped, 50);
  EXPECT_LT(clipped, 200);
  f.expect_grads("clip.agc.", g);
}

TEST(ClipFixtures, ValueClippingAsTorchs) {
  ClipFixture f;
  auto g = f.grads;
  clip_grad_value(f.table, g.data(), f.settings.at("value"));
  f.expect_grads("clip.value.", g);
}

namespace {
// Three steps of the optimizer `name` on the fixture's group of that name (tools/
// make_train_fixtures.py), each step's weights compared with timm's rule in float64.
// Tolerance: 1e-5 relative to each tensor's largest weight (float32 against float64).
void expect_steps_as_timms(const std::string& name) {
  const SafeTensors st = open_losses();
  const auto settings = nlohmann::json::parse(st.metadata().at(name));
  const ParamTable table(ViTConfig::from_json(settings.at("vit_config").dump()));
  auto laid_out = [&](const std::string& prefix) {
    std::vector<float> v(size_t(table.total()));
    for (const auto& s : table.specs()) st.copy_float(prefix + s.name, v.data() + s.offset);
    return v;
  };
  OptimConfig cfg;
  cfg.name = name;
  cfg.beta1 = settings.at("beta1"), cfg.beta2 = settings.at("beta2");
  if (settings.contains("eps")) cfg.eps = settings.at("eps");
  cfg.weight_decay = settings.at("weight_decay");
  Optimizer opt(table, cfg);
  auto params = laid_out(name + ".param.");
  for (int step = 0; step < 3; ++step) {
    const auto grads = laid_out(name + ".grad" + std::to_string(step) + ".");
    opt.step(params.data(), grads.data(), settings.at("lr"));
    for (const auto& s : table.specs()) {
      const auto want = st.to_float(name + ".after" + std::to_string(step) + "." + s.name);
      EXPECT_TRUE(test::close_rel_max(name + " step " + std::to_string(step) + " " + s.name,
                                      params.data() + s.offset, want.data(), s.numel(), 1e-5));
    }
  }
}
}  // namespace

// timm's Lamb, three steps: the first two with gradients of global norm 6.6 and 3.1 (divided
// by it), the third of 0.06; trust ratios on the tensors with weight decay, a zero weight's
// ratio 1.
TEST(OptimizerFixtures, LambAsTimms) {
  expect_steps_as_timms("lamb");
}

// timm's lambc: the same with the trust ratios held to 1; the head's weights (x 300) have
// ratios above 1 in all three steps.
TEST(OptimizerFixtures, LambcAsTimms) {
  expect_steps_as_timms("lambc");
}

// timm's Lion: decoupled decay, sign steps of lr, its momentum after the step.
TEST(OptimizerFixtures, LionAsTimms) {
  expect_steps_as_timms("lion");
}

}  // namespace vit
