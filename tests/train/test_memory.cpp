// The memory plan behind `vit train`'s refusal to start a run that cannot fit: activation
// sizes equal what the model then allocates, the totals add up, and the check and the
// VIT_MEMORY_LIMIT override behave as documented.
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "model/params.h"
#include "model/vit.h"
#include "support/check.h"
#include "train/memory.h"

namespace vit {

TEST(Memory, PlannedActivationsAreWhatTheModelAllocates) {
  for (const char* name : {"mnist-seed", "cifar-seed"}) {
    ViTConfig c = preset(name);
    c.attn_drop_rate = 0.1f;  // adds the dropped-probabilities buffer when training
    ViT m(c);
    const int64_t B = 3;
    std::vector<float> images(size_t(B * c.in_chans * c.img_h * c.img_w), 0.5f),
        logits(size_t(B * c.num_classes));
    m.set_shards(2);  // two shards of 2 and 1 images: each lays out its own activations
    m.forward(images.data(), B, nullptr, ForwardMode{true, 1, 0});
    m.infer(images.data(), B, nullptr, logits.data());
    EXPECT_EQ(m.activation_bytes(),
              ViT::planned_activation_bytes(c, B, true, 2) + ViT::planned_activation_bytes(c, B, false, 2))
        << name;
    EXPECT_GT(ViT::planned_activation_bytes(c, B, true, 2), ViT::planned_activation_bytes(c, B, true, 1))
        << name;
    ViT one(c);
    one.set_shards(1);
    one.forward(images.data(), B, nullptr, ForwardMode{true, 1, 0});
    EXPECT_EQ(one.activation_bytes(), ViT::planned_activation_bytes(c, B, true, 1)) << name;
    EXPECT_EQ(plan_training_memory(c, B, "adamw", 2).grads, 2 * plan_training_memory(c, B, "adamw", 1).grads);
    const MemoryPlan p = plan_training_memory(c, B, "adamw");
    EXPECT_EQ(p.params, size_t(ParamTable(c).total()) * 4);
    EXPECT_EQ(p.optimizer, 2 * p.params);
    EXPECT_EQ(plan_training_memory(c, B, "sgd").optimizer, p.params);
    EXPECT_EQ(p.total(), p.params + p.grads + p.optimizer + p.activations + p.eval_activations + p.batches);
  }
}

TEST(Memory, CheckRefusesWhatDoesNotFitAndNamesTheNeed) {
  const MemoryPlan p = plan_training_memory(preset("vit-base-16"), 256, "adamw");
  EXPECT_GT(p.total(), size_t(20) << 30) << p.describe();  // ViT-B/16 at batch 256: tens of GiB
  const std::string e = test::error_of([&] { check_memory(p, size_t(8) << 30, "training"); });
  EXPECT_NE(e.find("needs about"), std::string::npos) << e;
  EXPECT_NE(e.find("only 8.0 GiB is available"), std::string::npos) << e;
  EXPECT_NE(e.find("--no-memory-check"), std::string::npos) << e;
  EXPECT_NO_THROW(check_memory(p, p.total(), "training"));
  EXPECT_NO_THROW(check_memory(p, 0, "training"));  // unknown: no check
}

TEST(Memory, LimitFromTheEnvironmentOrProcMeminfo) {
  ::setenv("VIT_MEMORY_LIMIT", "2G", 1);
  EXPECT_EQ(available_memory_bytes(), size_t(2) << 30);
  ::setenv("VIT_MEMORY_LIMIT", "512M", 1);
  EXPECT_EQ(available_memory_bytes(), size_t(512) << 20);
  ::setenv("VIT_MEMORY_LIMIT", "0", 1);  // checks nothing, as documented
  EXPECT_EQ(available_memory_bytes(), size_t(0));
  ::setenv("VIT_MEMORY_LIMIT", "lots", 1);
  EXPECT_NE(test::error_of([] { available_memory_bytes(); }).find("VIT_MEMORY_LIMIT=lots"),
            std::string::npos);
  ::setenv("VIT_MEMORY_LIMIT", "3X", 1);
  EXPECT_NE(test::error_of([] { available_memory_bytes(); }).find("unknown unit 'X'"), std::string::npos);
  ::unsetenv("VIT_MEMORY_LIMIT");
  EXPECT_GT(available_memory_bytes(), size_t(0)) << "MemAvailable from /proc/meminfo";
}

}  // namespace vit
