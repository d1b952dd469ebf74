// Triton's model configuration read into a model's settings (src/serve/model_config.h): each
// field vit serve reads, protobuf text and JSON alike; the fields it does not read, noted;
// and each configuration it cannot honour, a clear error.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/check.h"
#include "serve/model_config.h"

namespace vit::serve {
namespace {

ModelSettings flags() {
  ModelSettings d;  // --max-batch 16 --max-delay-ms 5 --max-queue 256 --instances 1
  d.dtype = "";
  return d;
}

ModelSettings read(const std::string& text, bool json, std::vector<std::string>* notes = nullptr) {
  std::vector<std::string> mine;
  return apply_model_config(text, json, "cats", "config.pbtxt", flags(), notes ? *notes : mine);
}

// The error's message, or "" when none.
std::string error_of(const std::string& text, bool json = false) {
  try {
    read(text, json);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ModelConfig, TritonsFieldsSetTheModelsBatchingQueueInstancesAndDtype) {
  if (!model_configs_supported()) GTEST_SKIP() << "built without protobuf";
  std::vector<std::string> notes;
  const ModelSettings s = read(R"(
      name: "cats"
      max_batch_size: 8
      input [ { name: "pixel_values" data_type: TYPE_FP32 dims: [ 3, 32, 32 ] reshape { shape: [ 1 ] } } ]
      dynamic_batching { max_queue_delay_microseconds: 2500 default_queue_policy { max_queue_size: 64 } }
      instance_group [ { count: 2 kind: KIND_CPU }, { kind: KIND_AUTO } ]
      parameters { key: "dtype" value { string_value: "bf16" } }
      model_warmup [ { name: "w" batch_size: 1 } ])",
                               false, &notes);
  EXPECT_EQ(s.max_batch, 8);
  EXPECT_TRUE(s.dynamic);
  EXPECT_DOUBLE_EQ(s.max_delay_ms, 2.5);
  EXPECT_EQ(s.max_queue, 64);
  EXPECT_EQ(s.instances, 3);  // 2, and KIND_AUTO's default count of 1
  EXPECT_EQ(s.dtype, "bf16");
  EXPECT_EQ(s.capacity(), 64 + 8 * 3);
  const std::string all = [&] {
    std::string t;
    for (const std::string& n : notes) t += n + "\n";
    return t;
  }();
  EXPECT_NE(all.find("line 4: ModelInput.reshape is not read"), std::string::npos) << all;
  EXPECT_NE(all.find("model_warmup is not read"), std::string::npos) << all;
  EXPECT_NE(all.find("input and output are not read"), std::string::npos) << all;
  EXPECT_EQ(notes.size(), 3u) << all;
}

TEST(ModelConfig, WithoutDynamicBatchingRequestsAreNotCombinedAndJsonReadsTheSame) {
  if (!model_configs_supported()) GTEST_SKIP() << "built without protobuf";
  const ModelSettings plain = read("max_batch_size: 4", false);
  EXPECT_EQ(plain.max_batch, 4);
  EXPECT_FALSE(plain.dynamic);
  EXPECT_EQ(plain.capacity(), 256 + 1);  // the flags' queue; one request a pass
  EXPECT_EQ(read("max_batch_size: 0 dynamic_batching {}", false).max_batch, 1);  // Triton's "no batching"
  EXPECT_FALSE(read("max_batch_size: 0 dynamic_batching {}", false).dynamic);
  const ModelSettings j = read(
      R"({"max_batch_size": 8, "dynamic_batching": {"max_queue_delay_microseconds": 2500},
          "instance_group": [{"count": 2, "kind": "KIND_CPU"}], "backend": "vitcpp", "optimization": {}})",
      true);
  EXPECT_EQ(j.max_batch, 8);
  EXPECT_TRUE(j.dynamic);
  EXPECT_DOUBLE_EQ(j.max_delay_ms, 2.5);
  EXPECT_EQ(j.max_queue, 256);  // Triton's 0 is no limit: the flags' bound stays
  EXPECT_EQ(j.instances, 2);
  const ModelSettings none = read("", false);  // an empty configuration changes nothing
  EXPECT_EQ(none.max_batch, 1);                // ... but max_batch_size, whose default is 0
}

TEST(ModelConfig, WhatVitServeCannotHonourIsAClearError) {
  if (!model_configs_supported()) GTEST_SKIP() << "built without protobuf";
  const std::pair<std::string, std::string> cases[] = {
      {"max_batch_size: [", "config.pbtxt: line 1 column"},
      {"max_batch_size: 8\ninstance_group [ { kind: KIND_GPU } ]", "KIND_GPU: vit serve runs on the CPU"},
      {"name: \"dogs\"", "name \"dogs\", but the model is cats"},
      {"max_batch_size: -1", "max_batch_size -1 is negative"},
      {"parameters { key: \"dtype\" value { string_value: \"fp16\" } }", "dtype is fp32, bf16 or int8"},
      {"sequence_batching { }", "sequence batching and ensembles"},
      {"max_batch_size: 8 dynamic_batching { max_queue_delay_microseconds: \"x\" }", "line 1 column"},
      // Sizes a client could send to crash the server (a tester's clang-tidy pass): two counts
      // wrapped an int to -2 instances (a segfault), a delay of 2^64 - 1 us to a negative one.
      {"instance_group [ { count: 2147483647 }, { count: 2147483647 } ]",
       "instance_group counts add up to 4294967294 instances; at most 4096"},
      {"max_batch_size: 8 dynamic_batching { max_queue_delay_microseconds: 18446744073709551615 }",
       "max_queue_delay_microseconds 18446744073709551615 is more than 1000 s"},
  };
  for (const auto& [text, message] : cases) {
    const std::string e = error_of(text);
    EXPECT_NE(e.find(message), std::string::npos) << text << "\n  gave: " << e;
  }
  EXPECT_NE(error_of("{\"max_batch_size\": \"many\"}", true).find("not a model configuration in JSON"),
            std::string::npos);
}

}  // namespace
}  // namespace vit::serve
