// Hugging Face export: the directory holds transformers' names, shapes and config keys (as
// the fixture that transformers itself wrote), vitcpp loads it back to bit-identical logits,
// and configs HF's ViT cannot express are refused with their names.
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/file.h"
#include "io/pretrained.h"
#include "support/check.h"
#include "support/models.h"
#include "support/temp_dir.h"

namespace vit {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string fixture(const std::string& name) {
  return std::string(VIT_FIXTURE_DIR) + "/pretrained/" + name;
}

std::vector<float> logits(ViT& m) {
  const ViTConfig& c = m.config();
  const auto x = test::randn(3 * c.in_chans * c.img_h * c.img_w, 5);
  std::vector<float> z(size_t(3 * c.num_classes));
  m.infer(x.data(), 3, nullptr, z.data());
  return z;
}

// Export, load back, the same logits bit for bit (the same weights, the same forward).
void expect_round_trip(ViT& m, const std::vector<std::string>& names, const std::string& dir) {
  export_hf(m, dir, names);
  const Pretrained p = load_pretrained(dir);
  EXPECT_EQ(p.format, "hf");
  std::vector<std::string> want_names = names;  // unnamed classes are written as their indices
  for (int64_t i = 0; names.empty() && i < m.config().num_classes; ++i)
    want_names.push_back(std::to_string(i));
  EXPECT_EQ(p.class_names, want_names);
  const ViTConfig &a = p.model->config(), &b = m.config();
  EXPECT_EQ(a.embed_dim, b.embed_dim);
  EXPECT_EQ(a.depth, b.depth);
  EXPECT_EQ(a.num_heads, b.num_heads);
  EXPECT_EQ(a.norm_eps, b.norm_eps);
  EXPECT_EQ(a.mean, b.mean);
  EXPECT_EQ(a.std, b.std);
  EXPECT_EQ(a.interpolation, b.interpolation);
  const std::vector<float> want = logits(m), got = logits(*p.model);
  EXPECT_TRUE(test::close_rel_max(dir + " logits after the round trip", got.data(), want.data(),
                                  int64_t(want.size()), 0.0));
}

TEST(HfExport, TheFixtureWrittenByTransformersComesBackWithItsNamesAndConfig) {
  test::TempDir tmp("hfx");
  const Pretrained p = load_pretrained(fixture("hf"));
  export_hf(*p.model, tmp / "out", p.class_names);
  const SafeTensors src = SafeTensors::open(fixture("hf") + "/model.safetensors");
  const SafeTensors out = SafeTensors::open(tmp / "out/model.safetensors");
  // Every tensor transformers wrote except the pooler (unused by classification), same shape
  // and values.
  size_t compared = 0;
  for (const auto& t : src.tensors()) {
    if (t.name.find("pooler") != std::string::npos) continue;
    const TensorInfo* o = out.find(t.name);
    ASSERT_NE(o, nullptr) << "missing " << t.name;
    EXPECT_EQ(o->shape, t.shape) << t.name;
    EXPECT_EQ(out.to_float(t.name), src.to_float(t.name)) << t.name;
    ++compared;
  }
  EXPECT_EQ(out.tensors().size(), compared);
  const json want = json::parse(read_text_file(fixture("hf") + "/config.json"));
  const json got = json::parse(read_text_file(tmp / "out/config.json"));
  for (const char* key : {"architectures", "model_type", "hidden_size", "num_hidden_layers",
                          "num_attention_heads", "intermediate_size", "hidden_act", "image_size",
                          "patch_size", "num_channels", "qkv_bias", "id2label", "label2id"})
    EXPECT_EQ(got[key], want[key]) << key;
  EXPECT_FLOAT_EQ(got["layer_norm_eps"].get<float>(), 1e-12f);
  const json pre = json::parse(read_text_file(tmp / "out/preprocessor_config.json"));
  const json pre_want = json::parse(read_text_file(fixture("hf") + "/preprocessor_config.json"));
  for (const char* key :
       {"image_processor_type", "resample", "size", "image_mean", "image_std", "do_normalize"})
    EXPECT_EQ(pre[key], pre_want[key]) << key;
}

// Packed weights are not the parameters: the model refuses to give them out (fp32_params),
// and nothing is written.
TEST(HfExport, PackedWeightsAreRefused) {
  test::TempDir tmp("hfpacked");
  ViT m(preset("mnist-seed"));
  m.pack_weights();
  const std::string msg = test::error_of([&] { export_hf(m, tmp / "hf"); });
  EXPECT_NE(msg.find("hf: not exported: the model's weights are packed for inference"), std::string::npos)
      << msg;
  EXPECT_FALSE(fs::exists(tmp / "hf/model.safetensors"));
}

TEST(HfExport, RoundTripsToTheSameLogits) {
  test::TempDir tmp("hfrt");
  ViTConfig c = test::square(test::tiny_vit());
  c.qkv_bias = false;
  c.norm_eps = 1e-5f;
  c.interpolation = "bicubic";
  c.mean = {0.2f, 0.3f};
  ViT a(c);
  a.init_weights(1);
  expect_round_trip(a, {"cat", "dog", "fish"}, tmp / "a");
  const json cfg = json::parse(read_text_file(tmp / "a/config.json"));
  EXPECT_EQ(cfg["label2id"]["dog"], 1);
  // mnist-seed: fixed sin-cos positions, written as HF's learned ones (a note says so).
  ViT b(preset("mnist-seed"));
  b.init_weights(2);
  const auto notes = export_hf(b, tmp / "b");
  ASSERT_FALSE(notes.empty());
  EXPECT_NE(notes[0].find("sin-cos"), std::string::npos) << notes[0];
  expect_round_trip(b, {}, tmp / "b");
  // timm's center crop has no place in ViTImageProcessor's config: a note says so.
  c.crop_pct = 0.875;
  c.crop_mode = "center";
  ViT e(c);
  const auto crop = export_hf(e, tmp / "e");
  ASSERT_EQ(crop.size(), 1u);
  EXPECT_NE(crop[0].find("center crop (crop_pct 0.875)"), std::string::npos) << crop[0];
  // A class token without a position (no_embed_class): HF's row for it is zero.
  c.no_embed_class = true;
  ViT d(c);
  d.init_weights(3);
  expect_round_trip(d, {}, tmp / "d");
  // The MLP's other activations: transformers' hidden_act names.
  for (auto [act, hf] : {std::pair{"quick_gelu", "quick_gelu"}, {"gelu_tanh", "gelu_pytorch_tanh"}}) {
    c.act_layer = act;
    ViT q(c);
    q.init_weights(4);
    expect_round_trip(q, {}, tmp / act);
    EXPECT_EQ(json::parse(read_text_file(tmp / (std::string(act) + "/config.json")))["hidden_act"], hf);
  }
}

// DeiT's distilled ViT is written as transformers' DeiT (model_type deit, deit. prefix,
// embeddings.distillation_token): with both heads as DeiTForImageClassificationWithTeacher
// (cls_classifier, distillation_classifier), with the class token's alone as
// DeiTForImageClassification; DeiTImageProcessor's resize and center crop hold the squash crop.
TEST(HfExport, DistilledDeitRoundTripsAsTransformersDeit) {
  test::TempDir tmp("hfdeit");
  ViTConfig c = test::square(test::tiny_vit());
  c.dist_token = c.head_dist = true;
  c.crop_pct = 0.8;  // resize to 10, crop 8
  c.interpolation = "bicubic";
  ViT t(c);
  t.init_weights(5);
  expect_round_trip(t, {"a", "b", "c"}, tmp / "teacher");
  const json cfg = json::parse(read_text_file(tmp / "teacher/config.json"));
  EXPECT_EQ(cfg["architectures"], json({"DeiTForImageClassificationWithTeacher"}));
  EXPECT_EQ(cfg["model_type"], "deit");
  const SafeTensors st = SafeTensors::open(tmp / "teacher/model.safetensors");
  for (const char* name : {"deit.embeddings.cls_token", "deit.embeddings.distillation_token",
                           "deit.encoder.layer.0.attention.attention.query.weight", "deit.layernorm.weight",
                           "cls_classifier.weight", "distillation_classifier.bias"})
    EXPECT_NE(st.find(name), nullptr) << name;
  EXPECT_EQ(st.find("deit.embeddings.position_embeddings")->shape, Shape({1, c.num_patches() + 2, 8}));
  const json pre = json::parse(read_text_file(tmp / "teacher/preprocessor_config.json"));
  EXPECT_EQ(pre["image_processor_type"], "DeiTImageProcessor");
  EXPECT_EQ(pre["size"], json({{"height", 10}, {"width", 10}}));
  EXPECT_EQ(pre["crop_size"], json({{"height", 8}, {"width", 8}}));
  const Pretrained p = load_pretrained(tmp / "teacher");
  EXPECT_EQ(p.model->config().to_json(), t.config().to_json());

  c.head_dist = false;  // the class token's head alone
  ViT s(c);
  s.init_weights(6);
  expect_round_trip(s, {}, tmp / "single");
  EXPECT_EQ(json::parse(read_text_file(tmp / "single/config.json"))["architectures"],
            json({"DeiTForImageClassification"}));
  EXPECT_NE(SafeTensors::open(tmp / "single/model.safetensors").find("classifier.weight"), nullptr);

  // A crop of 224 from 248: crop_pct read so that the resize is to 248 again, not 247.
  json pj = json::parse(read_text_file(tmp / "single/preprocessor_config.json"));
  pj["size"] = {{"height", 248}, {"width", 248}};
  pj["crop_size"] = {{"height", 224}, {"width", 224}};
  write_file_atomic(tmp / "single/preprocessor_config.json", pj.dump());
  const double pct = load_pretrained(tmp / "single").model->config().crop_pct;
  EXPECT_EQ(int64_t(std::floor(224.0 / pct)), 248) << pct;
}

// A model without a head is written as HF's ViTModel (no vit. prefix, no classifier) and
// reads back to the same features.
TEST(HfExport, AHeadlessModelIsAViTModel) {
  test::TempDir tmp("hfvm");
  ViTConfig c = preset("mnist-seed");
  c.num_classes = 0;
  ViT m(c);
  m.init_weights(4);
  export_hf(m, tmp / "m");
  const json cfg = json::parse(read_text_file(tmp / "m/config.json"));
  EXPECT_EQ(cfg["architectures"], json({"ViTModel"}));
  EXPECT_FALSE(cfg.contains("id2label"));
  const SafeTensors st = SafeTensors::open(tmp / "m/model.safetensors");
  EXPECT_NE(st.find("embeddings.patch_embeddings.projection.weight"), nullptr);
  EXPECT_EQ(st.find("classifier.weight"), nullptr);
  const Pretrained p = load_pretrained(tmp / "m");
  ASSERT_FALSE(p.model->has_head());
  const auto x = test::randn(2 * 28 * 28, 6);
  std::vector<float> want(2 * 8), got(2 * 8);
  m.infer_features(x.data(), 2, nullptr, want.data(), nullptr);
  p.model->infer_features(x.data(), 2, nullptr, got.data(), nullptr);
  EXPECT_EQ(got, want);
}

// transformers' ViTConfig takes image_size and patch_size as [height, width]: a non-square
// model goes out with the pairs and comes back the same.
TEST(HfExport, NonSquareSizesGoOutAsPairs) {
  test::TempDir tmp("hfpair");
  ViT m(test::tiny_vit());  // 8x12 images in 4x6 patches
  m.init_weights(4);
  expect_round_trip(m, {}, tmp / "out");
  const json cfg = json::parse(read_text_file(tmp / "out/config.json"));
  EXPECT_EQ(cfg["image_size"], json({8, 12}));
  EXPECT_EQ(cfg["patch_size"], json({4, 6}));
  const json pre = json::parse(read_text_file(tmp / "out/preprocessor_config.json"));
  EXPECT_EQ(pre["size"], json({{"height", 8}, {"width", 12}}));
}

TEST(HfExport, WhatHfsViTCannotExpressIsNamed) {
  test::TempDir tmp("hfno");
  struct Case {
    ViTConfig cfg;
    const char* want;
  };
  ViTConfig ls = test::tiny_vit();
  ls.init_values = 0.1f;
  ViTConfig reg = test::tiny_vit();
  reg.reg_tokens = 1;
  ViTConfig pre = test::tiny_vit();
  pre.pre_norm = true;
  pre.patch_bias = false;
  ViTConfig wide = test::square(test::tiny_vit());
  wide.dim_head = 8;
  ViTConfig pn = test::square(test::tiny_vit());
  pn.patch_norm = true;
  const Case cases[] = {{wide, "attention heads of their own width (dim_head=8)"},
                        {pn, "LayerNorms around the patch projection (patch_norm)"},
                        {test::tiny_vit("avg"), "average pooling (global_pool=avg), fc_norm after pooling"},
                        {test::tiny_vit("avg", false), "no class token"},
                        {ls, "LayerScale"},
                        {reg, "register tokens (reg_tokens=1)"},
                        {pre, "a LayerNorm before the blocks (pre_norm), no patch-embedding bias"}};
  for (const Case& k : cases) {
    ViT m(k.cfg);
    const std::string msg = test::error_of([&] { export_hf(m, tmp / "x"); });
    EXPECT_NE(msg.find("Hugging Face's ViT cannot express"), std::string::npos) << msg;
    EXPECT_NE(msg.find(k.want), std::string::npos) << msg;
    EXPECT_FALSE(fs::exists(tmp / "x/model.safetensors")) << msg;
  }
}

}  // namespace
}  // namespace vit
