// Data-parallel shards (ViT::set_shards): a batch cut into row shards, each run by its own
// shard on one thread, gives the logits and gradients of the whole batch run at once, to
// float rounding: with every dropout on (the shards draw the whole batch's masks), a patch
// mask, uneven shards, more shards than threads, gradient accumulation and a frozen backbone;
// and replicas (ViT::replica), which infer on the same weights.
#include <atomic>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/settings.h"
#include "core/threads.h"
#include "model/vit.h"
#include "support/check.h"
#include "support/models.h"
#include "train/step.h"

namespace vit {

namespace {
ViTConfig dropout_everywhere() {
  ViTConfig c = test::gray_vit(8, 2, 16, 2);
  c.pos_drop_rate = 0.1f;
  c.attn_drop_rate = 0.2f;
  c.proj_drop_rate = 0.1f;
  c.drop_rate = 0.1f;
  c.drop_path_rate = 0.3f;
  return c;
}

struct Step {
  std::vector<float> logits, grads;
  double loss = 0;
};

// One training step at `shards` (after `before` steps that only accumulate when accumulate).
Step run_step(int shards, int64_t B, bool frozen = false, int repeats = 1) {
  const ViTConfig c = dropout_everywhere();
  ViT m(c);
  m.init_weights(3);
  m.set_shards(shards);
  m.set_backbone_frozen(frozen);
  auto x = test::randn(B * 64, 7);
  std::vector<int64_t> labels(static_cast<size_t>(B));
  std::vector<uint8_t> mask(size_t(B * 4), 1);
  for (int64_t b = 0; b < B; ++b) {
    labels[size_t(b)] = b % 3;
    mask[size_t(b * 4 + b % 4)] = b % 2;  // some rows hide a patch
  }
  EXPECT_EQ(m.shards_for(B), std::min<int64_t>(shards, B));
  Step s;
  LossStep step;
  m.zero_grad();
  for (int i = 0; i < repeats; ++i)  // gradients accumulate (no zero_grad in between)
    s.loss = step.run(m, Batch{x.data(), B, labels.data(), nullptr, mask.data()}, 0.1f,
                      ForwardMode{true, 17, 5, 0});
  Tensor y = m.forward(x.data(), B, mask.data(), ForwardMode{true, 17, 5, 0});
  s.logits.assign(y.data, y.data + y.numel());
  s.grads.assign(m.grads().data(), m.grads().data() + m.table().total());
  return s;
}
}  // namespace

// Each shard's rows must draw the masks of the same rows of the whole batch: a shard that
// restarted the dropout counters at its first row would change logits by O(1).
TEST(Shards, TrainingStepMatchesOneShard) {
  const Step one = run_step(1, 7);
  for (int shards : {2, 3, 7}) {
    const Step many = run_step(shards, 7);
    const std::string at = " at " + std::to_string(shards) + " shards";
    EXPECT_NEAR(many.loss, one.loss, 1e-6 * std::abs(one.loss)) << at;
    EXPECT_TRUE(test::close_rel_max("logits" + at, many.logits.data(), one.logits.data(),
                                    int64_t(one.logits.size()), 1e-5));
    EXPECT_TRUE(test::close_rel_max("gradients" + at, many.grads.data(), one.grads.data(),
                                    int64_t(one.grads.size()), 1e-5));
  }
}

TEST(Shards, GradientsAccumulateAndAFrozenBackboneStaysZero) {
  const Step once = run_step(2, 6), twice = run_step(2, 6, false, 2);
  std::vector<float> doubled(once.grads);
  for (auto& g : doubled) g *= 2;
  EXPECT_TRUE(test::close_rel_max("two backwards", twice.grads.data(), doubled.data(),
                                  int64_t(doubled.size()), 1e-6));

  const Step frozen1 = run_step(1, 6, true), frozen2 = run_step(2, 6, true);
  EXPECT_TRUE(test::close_rel_max("frozen backbone", frozen2.grads.data(), frozen1.grads.data(),
                                  int64_t(frozen1.grads.size()), 1e-5));
  const ViT m(dropout_everywhere());
  const ParamSpec &hw = m.table().at("head.weight"), &hb = m.table().at("head.bias");
  auto in = [](const ParamSpec& s, int64_t i) { return i >= s.offset && i < s.offset + s.numel(); };
  int64_t nonzero_outside_head = 0, nonzero_head = 0;
  for (int64_t i = 0; i < int64_t(frozen2.grads.size()); ++i) {
    const bool head = in(hw, i) || in(hb, i);
    if (frozen2.grads[size_t(i)] != 0.f) ++(head ? nonzero_head : nonzero_outside_head);
  }
  EXPECT_EQ(nonzero_outside_head, 0);
  EXPECT_GT(nonzero_head, 0);
}

TEST(Shards, InferenceMatchesOneShard) {
  const ViTConfig c = dropout_everywhere();
  ViT m(c);
  m.init_weights(4);
  const int64_t B = 5;
  auto x = test::randn(B * 64, 9);
  std::vector<float> one(size_t(B * 3)), many(size_t(B * 3));
  m.set_shards(1);
  m.infer(x.data(), B, nullptr, one.data());
  m.set_shards(3);
  m.infer(x.data(), B, nullptr, many.data());
  EXPECT_TRUE(test::close_rel_max("logits", many.data(), one.data(), B * 3, 1e-5));
  // A batch smaller than the shards runs in one shard per image.
  m.set_shards(8);
  EXPECT_EQ(m.shards_for(B), B);
  m.infer(x.data(), B, nullptr, many.data());
  EXPECT_TRUE(test::close_rel_max("logits, a shard per image", many.data(), one.data(), B * 3, 1e-5));
}

// An automatic shard count for inference leaves each shard at least 1.5 MFLOP (vit.h:
// infer_shards): below that, waking the other thread cost more than the work. A count
// asked for is kept.
TEST(Shards, AutomaticInferenceShardsEachGetEnoughWork) {
  if (setting("VIT_SHARDS")) GTEST_SKIP() << "VIT_SHARDS is set: the count is not automatic";
  const int before = num_threads();
  set_num_threads(2);
  ViT m(dropout_everywhere());
  const double per_image = double(forward_flops(m.config(), m.use_cls_tail()));
  const auto below = int64_t(1.5e6 / per_image) - 1, enough = int64_t(2 * 1.5e6 / per_image) + 1;
  ASSERT_GE(below, 2) << "the test model must be small enough that 2 images are under the floor";
  EXPECT_EQ(m.shards_for(below), 2);  // what training would take
  EXPECT_EQ(m.infer_shards(below), 1) << below << " images of " << per_image << " FLOPs";
  EXPECT_EQ(m.infer_shards(enough), 2) << enough << " images of " << per_image << " FLOPs";
  m.set_shards(2);
  EXPECT_EQ(m.infer_shards(below), 2);
  m.set_shards(1);
  EXPECT_EQ(m.infer_shards(enough), 1);
  set_num_threads(before);
}

// An automatic count on a batch that does not split evenly: the shards take B / R images
// each and the rest (at most half of R) runs after them on every thread, with the logits of
// one shard; small models, and counts asked for, keep uneven shards (vit.h: infer_rest).
TEST(Shards, TheRestOfAnUnevenBatchRunsOnEveryThread) {
  if (setting("VIT_SHARDS")) GTEST_SKIP() << "VIT_SHARDS is set: the count is not automatic";
  const int before = num_threads();
  set_num_threads(4);
  ViTConfig c = test::gray_vit(192, 4, 768, 3);
  c.img_h = c.img_w = 32;  // 65 tokens
  ViT m(c);
  m.init_weights(5);
  ASSERT_GT(forward_flops(c, m.use_cls_tail()), 5e7) << "an image must be past the rest pass's floor";
  EXPECT_EQ(m.infer_shards(9), 4);
  EXPECT_EQ(m.infer_rest(9, 4), 1);
  EXPECT_EQ(m.infer_rest(10, 4), 2);
  EXPECT_EQ(m.infer_rest(11, 4), 0) << "3 more images than 4 even shards: uneven shards wait less";
  EXPECT_EQ(m.infer_rest(8, 4), 0);
  const int64_t B = 10, img = 32 * 32;
  auto x = test::randn(B * img, 6);
  std::vector<float> one(size_t(B * 3)), rest(size_t(B * 3));
  m.infer(x.data(), B, nullptr, rest.data());
  m.set_shards(1);
  m.infer(x.data(), B, nullptr, one.data());
  EXPECT_TRUE(test::close_rel_max("logits, shards and the rest", rest.data(), one.data(), B * 3, 1e-5));
  m.set_shards(4);
  EXPECT_EQ(m.infer_rest(9, 4), 0) << "a count asked for is kept";
  ViT small(dropout_everywhere());
  EXPECT_EQ(small.infer_rest(9, 4), 0) << "an image of a small model costs less than a pass";
  set_num_threads(before);
}

TEST(Shards, ErrorsInAShardReachTheCaller) {
  ViT m(dropout_everywhere());
  m.set_shards(2);
  const int64_t B = 4;
  auto x = test::randn(B * 64, 1);
  m.forward(x.data(), B, nullptr, ForwardMode{true, 1, 0});
  std::vector<float> wrong(size_t(B * 2));  // 2 classes instead of 3
  const std::string e = test::error_of([&] { m.backward(Tensor(wrong.data(), {B, 2})); });
  EXPECT_NE(e.find("grad logits"), std::string::npos) << e;
}

TEST(Threads, RunOnThreadsRunsEachIndexOnceWithNestedLoopsOnOneThread) {
  const int before = num_threads();
  std::vector<int> seen(5, 0), inner(5, 0);
  run_on_threads(5, [&](int i) {
    ++seen[size_t(i)];
    inner[size_t(i)] = num_threads();
    EXPECT_TRUE(in_parallel());
  });
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(seen[size_t(i)], 1) << i;
    EXPECT_EQ(inner[size_t(i)], 1) << i;
  }
  EXPECT_EQ(num_threads(), before);
  EXPECT_FALSE(in_parallel());
  // The lowest index's error is rethrown after every index ran.
  std::atomic<int> ran = 0;
  const std::string e = test::error_of([&] {
    run_on_threads(4, [&](int i) {
      ++ran;
      VIT_CHECK(i % 2 == 0, "index ", i);
    });
  });
  EXPECT_NE(e.find("index 1"), std::string::npos) << e;
  EXPECT_EQ(e.find("index 3"), std::string::npos) << e;
  EXPECT_EQ(ran, 4);
}

// Items in contiguous shares, each once, more items than threads and fewer; the first failing
// item's error in item order, whichever thread met it (items 5 and 9 fail: 5 is reported).
TEST(Threads, ForItemsOnThreadsRunsEachItemOnceAndRethrowsTheFirstFailure) {
  for (int64_t n : {0, 1, 3, 100}) {
    std::vector<int> seen(size_t(n), 0);
    for_items_on_threads(n, [&](int64_t i) { ++seen[size_t(i)]; });
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(seen[size_t(i)], 1) << i << " of " << n;
  }
  const std::string e = test::error_of(
      [&] { for_items_on_threads(12, [&](int64_t i) { VIT_CHECK(i != 5 && i != 9, "item ", i); }); });
  EXPECT_NE(e.find("item 5"), std::string::npos) << e;
  EXPECT_FALSE(in_parallel());
}

// A value of a VIT_* variable the library cannot use stops a model's construction with an error
// naming it, before any kernel (inside a shard's parallel region, a throw would end the program).
TEST(Shards, ABadSettingStopsTheModelsConstruction) {
  for (const auto& [name, bad] : {std::pair{"VIT_SHARDS", "0"}, std::pair{"VIT_TILED", "onn"}}) {
    const char* was = setting(name);
    const std::string before = was ? was : "";
    ::setenv(name, bad, 1);
    const std::string err = test::error_of([] { ViT m(dropout_everywhere()); });
    before.empty() ? ::unsetenv(name) : ::setenv(name, before.c_str(), 1);
    EXPECT_EQ(err.rfind(std::string(name) + "=" + bad + ": ", 0), 0u) << err;
  }
}
// A replica (ViT::replica) infers on its model's parameters, not a copy, with activations of
// its own: the same logits as the model, also through shards of its own (which must bind the
// model's parameters, not the replica's empty arena), and it changes nothing of the model.
TEST(Replica, InfersOnItsModelsWeightsWithShardsOfItsOwnAndOnlyInfers) {
  ViT m(dropout_everywhere());
  m.init_weights(4);
  m.set_shards(3);
  const std::unique_ptr<ViT> r = m.replica();
  EXPECT_TRUE(r->is_replica());
  EXPECT_FALSE(m.is_replica());
  const int64_t B = 5;
  auto x = test::randn(B * 64, 9);
  std::vector<float> want(size_t(B * 3)), got(size_t(B * 3));
  m.infer(x.data(), B, nullptr, want.data());
  r->infer(x.data(), B, nullptr, got.data());
  EXPECT_EQ(got, want) << "a replica with 3 shards";
  // The weights are shared: a change to the model's is the replica's.
  Tensor bias = m.param("head.bias");
  for (int64_t i = 0; i < bias.numel(); ++i) bias.data[i] += 0.5f;
  m.infer(x.data(), B, nullptr, want.data());
  r->infer(x.data(), B, nullptr, got.data());
  EXPECT_EQ(got, want) << "after the model's head bias changed";
  for (const auto& [what, f] : std::vector<std::pair<std::string, std::function<void()>>>{
           {"forward",
            [&] {
              r->forward(x.data(), B, nullptr, ForwardMode{true, 1, 0});
            }},
           {"set_infer_dtype", [&] { r->set_infer_dtype("int8"); }},
           {"pack_weights", [&] { r->pack_weights(); }},
           {"fp32_params", [&] { r->fp32_params("x.safetensors"); }}}) {
    const std::string e = test::error_of(f);
    EXPECT_NE(e.find("replica"), std::string::npos) << what << ": " << e;
  }
}

}  // namespace vit
