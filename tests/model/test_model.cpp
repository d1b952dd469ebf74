// Whole-model checks: every parameter's gradient against finite differences of the full
// loss (with dropout, attention dropout, drop path, a patch mask and both poolings on),
// inference against the training forward, the patch embedding against a direct conv,
// and timm's initialization statistics.
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <thread>

#include "core/threads.h"
#include "io/checkpoint.h"
#include "io/pretrained.h"
#include "model/vit.h"
#include "ops/ops.h"
#include "support/check.h"
#include "support/models.h"
#include "support/temp_dir.h"
#include "train/step.h"

namespace vit {

namespace {
ViTConfig tiny(const std::string& pool, bool cls, const std::string& pos) {
  return test::tiny_vit(pool, cls, pos);
}

// Wide enough for the blocks' products to run in oneDNN (48 dims, mlp 96, 17 tokens of
// 16 x 16 x 3 images): the paths the tiny model's sizes do not take.
ViTConfig wide_tiny() {
  return test::wide_tiny_vit();
}

// Random weights of a useful scale (timm's 0.02 init makes every gradient tiny).
void randomize(ViT& m, uint64_t seed, double scale = 0.4) {
  Rng rng(seed);
  for (auto& s : m.table().specs())
    if (s.trainable)
      for (int64_t i = 0; i < s.numel(); ++i) m.params().data()[s.offset + i] = float(rng.normal() * scale);
}
}  // namespace

struct ModelCase {
  std::string pool;
  bool cls;
  std::string pos;
  bool mask;
  // timm's rarer options: "extras" = LayerScale, 2 register tokens, pos_embed on the patches
  // only, norm_pre without a patch bias, no qkv bias; "norm" = avg pooling with `norm` on
  // every token instead of fc_norm; "vit_pytorch" = vit-pytorch's LayerNorms around the patch
  // projection, 3 heads of 4 (dim_head) on the 8-wide model, the mean over every token;
  // "quick_gelu", "gelu_tanh": the MLP's activation (act_layer); "distilled": DeiT's
  // distillation token and second head (no head dropout there, as in timm). Pool "map":
  // timm's attention pool (SigLIP's), over the visible patches as timm 1.0's pool(), the
  // prefix tokens left out ("extras": 2 registers and the class token), or over every visible
  // token ("include_prefix": pool_include_prefix, with a register token).
  std::string variant = "";
};

class ModelGrad : public ::testing::TestWithParam<ModelCase> {};

// Tolerance 1e-2 x the largest gradient of each tensor (vs 5e-3 per op): the loss passes
// through ~30 float32 ops, so both its rounding and the curvature terms are larger.
TEST_P(ModelGrad, EveryParameterMatchesFiniteDifferences) {
  const auto mc = GetParam();
  ViTConfig c = tiny(mc.pool, mc.cls, mc.pos);
  c.pos_drop_rate = 0.1f;
  c.attn_drop_rate = 0.2f;
  c.proj_drop_rate = 0.1f;
  c.drop_rate = 0.1f;
  c.drop_path_rate = 0.3f;
  if (mc.variant == "extras") {
    c.init_values = 0.5f;
    c.reg_tokens = 2;
    c.no_embed_class = true;
    c.pre_norm = true;
    c.patch_bias = false;
    c.qkv_bias = false;
  } else if (mc.variant == "norm") {
    c.fc_norm = false;
    c.reg_tokens = 1;
  } else if (mc.variant == "vit_pytorch") {
    c.patch_norm = true;
    c.num_heads = 3;
    c.dim_head = 4;
    c.fc_norm = false;
    c.pool_include_prefix = true;
  } else if (mc.variant == "include_prefix") {
    c.reg_tokens = 1;
    c.pool_include_prefix = true;
  } else if (mc.variant == "distilled") {
    c.dist_token = c.head_dist = true;
    c.drop_rate = 0.f;
  } else if (mc.variant == "quick_gelu" || mc.variant == "gelu_tanh") {
    c.act_layer = mc.variant;  // the MLP's activation: its kept derivative in the backward
  } else if (mc.variant == "wide" || mc.variant == "wide_plain") {
    // Rows wider than 64 floats on one thread: the LayerNorm backward's one pass, which also
    // sums the bias gradients of proj and of the block below's fc2 when nothing scales their
    // branch. "wide": drop path only, which is 0 in block 0 and not in block 1, so both
    // kinds of branch meet; "wide_plain": no dropout at all.
    c = test::with_width(c, 72, c.num_heads, 80);
    c.pos_drop_rate = c.attn_drop_rate = c.proj_drop_rate = c.drop_rate = 0.f;
    c.drop_path_rate = mc.variant == "wide" ? 0.3f : 0.f;
  }
  ViT m(c);
  // The same scale of pre-activations at every width (0.4 at 8 features), so the finite
  // differences see as little curvature on the wide model as on the narrow ones.
  randomize(m, 5, 0.4 * std::sqrt(8.0 / double(c.embed_dim)));
  const int64_t B = 3;
  auto x = test::randn(B * 2 * 8 * 12, 7);
  std::vector<int64_t> labels = {0, 2, 1};
  std::vector<uint8_t> mask = {1, 1, 1, 1, 0, 1, 1, 0, 1, 1, 1, 0};  // [B, 4 patches]
  Batch batch{x.data(), B, labels.data(), nullptr, mc.mask ? mask.data() : nullptr};
  const ForwardMode mode{true, 17, 3};
  LossStep step;
  m.zero_grad();
  step.run(m, batch, 0.1f, mode);
  std::vector<float> grads(m.grads().data(), m.grads().data() + m.table().total());
  auto loss = [&] {
    m.zero_grad();
    return step.run(m, batch, 0.1f, mode);
  };
  for (auto& s : m.table().specs()) {
    if (!s.trainable) continue;
    EXPECT_TRUE(test::gradcheck(s.name, m.params().data() + s.offset, grads.data() + s.offset, s.numel(),
                                loss, 1e-2, 1e-2, 12));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Variants, ModelGrad,
    ::testing::Values(
        ModelCase{"token", true, "learn", false}, ModelCase{"avg", true, "sincos", true},
        ModelCase{"avg", false, "learn", true}, ModelCase{"token", true, "learn", true, "extras"},
        ModelCase{"avg", true, "learn", true, "norm"}, ModelCase{"avg", true, "learn", true, "vit_pytorch"},
        ModelCase{"token", true, "learn", false, "quick_gelu"},
        ModelCase{"token", true, "learn", true, "distilled"},
        ModelCase{"avg", false, "learn", true, "gelu_tanh"}, ModelCase{"token", true, "learn", false, "wide"},
        ModelCase{"avg", true, "learn", false, "wide_plain"}, ModelCase{"map", false, "learn", true},
        ModelCase{"map", true, "learn", true, "extras"},
        ModelCase{"map", true, "learn", true, "include_prefix"},
        ModelCase{"map", false, "sincos", false, "gelu_tanh"}),
    [](const auto& info) {
      return info.param.pool + (info.param.cls ? "_cls_" : "_nocls_") + info.param.pos +
             (info.param.mask ? "_mask" : "") + (info.param.variant.empty() ? "" : "_" + info.param.variant);
    });

// On the same shards (set_shards), the same bits. By default they may differ in the last
// bits: inference picks fewer shards for little work (ViT::infer_shards; this model's 4
// images run as one on 2 threads, the training forward as 2 of 2 images), and a kernel may
// take another path for another batch size (on NEON the attention puts groups of 4 samples
// along the lanes, sums in another order than per head). Shards agree within 1e-5
// (Shards.InferenceMatchesOneShard).
TEST(Model, InferenceEqualsTrainingForwardWithoutDropout) {
  ViTConfig c = tiny("token", true, "learn");
  c.drop_path_rate = 0.5f;  // must have no effect outside training
  c.proj_drop_rate = 0.5f;
  ViT m(c);
  randomize(m, 3);
  const int64_t B = 4;
  auto x = test::randn(B * 2 * 8 * 12, 1);
  std::vector<float> inf(B * 3);
  for (int shards : {1, 2, 4}) {
    m.set_shards(shards);
    m.infer(x.data(), B, nullptr, inf.data());
    Tensor tr = m.forward(x.data(), B, nullptr, ForwardMode{false, 0, 0});
    EXPECT_TRUE(test::close_rel_max("infer vs forward on " + std::to_string(shards) + " shards", inf.data(),
                                    tr.data, B * 3, 0.0));
    Tensor dropped = m.forward(x.data(), B, nullptr, ForwardMode{true, 1, 0});
    EXPECT_FALSE(test::close_rel_max("train-mode forward differs", dropped.data, inf.data(), B * 3, 1e-6));
  }
  m.set_shards(0);  // each picks its own count
  m.infer(x.data(), B, nullptr, inf.data());
  Tensor tr = m.forward(x.data(), B, nullptr, ForwardMode{false, 0, 0});
  EXPECT_TRUE(test::close_rel_max("infer vs forward, automatic shards", inf.data(), tr.data, B * 3, 1e-5));
}

// An image size past a multiple of the patch: the grid is floored and the last rows and columns
// are not read, as a Conv2d with stride = kernel reads them (timm's and transformers' patch
// embedding; SigLIP so400m/14 at 384 was refused). The 19x30 model's logits and gradients are
// the 16x24 model's on the top-left 16x24 of each image, whatever the rest holds.
TEST(Model, ASizeNotAMultipleOfThePatchIgnoresTheLastPixelsAsConv2dDoes) {
  ViTConfig small = wide_tiny();
  small.img_h = 16;
  small.img_w = 24;
  small.patch_h = small.patch_w = 8;  // a 2x3 grid
  ViTConfig big = small;
  big.img_h = 19;
  big.img_w = 30;
  ViT a(small), b(big);
  randomize(a, 5, 0.15);
  ASSERT_EQ(a.table().total(), b.table().total());
  std::copy_n(a.params().data(), a.table().total(), b.params().data());
  const int64_t B = 2, C = small.in_chans;
  const auto x = test::randn(B * C * 19 * 30, 3);
  std::vector<float> crop(B * C * 16 * 24);
  for (int64_t i = 0; i < B * C; ++i)
    for (int64_t y = 0; y < 16; ++y) std::copy_n(&x[(i * 19 + y) * 30], 24, &crop[(i * 16 + y) * 24]);
  const int64_t K = small.num_classes;
  std::vector<float> la(B * K), lb(B * K);
  a.infer(crop.data(), B, nullptr, la.data());
  b.infer(x.data(), B, nullptr, lb.data());
  EXPECT_TRUE(test::close_rel_max("19x30 against its 16x24 crop", lb.data(), la.data(), B * K, 0.0));
  const auto dlogits = test::randn(B * K, 4);
  for (ViT* m : {&a, &b}) {
    m->zero_grad();
    m->forward(m == &a ? crop.data() : x.data(), B, nullptr, ForwardMode{false, 0, 0});
    m->backward(Tensor(const_cast<float*>(dlogits.data()), {B, K}));
  }
  EXPECT_TRUE(test::close_rel_max("gradients", b.grads().data(), a.grads().data(), a.table().total(), 0.0));
}

// An inference between a training forward and its backward leaves the gradients alone, with
// masks too: the masks were the model's, and avg pooling's backward read the inference's
// (gradients 0.68 apart; found by a tester comparing with timm).
TEST(Model, AnInferenceBetweenForwardAndBackwardKeepsTheForwardsMask) {
  // Avg pooling reads the mask in its backward: over the patches, and with pool_include_prefix
  // over every token (the key mask). Token and map pooling keep what they need in activations.
  for (const bool include_prefix : {false, true}) {
    const std::string pool = include_prefix ? "avg, prefix included" : "avg";
    ViTConfig c = tiny("avg", true, "learn");
    c.pool_include_prefix = include_prefix;
    c.pos_drop_rate = c.attn_drop_rate = c.proj_drop_rate = c.drop_rate = c.drop_path_rate = 0.f;
    ViT m(c);
    randomize(m, 5);
    m.set_shards(1);  // on one model: shards hold masks of their own
    const int64_t B = 3;
    const auto x = test::randn(B * 2 * 8 * 12, 7);
    const auto dlogits = test::randn(B * 3, 8);
    const std::vector<uint8_t> mask = {1, 1, 1, 1, 0, 1, 1, 0, 1, 1, 1, 0};  // [B, 4 patches]
    const ForwardMode mode{true, 0, 0};
    // The forward's mask, and the other one the inference between takes.
    const std::pair<const uint8_t*, const uint8_t*> cases[] = {{mask.data(), nullptr},
                                                               {nullptr, mask.data()}};
    for (const auto& [trained, between] : cases) {
      auto grads = [&, trained = trained, between = between](bool infer_between) {
        m.zero_grad();
        m.forward(x.data(), B, trained, mode);
        std::vector<float> logits(B * 3);
        if (infer_between) m.infer(x.data(), B, between, logits.data());
        m.backward(Tensor(const_cast<float*>(dlogits.data()), {B, 3}));
        return std::vector<float>(m.grads().data(), m.grads().data() + m.table().total());
      };
      const std::vector<float> alone = grads(false), with_infer = grads(true);
      EXPECT_TRUE(test::close_rel_max(pool + (trained ? ": masked forward" : ": unmasked forward"),
                                      with_infer.data(), alone.data(), int64_t(alone.size()), 0.0));
    }
  }
}

// The backward clears fc1's output buffer as it reads GELU's derivative from it, and the
// next forward's fc1 product adds onto the zeros (linear_forward's y_zero): a forward after
// a backward, and one after another forward (no clearing in between), give the same bits as
// the first. Wide enough (mlp 96, 4 x 17 rows) for fc1 to run in dnnl_sgemm, the path that
// uses the zeros.
TEST(Model, ForwardAfterBackwardGivesTheSameLogits) {
  const ViTConfig c = wide_tiny();
  ViT m(c);
  randomize(m, 5, 0.15);
  const int64_t B = 4;
  auto x = test::randn(B * 3 * 16 * 16, 2);
  const ForwardMode mode{false, 0, 0};
  Tensor t = m.forward(x.data(), B, nullptr, mode);
  const std::vector<float> first(t.data, t.data + t.numel());
  auto dlogits = test::randn(B * 3, 3);
  for (int round = 0; round < 2; ++round) {
    m.backward(Tensor(dlogits.data(), {B, 3}));
    t = m.forward(x.data(), B, nullptr, mode);
    EXPECT_TRUE(test::close_rel_max("forward after a backward", t.data, first.data(), B * 3, 0.0));
  }
  t = m.forward(x.data(), B, nullptr, mode);
  EXPECT_TRUE(test::close_rel_max("forward after a forward", t.data, first.data(), B * 3, 0.0));
  m.backward(Tensor(dlogits.data(), {B, 3}));
}

// Weights packed in place for inference: the same logits to float rounding (another
// summation order), training and saving refused while packed, and unpacking restores every
// parameter bit for bit.
TEST(Model, PackedWeightsInferTheSameAndUnpackExactly) {
  // 40, 60 and 120 columns: partial 64-wide panels, last vectors masked
  const ViTConfig c = test::with_width(tiny("token", true, "learn"), 40, 4, 60);
  ViT m(c);
  randomize(m, 4);
  const std::vector<float> before(m.params().data(), m.params().data() + m.params().size());
  const int64_t B = 3;
  auto x = test::randn(B * 2 * 8 * 12, 2);
  std::vector<float> plain(B * 3), packed(B * 3);
  m.infer(x.data(), B, nullptr, plain.data());
  m.pack_weights();
  ASSERT_TRUE(m.weights_packed());
  m.infer(x.data(), B, nullptr, packed.data());
  EXPECT_TRUE(test::close_rel_max("packed vs plain logits", packed.data(), plain.data(), B * 3, 1e-5));
  EXPECT_THROW(m.forward(x.data(), B, nullptr, ForwardMode{true, 1, 0}), Error);
  EXPECT_THROW(m.set_infer_dtype("bf16"), Error);
  const std::string msg =
      test::error_of([&] { save_checkpoint("/nonexistent/never-written.safetensors", m); });
  EXPECT_NE(msg.find("never-written.safetensors: not saved: the model's weights are packed for inference"),
            std::string::npos)
      << msg;
  EXPECT_THROW(export_timm(m, "/nonexistent/never-exported"), Error);
  {  // loading weights into it would leave the packed copies stale: refused, nothing written
    test::TempDir tmp("packed");
    ViT other(m.config());
    save_checkpoint(tmp / "w.safetensors", other);
    const std::string lmsg =
        test::error_of([&] { load_weights(m, SafeTensors::open(tmp / "w.safetensors")); });
    EXPECT_NE(lmsg.find("load_weights: the model's weights are packed for inference"), std::string::npos)
        << lmsg;
  }
  m.unpack_weights();
  EXPECT_FALSE(m.weights_packed());
  EXPECT_EQ(std::memcmp(before.data(), m.params().data(), before.size() * sizeof(float)), 0);
  m.infer(x.data(), B, nullptr, packed.data());
  EXPECT_EQ(packed, plain) << "unpacked, the model computes exactly what it did before";
}

// fork() beside a thread that packs and unpacks the weights in place: the child never finds
// a matrix half rewritten, or the flag that says its layout stale (a Python DataLoader
// forking its workers beside an inference thread gave children wrong logits, 2 of 30).
TEST(Model, AForkBesideARewriteOfTheWeightsNeverSeesHalfOfIt) {
  ViT m(test::with_width(tiny("token", true, "learn"), 192, 4, 768));
  randomize(m, 4);
  const std::vector<float> before(m.params().data(), m.params().data() + m.params().size());
  std::atomic<bool> stop{false};
  std::atomic<int64_t> rewrites{0};
  std::thread rewriter([&] {
    while (!stop) {
      m.pack_weights();
      m.unpack_weights();
      rewrites += 2;
    }
  });
  while (rewrites.load() == 0) std::this_thread::yield();  // the forks land beside rewrites
  int torn = 0, forks = 0;
  for (; forks < 20; ++forks) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      alarm(30);
      if (m.weights_packed()) m.unpack_weights();
      _exit(std::memcmp(before.data(), m.params().data(), before.size() * sizeof(float)) == 0 ? 0 : 3);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status)) << "a child ended by signal "
                                   << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    torn += WEXITSTATUS(status) != 0;
  }
  stop = true;
  rewriter.join();
  EXPECT_EQ(torn, 0) << torn << " of " << forks << " children found the weights half rewritten";
  EXPECT_GT(rewrites.load(), 0);
}

// Heads of their own width (dim_head: 4 heads of 24, 96 channels on a 40-wide model): the
// packed kernels and bf16 products run qkv [288, 40] and proj [40, 96] as they run the rest.
// (tests/fixtures/vit_dim_head.safetensors checks the numbers against PyTorch.)
TEST(Model, DimHeadRunsOnEveryInferencePath) {
  ViTConfig c = test::with_width(tiny("token", true, "learn"), 40, 4, 60);
  c.dim_head = 24;
  ViT m(c);
  randomize(m, 6);
  const int64_t B = 3;
  auto x = test::randn(B * 2 * 8 * 12, 4);
  std::vector<float> plain(B * 3), other(B * 3);
  m.infer(x.data(), B, nullptr, plain.data());
  m.pack_weights();
  m.infer(x.data(), B, nullptr, other.data());
  EXPECT_TRUE(test::close_rel_max("packed vs plain logits", other.data(), plain.data(), B * 3, 1e-5));
  m.unpack_weights();
  m.set_infer_dtype("int8");
  m.infer(x.data(), B, nullptr, other.data());
  EXPECT_TRUE(test::close_rel_max("int8 vs fp32 logits", other.data(), plain.data(), B * 3, 3e-2));
  m.set_infer_dtype("fp32");
  if (!ops::bf16_available()) GTEST_SKIP() << "no bf16 matrix product on this CPU";
  m.set_infer_dtype("bf16");
  m.infer(x.data(), B, nullptr, other.data());
  EXPECT_TRUE(test::close_rel_max("bf16 vs fp32 logits", other.data(), plain.data(), B * 3, 3e-2));
}

// The MLP's activations on every inference path: plain, packed (the product, then the
// activation in a pass) and bf16 (a oneDNN post-op: gelu_tanh, swish with alpha 1.702), the
// training forward's logits the same bits as the plain inference's; and each activation
// gives other logits than exact GELU, so none of the paths quietly runs GELU.
TEST(Model, EveryActivationRunsOnEveryInferencePath) {
  const ViTConfig base = test::with_width(tiny("token", true, "learn"), 40, 4, 60);
  const int64_t B = 3;
  auto x = test::randn(B * 2 * 8 * 12, 4);
  std::vector<float> gelu(B * 3);
  for (const char* act : {"gelu", "gelu_tanh", "quick_gelu"}) {
    SCOPED_TRACE(act);
    ViTConfig c = base;
    c.act_layer = act;
    ViT m(c);
    randomize(m, 6, 0.5);
    std::vector<float> plain(B * 3), other(B * 3);
    m.set_shards(1);  // the same shards for both: the same bits
    m.infer(x.data(), B, nullptr, plain.data());
    const Tensor logits = m.forward(x.data(), B, nullptr, ForwardMode{false, 0, 0});
    EXPECT_TRUE(test::close_rel_max("training forward vs inference", logits.data, plain.data(), B * 3, 0.0));
    m.set_shards(0);
    if (std::string(act) == "gelu") {
      gelu = plain;
    } else {
      float diff = 0.f;
      for (int64_t i = 0; i < B * 3; ++i) diff = std::max(diff, std::abs(plain[i] - gelu[i]));
      EXPECT_GT(diff, 2e-5f) << "the same logits as exact GELU";  // tanh GELU: 2e-4 here
    }
    m.pack_weights();
    m.infer(x.data(), B, nullptr, other.data());
    EXPECT_TRUE(test::close_rel_max("packed vs plain logits", other.data(), plain.data(), B * 3, 1e-5));
    m.unpack_weights();
    m.set_infer_dtype("int8");
    m.infer(x.data(), B, nullptr, other.data());
    EXPECT_TRUE(test::close_rel_max("int8 vs fp32 logits", other.data(), plain.data(), B * 3, 3e-2));
    m.set_infer_dtype("fp32");
    if (!ops::bf16_available()) continue;
    m.set_infer_dtype("bf16");
    m.infer(x.data(), B, nullptr, other.data());
    EXPECT_TRUE(test::close_rel_max("bf16 vs fp32 logits", other.data(), plain.data(), B * 3, 3e-2));
  }
}

// bf16 and int8 inference with the fp32 block weights released: the same logits as with them
// kept (the products read only the copies), the released matrices zero and the rest of the
// parameters untouched, and everything that needs the fp32 weights refused.
void released_infers_the_same_and_refuses_the_rest(const std::string& dtype) {
  const ViTConfig c = test::with_width(tiny("token", true, "learn"), 64, 4, 128);
  ViT kept(c), released(c);
  randomize(kept, 5);
  std::copy(kept.params().data(), kept.params().data() + kept.params().size(), released.params().data());
  const int64_t B = 2;
  auto x = test::randn(B * 2 * 8 * 12, 3);
  std::vector<float> a(B * 3), b(B * 3);
  kept.set_infer_dtype(dtype);
  released.set_infer_dtype(dtype, true);
  EXPECT_FALSE(kept.fp32_released());
  ASSERT_TRUE(released.fp32_released());
  kept.infer(x.data(), B, nullptr, a.data());
  released.infer(x.data(), B, nullptr, b.data());
  EXPECT_EQ(a, b);
  for (const char* name : {"blocks.0.attn.qkv.weight", "blocks.1.mlp.fc2.weight"}) {
    const Tensor w = released.param(name);
    EXPECT_TRUE(std::all_of(w.data, w.data + w.numel(), [](float v) { return v == 0.f; })) << name;
  }
  const Tensor hk = kept.param("head.weight"), hr = released.param("head.weight");
  EXPECT_EQ(std::memcmp(hk.data, hr.data, sizeof(float) * hk.numel()), 0) << "the head is kept";
  EXPECT_THROW(released.forward(x.data(), B, nullptr, ForwardMode{true, 1, 0}), Error);
  EXPECT_THROW(released.set_infer_dtype("fp32"), Error);
  EXPECT_THROW(released.pack_weights(), Error);
  const std::string msg =
      test::error_of([&] { save_checkpoint("/nonexistent/never-written.safetensors", released); });
  EXPECT_NE(msg.find("not saved: the model's fp32 block weights were released for " + dtype + " inference"),
            std::string::npos)
      << msg;
  EXPECT_NE(test::error_of([&] {
              export_timm(released, "/nonexistent/never-exported");
            }).find("never-exported: not exported: the model's fp32 block weights were released"),
            std::string::npos);
  EXPECT_THROW(kept.set_infer_dtype("fp32", true), Error) << "fp32 has nothing to release";
}

TEST(Model, Bf16WithFp32ReleasedInfersTheSameAndRefusesTheRest) {
  if (!ops::bf16_available()) GTEST_SKIP() << "no bf16 matrix product on this CPU";
  released_infers_the_same_and_refuses_the_rest("bf16");
}

TEST(Model, Int8WithFp32ReleasedInfersTheSameAndRefusesTheRest) {
  released_infers_the_same_and_refuses_the_rest("int8");
}

// im2col's row of each patch, (c, i, j) order, against plain indexing: the seeds' 4-pixel
// patches (16-byte moves), other short widths (masked moves: 6, 16) and a long one (memcpy),
// one and three channels, non-square images and patches.
TEST(Model, Im2colMatchesPlainIndexing) {
  struct S {
    int64_t B, C, H, W, P, Q;
  };
  for (S s : {S{3, 1, 28, 28, 4, 4}, S{2, 3, 32, 32, 4, 4}, S{2, 2, 8, 12, 4, 6}, S{1, 3, 32, 48, 16, 16},
              S{2, 1, 40, 40, 20, 20}, S{1, 3, 12, 40, 6, 20}}) {
    const int64_t Gh = s.H / s.P, Gw = s.W / s.Q, K = s.C * s.P * s.Q, N = s.B * Gh * Gw;
    auto x = test::randn(s.B * s.C * s.H * s.W, 17);
    std::vector<float> cols(N * K, -1.f), want(N * K);
    for (int64_t b = 0; b < s.B; ++b)
      for (int64_t gy = 0; gy < Gh; ++gy)
        for (int64_t gx = 0; gx < Gw; ++gx)
          for (int64_t c = 0; c < s.C; ++c)
            for (int64_t i = 0; i < s.P; ++i)
              for (int64_t j = 0; j < s.Q; ++j)
                want[((b * Gh + gy) * Gw + gx) * K + (c * s.P + i) * s.Q + j] =
                    x[((b * s.C + c) * s.H + gy * s.P + i) * s.W + gx * s.Q + j];
    ops::im2col_patches(Tensor(cols.data(), {N, K}), Tensor(x.data(), {s.B, s.C, s.H, s.W}), s.P, s.Q);
    EXPECT_EQ(cols, want) << "B=" << s.B << " C=" << s.C << " " << s.H << "x" << s.W << " patch " << s.P
                          << "x" << s.Q;
  }
}

TEST(Model, PatchEmbeddingIsAConvolution) {
  ViTConfig c = tiny("token", true, "learn");
  ViT m(c);
  randomize(m, 4);
  const int64_t B = 2, C = 2, H = 8, W = 12, P = 4, Q = 6, D = 8;
  auto x = test::randn(B * C * H * W, 9);
  Tensor w = m.param("patch_embed.proj.weight"), b = m.param("patch_embed.proj.bias");
  std::vector<float> cols(B * 4 * C * P * Q), pe(B * 4 * D), want(B * 4 * D);
  ops::im2col_patches(Tensor(cols.data(), {B * 4, C * P * Q}), Tensor(x.data(), {B, C, H, W}), P, Q);
  ops::linear_forward(Tensor(pe.data(), {B * 4, D}), Tensor(cols.data(), {B * 4, C * P * Q}),
                      {reshape(w, {D, C * P * Q}), b});
  for (int64_t bi = 0; bi < B; ++bi)
    for (int64_t gy = 0; gy < 2; ++gy)
      for (int64_t gx = 0; gx < 2; ++gx)
        for (int64_t d = 0; d < D; ++d) {
          double s = b.data[d];
          for (int64_t ci = 0; ci < C; ++ci)
            for (int64_t i = 0; i < P; ++i)
              for (int64_t j = 0; j < Q; ++j)
                s += double(w.data[((d * C + ci) * P + i) * Q + j]) *
                     x[((bi * C + ci) * H + gy * P + i) * W + gx * Q + j];
          want[(bi * 4 + gy * 2 + gx) * D + d] = float(s);
        }
  EXPECT_TRUE(test::close_rel_max("patch embed vs direct conv", pe.data(), want.data(), B * 4 * D, 1e-5));
}

TEST(Model, TimmInitStatistics) {
  ViT m(preset("vit-tiny-16"));
  m.init_weights(0);
  auto stats = [&](const std::string& name) {
    Tensor t = m.param(name);
    double s = 0, s2 = 0;
    for (int64_t i = 0; i < t.numel(); ++i) {
      s += t.data[i];
      s2 += double(t.data[i]) * t.data[i];
    }
    const double mean = s / t.numel();
    return std::pair{mean, std::sqrt(std::max(0.0, s2 / t.numel() - mean * mean))};
  };
  auto [m1, s1] = stats("blocks.0.attn.qkv.weight");  // 110592 draws: std error of the std ~5e-5
  EXPECT_NEAR(m1, 0.0, 5e-4);
  EXPECT_NEAR(s1, 0.02, 5e-4);
  auto [m2, s2] = stats("cls_token");
  EXPECT_LT(std::fabs(m2) + s2, 1e-5);
  EXPECT_EQ(stats("blocks.3.norm1.weight").first, 1.0);
  EXPECT_EQ(stats("head.bias").second, 0.0);
  // PyTorch's Conv2d default: uniform(+-1/sqrt(fan_in)), whose std is bound / sqrt(3).
  EXPECT_NEAR(stats("patch_embed.proj.weight").second, 1.0 / std::sqrt(768.0 * 3.0), 1e-4);
  ViT again(preset("vit-tiny-16"));
  again.init_weights(0);
  EXPECT_EQ(0, std::memcmp(m.params().data(), again.params().data(), m.table().total() * sizeof(float)));
  again.init_weights(1);
  EXPECT_NE(0, std::memcmp(m.params().data(), again.params().data(), m.table().total() * sizeof(float)));
}

TEST(Model, SinCosTableMatchesSeedFormula) {
  std::vector<float> pe(5 * 6);
  sincos_pos_embed(pe.data(), 5, 6);
  // seed 001: sin(i / 10000^(j/d)) for even j, cos(i / 10000^((j-1)/d)) for odd j.
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 6; ++j) {
      const double want = j % 2 == 0 ? std::sin(i / std::pow(10000.0, j / 6.0))
                                     : std::cos(i / std::pow(10000.0, (j - 1) / 6.0));
      EXPECT_NEAR(pe[i * 6 + j], want, 1e-6) << i << "," << j;
    }
}

// big_vision's posemb_sincos_2d (vit-pytorch's SimpleViT): for a 2x3 grid at 8 dims (w_k =
// 10000^(-k), k = 0, 1), [sin(x w), cos(x w), sin(y w), cos(y w)] row-major over the grid,
// after prefix rows of zeros; the model's fixed table and not trained; --img-size remakes it.
TEST(Model, SinCos2dTableIsBigVisions) {
  std::vector<float> pe(7 * 8, -1.f);
  sincos2d_pos_embed(pe.data(), 1, 2, 3, 8);
  for (int j = 0; j < 8; ++j) EXPECT_EQ(pe[j], 0.f) << "prefix row, " << j;
  for (int y = 0; y < 2; ++y)
    for (int x = 0; x < 3; ++x)
      for (int k = 0; k < 2; ++k) {
        const double w = 1.0 / std::pow(10000.0, k);
        const float* r = pe.data() + (1 + y * 3 + x) * 8;
        EXPECT_NEAR(r[k], std::sin(x * w), 1e-6) << y << "," << x << "," << k;
        EXPECT_NEAR(r[2 + k], std::cos(x * w), 1e-6);
        EXPECT_NEAR(r[4 + k], std::sin(y * w), 1e-6);
        EXPECT_NEAR(r[6 + k], std::cos(y * w), 1e-6);
      }
  ViTConfig c = tiny("token", true, "learn");
  c.pos_embed = "sincos2d";  // 8 dims, a 2x2 grid of 4x6 patches after the class token
  ViT m(c);
  EXPECT_FALSE(m.table().at("pos_embed").trainable);
  std::vector<float> want(5 * 8);
  sincos2d_pos_embed(want.data(), 1, 2, 2, 8);
  const Tensor pos = m.param("pos_embed");
  EXPECT_EQ(std::vector<float>(pos.data, pos.data + pos.numel()), want);
  c.embed_dim = 6;
  c.num_heads = 2;
  EXPECT_NE(test::error_of([&] { c.validate(); }).find("'sincos2d' needs embed_dim a multiple of 4"),
            std::string::npos);
}

}  // namespace vit

namespace vit {

// Mixed-precision training (set_amp): the blocks' four products on bf16 operands. The step's
// loss is within 1% of fp32's and every parameter's gradient within 5e-2 of its largest
// value (bf16 rounds each operand by up to 2^-9 relative; a wrong operand or layout is off by
// O(1); measured here: at most 1.1%, blocks.0.attn.proj.weight; and some gradients must
// differ, or amp did nothing); the same bits every time; shards
// (two threads, each running its own bf16 products at once) within float rounding of one
// shard; set_amp(false) gives fp32's bits again. Attention dropout and drop path on, with and
// without dropout on the projections and after GELU, and wide enough (48 dims, mlp 96) for
// the products to be real matmuls.
class AmpStep : public ::testing::TestWithParam<float> {};

TEST_P(AmpStep, IsCloseToFp32AndRepeatable) {
  if (!ops::bf16_available()) GTEST_SKIP() << "no bf16 matmul in oneDNN on this CPU";
  ViTConfig c = wide_tiny();
  c.proj_drop_rate = GetParam();
  c.attn_drop_rate = 0.1f;
  c.drop_path_rate = 0.2f;
  ViT m(c);
  randomize(m, 8, 0.15);
  const int64_t B = 6;
  const auto x = test::randn(B * 3 * 16 * 16, 2);
  std::vector<int64_t> labels(B);
  for (int64_t b = 0; b < B; ++b) labels[size_t(b)] = b % 3;
  struct Out {
    double loss;
    std::vector<float> grads;
  };
  auto step = [&](bool amp, int shards) {
    m.set_amp(amp);
    m.set_shards(shards);
    m.zero_grad();
    LossStep s;
    const double loss = s.run(m, Batch{x.data(), B, labels.data()}, 0.f, ForwardMode{true, 5, 3, 0});
    return Out{loss, std::vector<float>(m.grads().data(), m.grads().data() + m.table().total())};
  };
  const Out fp32 = step(false, 1), amp = step(true, 1);
  EXPECT_NEAR(amp.loss, fp32.loss, 1e-2 * std::abs(fp32.loss));
  int64_t differ = 0;
  for (const auto& s : m.table().specs()) {
    const float* g = amp.grads.data() + s.offset;
    const float* want = fp32.grads.data() + s.offset;
    EXPECT_TRUE(test::close_rel_max("amp grad " + s.name, g, want, s.numel(), 5e-2));
    for (int64_t i = 0; i < s.numel(); ++i) differ += g[i] != want[i];
  }
  EXPECT_GT(differ, 0) << "amp gave fp32's gradients: its products did not run";
  EXPECT_EQ(step(true, 1).grads, amp.grads) << "amp is not repeatable";
  const int threads = num_threads();
  set_num_threads(2);
  const Out shards = step(true, 2);
  set_num_threads(threads);
  EXPECT_NEAR(shards.loss, amp.loss, 1e-5 * std::abs(amp.loss));
  EXPECT_TRUE(test::close_rel_max("amp grads in 2 shards", shards.grads.data(), amp.grads.data(),
                                  int64_t(amp.grads.size()), 1e-4));
  EXPECT_EQ(step(false, 1).grads, fp32.grads) << "fp32 after amp";
}

INSTANTIATE_TEST_SUITE_P(Model, AmpStep, ::testing::Values(0.f, 0.1f));

}  // namespace vit
