// Loading pretrained layouts: format detection, unsupported / missing tensors named,
// new heads, input-size changes, and vit export read back as timm's layout.
#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/file.h"
#include "io/checkpoint.h"
#include "io/formats.h"
#include "io/pretrained.h"
#include "support/check.h"
#include "support/models.h"
#include "support/pretrained_copy.h"
#include "support/temp_dir.h"

namespace vit {

namespace fs = std::filesystem;

namespace {

using test::rewrite;

std::string fixture(const std::string& name) {
  return std::string(VIT_FIXTURE_DIR) + "/pretrained/" + name;
}

ViTConfig small_config() {
  ViTConfig c = test::with_width(test::mnist_seed_at(16, 6), 16, 4, 24);
  c.pos_embed = "learn";
  return c;
}

std::vector<float> logits(ViT& m, uint64_t seed) {
  const ViTConfig& c = m.config();
  const auto x = test::randn(2 * c.in_chans * c.img_h * c.img_w, seed);
  std::vector<float> z(2 * c.num_classes);
  m.infer(x.data(), 2, nullptr, z.data());
  return z;
}

}  // namespace

TEST(Pretrained, ArchitectureNamesGiveTheHeads) {
  EXPECT_EQ(detail::heads_from_architecture("vit_base_patch16_224.augreg2_in21k_ft_in1k", 768), 12);
  EXPECT_EQ(detail::heads_from_architecture("vit_huge_patch14_224", 1280), 16);
  EXPECT_EQ(detail::heads_from_architecture("deit_small_patch16_224", 384), 6);
  EXPECT_EQ(detail::heads_from_architecture("vit_tiny_patch16_384", 192), 3);
  EXPECT_EQ(detail::heads_from_architecture("vit_base_patch16_224", 384), 0);  // width disagrees
  EXPECT_EQ(detail::heads_from_architecture("resnet50", 768), 0);
}

// The table made from timm's own registry (tools/timm_table.py): a name with or without its
// pretrained tag, what the tensors do not show (CLIP's eps 1e-5, QuickGELU), and the names the
// export writes, which timm must know (it has no vit_medium_patch16_224 nor vit_huge_patch16_224).
TEST(Pretrained, TimmArchitectureTable) {
  const auto* b = detail::find_timm_architecture("vit_base_patch16_224.augreg2_in21k_ft_in1k");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->embed_dim, 768);
  EXPECT_EQ(b->num_heads, 12);
  EXPECT_FLOAT_EQ(b->norm_eps, 1e-6f);
  EXPECT_STREQ(b->act, "gelu");
  EXPECT_STREQ(b->unsupported, "");
  const auto* clip = detail::find_timm_architecture("vit_large_patch14_clip_224.openai_ft_in12k_in1k");
  ASSERT_NE(clip, nullptr);
  EXPECT_FLOAT_EQ(clip->norm_eps, 1e-5f);
  EXPECT_STREQ(clip->unsupported, "");
  const auto* quick = detail::find_timm_architecture("vit_base_patch16_clip_quickgelu_224.openai");
  ASSERT_NE(quick, nullptr);
  EXPECT_STREQ(quick->act, "quick_gelu");
  EXPECT_FLOAT_EQ(quick->norm_eps, 1e-5f);
  const auto* tanh = detail::find_timm_architecture("vit_so400m_patch16_siglip_gap_384.v2_webli");
  ASSERT_NE(tanh, nullptr);
  EXPECT_STREQ(tanh->act, "gelu_tanh");
  EXPECT_STREQ(tanh->unsupported, "");
  const auto* so400m = detail::find_timm_architecture("vit_so400m_patch14_siglip_384");
  ASSERT_NE(so400m, nullptr);
  EXPECT_EQ(so400m->num_heads, 16);       // no family pattern gives this one
  EXPECT_STREQ(so400m->unsupported, "");  // SigLIP's attention pool (global_pool='map') runs
  const auto* aimv2 = detail::find_timm_architecture("aimv2_large_patch14_224.apple_pt");
  ASSERT_NE(aimv2, nullptr);
  EXPECT_NE(std::string(aimv2->unsupported).find("gated MLP"), std::string::npos);
  EXPECT_EQ(detail::find_timm_architecture("vit_base_patch16"), nullptr);
  EXPECT_EQ(detail::find_timm_architecture("resnet50"), nullptr);

  EXPECT_STREQ(detail::timm_architecture_for(768, 1e-6f), "vit_base_patch16_224");
  EXPECT_STREQ(detail::timm_architecture_for(768, 1e-5f), "vit_base_patch16_clip_224");
  EXPECT_STREQ(detail::timm_architecture_for(8, 1e-6f), "vit_base_patch16_224");
  for (int64_t dim : {8, 192, 256, 384, 512, 640, 768, 1024, 1280, 1408, 1664})
    for (float eps : {1e-6f, 1e-5f}) {
      const char* name = detail::timm_architecture_for(dim, eps);
      const auto* a = detail::find_timm_architecture(name);
      ASSERT_NE(a, nullptr) << name << " is not in timm's registry";
      EXPECT_STREQ(a->unsupported, "") << name;
      EXPECT_EQ(a->norm_eps, eps) << name;
    }
  EXPECT_STREQ(detail::timm_architecture_for(1280, 1e-6f), "vit_huge_patch14_224");
  EXPECT_STREQ(detail::timm_architecture_for(512, 1e-5f), "vit_medium_patch16_clip_224");
  // DeiT's distilled models (VisionTransformerDistilled) run, and export under their names.
  const auto* deit = detail::find_timm_architecture("deit_small_distilled_patch16_224.fb_in1k");
  ASSERT_NE(deit, nullptr);
  EXPECT_STREQ(deit->unsupported, "");
  EXPECT_EQ(deit->num_heads, 6);
  EXPECT_STREQ(detail::timm_architecture_for(192, 1e-6f, true), "deit_tiny_distilled_patch16_224");
  EXPECT_STREQ(detail::timm_architecture_for(768, 1e-6f, true), "deit_base_distilled_patch16_224");
  EXPECT_STREQ(detail::timm_architecture_for(16, 1e-6f, true), "deit_base_distilled_patch16_224");
}

// Every architecture vitcpp runs builds by name as timm.create_model(name) does, with its
// default pretrained_cfg (tools/timm_table.py, from timm 1.0.29's survey): 27 names built
// before, vitcpp's presets of them, and those with other preprocessing than timm's
// (vit_small_patch8_224's default is its DINO tag: ImageNet's mean and std, no head).
TEST(Pretrained, EveryRunnableTimmNameBuildsAsTimm) {
  const std::vector<std::string> names = detail::runnable_timm_architectures();
  EXPECT_EQ(names.size(), 142u);
  // Against the survey of timm itself: what timm.create_model(name) built, and its pretrained_cfg.
  const auto survey =
      nlohmann::json::parse(read_text_file(std::string(VIT_FIXTURE_DIR) + "/../../tools/timm_survey.json"));
  for (const std::string& name : names) {
    const ViTConfig c = named_config(name);
    EXPECT_NO_THROW(c.validate()) << name;
    const auto& r = survey["models"][name];
    const auto& p = r["pretrained_cfg"];
    EXPECT_EQ(c.embed_dim, r["embed_dim"].get<int64_t>()) << name;
    EXPECT_EQ(c.depth, r["depth"].get<int64_t>()) << name;
    EXPECT_EQ(c.mlp_dim, r["mlp_hidden"].get<int64_t>()) << name;
    EXPECT_EQ(c.num_tokens() - c.num_patches(), int64_t(r["class_token"].get<bool>()) +
                                                    r["reg_tokens"].get<int64_t>() +
                                                    (r["class"] == "VisionTransformerDistilled"))
        << name;
    EXPECT_EQ(nlohmann::json({c.in_chans, c.img_h, c.img_w}), p["input_size"]) << name;
    EXPECT_EQ(c.num_classes, r["num_classes"].get<int64_t>()) << name;
    EXPECT_EQ(c.global_pool, r["global_pool"].get<std::string>()) << name;
    EXPECT_NEAR(c.crop_pct, p["crop_pct"].get<double>(), 1e-9) << name;
    EXPECT_EQ(c.interpolation, p["interpolation"].get<std::string>()) << name;
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_FLOAT_EQ(c.mean[i], p["mean"][i].get<float>()) << name;
      EXPECT_FLOAT_EQ(c.std[i], p["std"][i].get<float>()) << name;
    }
    EXPECT_EQ(c.qkv_bias, r["qkv_bias"].get<bool>()) << name;
    EXPECT_EQ(c.patch_bias, r["patch_bias"].get<bool>()) << name;
    EXPECT_EQ(c.no_embed_class, r["no_embed_class"].get<bool>()) << name;
    EXPECT_EQ(c.pre_norm, r["pre_norm"] == "LayerNorm") << name;
    EXPECT_EQ(c.use_fc_norm(), r["fc_norm"] == "LayerNorm") << name;
    EXPECT_EQ(c.layer_scale(), r["layer_scale"] == "LayerScale") << name;
    EXPECT_EQ(c.pool_include_prefix, r["pool_include_prefix"].get<bool>()) << name;
    EXPECT_EQ(c.head_dist, r["class"] == "VisionTransformerDistilled") << name;
    EXPECT_EQ(c.head_dim(), r["head_dim"].get<int64_t>()) << name;
    EXPECT_NEAR(c.norm_eps, r["norm_eps"].get<double>(), 1e-12) << name;
    EXPECT_EQ(nlohmann::json({c.patch_h, c.patch_w}), r["patch_size"]) << name;
  }
  const ViTConfig dino = named_config("vit_small_patch8_224.dino");
  EXPECT_EQ(dino.mean, (std::vector<float>{0.485f, 0.456f, 0.406f}));
  EXPECT_EQ(dino.num_classes, 0);
  const ViTConfig siglip = named_config("vit_so400m_patch14_siglip_384");
  EXPECT_EQ(siglip.global_pool, "map");
  EXPECT_FALSE(siglip.class_token);
  EXPECT_EQ(siglip.grid_h(), 27);  // 384 = 27 x 14 + 6
  EXPECT_EQ(siglip.mlp_dim, 4304);
  const ViTConfig deit3 = named_config("deit3_small_patch16_224");
  EXPECT_FLOAT_EQ(deit3.init_values, 1e-6f);  // timm's LayerScale init (from its model_args)
  const ViTConfig dinov2 = named_config("vit_base_patch14_reg4_dinov2");
  EXPECT_EQ(dinov2.reg_tokens, 4);
  EXPECT_EQ(dinov2.img_h, 518);
  EXPECT_TRUE(named_config("test_vit3").pool_include_prefix);
  const ViTConfig clip = named_config("vit_base_patch16_clip_quickgelu_224");
  EXPECT_EQ(clip.act_layer, "quick_gelu");
  EXPECT_TRUE(clip.pre_norm);
  EXPECT_TRUE(named_config("deit_tiny_distilled_patch16_224").head_dist);
  EXPECT_EQ(named_config("mnist-seed").embed_dim, 8);  // vitcpp's presets as before
}

// A pretrained tag in a name gives what timm.create_model("name.tag") takes from it: the tag's
// class count, input size and preprocessing, against the survey of timm itself (tag_cfgs,
// caught at the model's __init__). It was taken for the architecture's default tag: `.dino`
// and `.mae` were given a head and the default's mean, `deit3_*.fb_in22k_ft_in1k` crop 0.9.
// A tag the architecture does not have is refused, as timm refuses it.
TEST(Pretrained, EveryPretrainedTagBuildsAsTimm) {
  const auto survey =
      nlohmann::json::parse(read_text_file(std::string(VIT_FIXTURE_DIR) + "/../../tools/timm_survey.json"));
  size_t tags = 0, differ = 0;
  for (const std::string& name : detail::runnable_timm_architectures()) {
    const ViTConfig plain = named_config(name);
    const nlohmann::json tag_cfgs = survey["models"][name].value("tag_cfgs", nlohmann::json::object());
    for (const auto& [tag, t] : tag_cfgs.items()) {
      const std::string full = name + "." + tag;
      const ViTConfig c = named_config(full);
      ++tags;
      EXPECT_EQ(nlohmann::json({c.img_h, c.img_w}), t["img_size"]) << full;
      EXPECT_EQ(c.num_classes, t["num_classes"].get<int64_t>()) << full;
      EXPECT_NEAR(c.crop_pct, t["crop_pct"].get<double>(), 1e-9) << full;
      EXPECT_EQ(c.crop_mode, t["crop_mode"].get<std::string>()) << full;
      EXPECT_EQ(c.interpolation, t["interpolation"].get<std::string>()) << full;
      for (size_t i = 0; i < 3; ++i) {
        EXPECT_FLOAT_EQ(c.mean[i], t["mean"][i].get<float>()) << full;
        EXPECT_FLOAT_EQ(c.std[i], t["std"][i].get<float>()) << full;
      }
      // The architecture is the name's.
      EXPECT_EQ(c.embed_dim, plain.embed_dim) << full;
      EXPECT_EQ(c.depth, plain.depth) << full;
      EXPECT_EQ(c.global_pool, plain.global_pool) << full;
      EXPECT_EQ(c.act_layer, plain.act_layer) << full;
      differ += c.to_json(-1) != plain.to_json(-1);
    }
  }
  EXPECT_EQ(tags, 305u);   // timm.list_models(include_tags=True) of the 142 (".untrained" included)
  EXPECT_EQ(differ, 82u);  // timm_tags.inc's rows that are not {}
  EXPECT_EQ(detail::timm_tagged_names().size(), 305u);

  const ViTConfig dino = named_config("vit_base_patch16_224.dino");
  EXPECT_EQ(dino.num_classes, 0);
  EXPECT_EQ(dino.mean, (std::vector<float>{0.485f, 0.456f, 0.406f}));
  EXPECT_EQ(named_config("vit_base_patch16_224").mean, (std::vector<float>{0.5f, 0.5f, 0.5f}));
  EXPECT_EQ(named_config("vit_base_patch16_224.augreg_in21k").num_classes, 21843);
  EXPECT_DOUBLE_EQ(named_config("deit3_base_patch16_224.fb_in22k_ft_in1k").crop_pct, 1.0);
  EXPECT_EQ(named_config("vit_base_patch32_clip_384.openai_ft_in12k_in1k").crop_mode, "squash");
  EXPECT_EQ(named_config("vit_base_patch16_gap_224.untrained").embed_dim, 768);
  // Tags without hub weights are tags too (the survey took list_pretrained's, which has none).
  EXPECT_EQ(named_config("vit_huge_patch14_224.untrained").embed_dim, 1280);
  EXPECT_EQ(named_config("vit_base_patch32_clip_224.openai_ft_in12k_in1k").num_classes, 1000);
  // timm's split_model_name_tag: an empty tag is the default.
  EXPECT_EQ(named_config("vit_small_patch16_224.").to_json(-1),
            named_config("vit_small_patch16_224").to_json(-1));
  const auto refused = [](const std::string& name) {
    try {
      named_config(name);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("built");
  };
  EXPECT_EQ(
      refused("vit_base_patch16_224.augreg"),
      "Invalid pretrained tag (augreg) for vit_base_patch16_224: its tags are augreg2_in21k_ft_in1k, "
      "augreg_in1k, augreg_in21k, augreg_in21k_ft_in1k, dino, mae, orig_in21k, orig_in21k_ft_in1k, sam_in1k");
  EXPECT_NE(refused("vit_base_patch16_224.untrained").find("Invalid pretrained tag (untrained)"),
            std::string::npos);
  EXPECT_EQ(refused("vit_base_patch16_gap_224.in1k"),
            "Invalid pretrained tag (in1k) for vit_base_patch16_gap_224: its tags are untrained");
}

// timm's deprecated names (timm 0.6's, which tutorials still use) build what timm maps them
// to: vit_base_patch16_224_in21k is vit_base_patch16_224.augreg_in21k (it was "unknown model
// preset"). Each of the survey's maps to a name the table has.
TEST(Pretrained, DeprecatedTimmNamesBuildTheirCurrentName) {
  const auto survey =
      nlohmann::json::parse(read_text_file(std::string(VIT_FIXTURE_DIR) + "/../../tools/timm_survey.json"));
  ASSERT_EQ(survey["deprecated"].size(), 28u);
  const auto built = [](const std::string& name) {
    try {
      return named_config(name).to_json(-1);
    } catch (const Error& e) {
      return std::string(e.what());
    }
  };
  for (const auto& [old, current] : survey["deprecated"].items()) {
    EXPECT_EQ(detail::current_timm_name(old), current.get<std::string>());
    const auto* a = detail::find_timm_architecture(old);
    ASSERT_NE(a, nullptr) << old;
    if (*a->unsupported) continue;
    EXPECT_EQ(built(old), built(current.get<std::string>())) << old;
  }
  // timm maps vit_base_patch16_224_sam to a tag it does not have (.sam, not .sam_in1k) and
  // refuses it: so does vitcpp, in the same words.
  EXPECT_NE(built("vit_base_patch16_224_sam").find("Invalid pretrained tag (sam)"), std::string::npos);
  EXPECT_EQ(named_config("vit_base_patch16_224_in21k").num_classes, 21843);
  EXPECT_EQ(named_config("vit_small_patch16_224_dino").num_classes, 0);
  EXPECT_EQ(detail::current_timm_name("vit_base_patch16_224"), "vit_base_patch16_224");
}

// A timm save whose model_args override the width alone: timm built it with the name's heads.
// It was refused as "'vit_small_patch16_224' is not a name vitcpp knows" (found by a tester
// running timm's source); a width the name's heads do not divide still is, saying why.
TEST(Pretrained, AWidthOverrideTakesTheNamesHeads) {
  test::TempDir tmp("width_only");
  ViTConfig c = test::with_width(small_config(), 48, 6, 96);  // vit_small's 6 heads, another width
  ViT m(c);
  m.init_weights(4);
  export_timm(m, tmp / "m", {});
  auto cfg = nlohmann::json::parse(read_text_file(tmp / "m/config.json"));
  cfg["architecture"] = "vit_small_patch16_224";
  cfg["model_args"].erase("num_heads");
  write_file_atomic(tmp / "m/config.json", cfg.dump());
  const Pretrained p = load_pretrained(tmp / "m");
  EXPECT_EQ(p.model->config().num_heads, 6);
  EXPECT_EQ(logits(*p.model, 5), logits(m, 5));
  ViT five(test::with_width(small_config(), 40, 5, 80));  // 6 heads cannot split 40
  five.init_weights(4);
  export_timm(five, tmp / "five", {});
  cfg = nlohmann::json::parse(read_text_file(tmp / "five/config.json"));
  cfg["architecture"] = "vit_small_patch16_224";
  cfg["model_args"].erase("num_heads");
  write_file_atomic(tmp / "five/config.json", cfg.dump());
  const std::string why = test::error_of([&] { load_pretrained(tmp / "five"); });
  EXPECT_NE(why.find("'vit_small_patch16_224' has 6 heads of width 384, not 40"), std::string::npos) << why;
}

// A hub config.json names the architecture alone (no model_args): timm builds its pooling from
// the name. test_vit3 pools its register token too (pool_include_prefix), which the tensors do
// not show: it was read without it, logits 2e-2 off (found by a tester running timm's source).
TEST(Pretrained, AHubConfigTakesThePoolingFromItsArchitecturesName) {
  test::TempDir tmp("hub_vit3");
  ViTConfig c = named_config("test_vit3");
  c.img_h = c.img_w = 32;  // 2x2 patches: a small model of test_vit3's kind
  c.num_classes = 3;
  ViT m(c);
  m.init_weights(5);
  export_timm(m, tmp / "m", {});
  auto cfg = nlohmann::json::parse(read_text_file(tmp / "m/config.json"));
  nlohmann::json hub = {
      {"architecture", "test_vit3"}, {"num_classes", 3}, {"pretrained_cfg", cfg["pretrained_cfg"]}};
  write_file_atomic(tmp / "m/config.json", hub.dump());
  const Pretrained p = load_pretrained(tmp / "m");
  EXPECT_TRUE(p.model->config().pool_include_prefix);
  EXPECT_EQ(p.model->config().global_pool, "map");
  EXPECT_EQ(logits(*p.model, 5), logits(m, 5));
}

// DeiT's distilled ViT: exported as timm's VisionTransformerDistilled (a deit_*_distilled
// name, both heads in pretrained_cfg's classifier), read back with the same logits; read from
// the tensors alone; a new head replaces both heads.
TEST(Pretrained, DistilledDeitExportsAndReadsBackAsTimm) {
  test::TempDir tmp("deit");
  ViTConfig c = small_config();
  c.dist_token = c.head_dist = true;
  ViT m(c);
  m.init_weights(4);
  export_timm(m, tmp / "timm");
  const auto cfg = nlohmann::json::parse(read_text_file(tmp / "timm/config.json"));
  EXPECT_EQ(cfg["architecture"], "deit_base_distilled_patch16_224");
  EXPECT_EQ(cfg["pretrained_cfg"]["classifier"], nlohmann::json({"head", "head_dist"}));
  Pretrained p = load_pretrained(tmp / "timm");
  EXPECT_EQ(p.format, "timm");
  EXPECT_EQ(p.model->config().to_json(), m.config().to_json());
  EXPECT_EQ(logits(*p.model, 6), logits(m, 6));  // the same weights, bit for bit

  fs::remove(tmp / "timm/config.json");  // the shapes alone (and --num-heads)
  LoadOptions o;
  o.num_heads = 4;
  Pretrained bare = load_pretrained(tmp / "timm", o);
  EXPECT_TRUE(bare.model->config().dist_token && bare.model->config().head_dist);
  EXPECT_EQ(bare.model->config().num_tokens(), c.num_patches() + 2);

  o.num_classes = 3;  // fine-tuning: both heads new and zero
  Pretrained ft = load_pretrained(tmp / "timm", o);
  for (const char* name : {"head.weight", "head.bias", "head_dist.weight", "head_dist.bias"}) {
    const Tensor t = ft.model->param(name);
    EXPECT_EQ(t.shape[0], 3) << name;
    for (int64_t i = 0; i < t.numel(); ++i) ASSERT_EQ(t.data[i], 0.f) << name;
  }
  EXPECT_EQ(ft.model->param("dist_token").data[0], m.param("dist_token").data[0]);

  // A distillation token whose head reads the class token alone (transformers'
  // DeiTForImageClassification) has no timm form.
  c.head_dist = false;
  ViT single(c);
  const std::string msg = test::error_of([&] { export_timm(single, tmp / "single"); });
  EXPECT_NE(msg.find("--format hf or onnx"), std::string::npos) << msg;
  EXPECT_FALSE(fs::exists(tmp / "single"));
}

TEST(Pretrained, ExportReadsBackAsTimmWithTheSameLogits) {
  test::TempDir tmp("export");
  ViTConfig c = small_config();
  c.global_pool = "avg";
  c.img_w = 24;  // non-square
  c.reg_tokens = 1;
  c.init_values = 0.1f;
  c.act_layer = "quick_gelu";  // written as model_args act_layer (the name's is GELU)
  ViT m(c);
  m.init_weights(3);
  EXPECT_TRUE(export_timm(m, tmp / "timm", {"a", "b", "c", "d", "e", "f"}).empty());
  const auto cfg = nlohmann::json::parse(read_text_file(tmp / "timm/config.json"));
  EXPECT_EQ(cfg["model_args"]["num_heads"], 4);
  EXPECT_EQ(cfg["model_args"]["act_layer"], "quick_gelu");
  EXPECT_EQ(cfg["model_args"]["img_size"], nlohmann::json({16, 24}));
  EXPECT_EQ(cfg["pretrained_cfg"]["input_size"], nlohmann::json({1, 16, 24}));
  Pretrained p = load_pretrained(tmp / "timm");
  EXPECT_EQ(p.format, "timm");
  EXPECT_EQ(p.class_names.size(), 6u);
  EXPECT_EQ(p.model->config().to_json(), m.config().to_json());
  const auto want = logits(m, 5), got = logits(*p.model, 5);
  EXPECT_EQ(got, want);  // the same weights, bit for bit
}

// timm builds int(embed_dim * mlp_ratio) hidden units: the ratio M / D written as a double came
// out a unit short for some widths (int(100 * 1.15) is 114), and timm refused the weights.
// first_conv makes timm adapt the patch weights from 3 channels: of 2 channels it cannot, and
// loaded them at random (found by a tester building odd sizes, with timm's own source).
TEST(Pretrained, TimmConfigsBuildTheWidthsAndKeepThePatchWeights) {
  for (const auto& [D, M] : {std::pair<int64_t, int64_t>{100, 115},
                             {100, 29},
                             {300, 313},
                             {1000, 1001},
                             {720, 13},
                             {192, 768},
                             {8, 17}}) {
    ViTConfig c = small_config();
    c.embed_dim = D, c.num_heads = 1, c.mlp_dim = M;
    const double r = nlohmann::json::parse(timm_config_json(c, {}))["model_args"]["mlp_ratio"];
    EXPECT_EQ(int64_t(double(D) * r), M) << "timm's int(" << D << " * " << r << ")";
    EXPECT_LE(r, double(M) / double(D) * (1 + 1e-15)) << D << " " << M;
  }
  for (const int64_t chans : {1, 2, 3, 4}) {
    ViTConfig c = small_config();
    c.in_chans = chans;
    c.mean.assign(size_t(chans), 0.5f), c.std.assign(size_t(chans), 0.5f);
    const auto cfg = nlohmann::json::parse(timm_config_json(c, {}));
    EXPECT_EQ(cfg["pretrained_cfg"].contains("first_conv"), chans == 1 || chans == 3) << chans << " channels";
  }
}

// timm's save_for_hf keeps the architecture's default pretrained_cfg (3x224x224, ImageNet's
// mean and std) beside a model made at another size and channel count: timm builds the model
// from model_args, and so does vitcpp now (it refused the file for a 224x224 input).
TEST(Pretrained, ATimmModelOfItsOwnSizeBesideTheDefaultPretrainedCfgIsReadAtItsSize) {
  test::TempDir tmp("timm_custom");
  ViTConfig c = small_config();  // 1 channel, 16x16
  ViT m(c);
  m.init_weights(4);
  EXPECT_TRUE(export_timm(m, tmp / "timm", {}).empty());
  auto cfg = nlohmann::json::parse(read_text_file(tmp / "timm/config.json"));
  cfg["pretrained_cfg"]["input_size"] = {3, 224, 224};
  cfg["pretrained_cfg"]["mean"] = {0.485, 0.456, 0.406};
  cfg["pretrained_cfg"]["std"] = {0.229, 0.224, 0.225};
  write_file_atomic(tmp / "timm/config.json", cfg.dump(2));
  Pretrained p = load_pretrained(tmp / "timm");
  EXPECT_EQ(p.model->config().img_h, c.img_h);
  EXPECT_EQ(p.model->config().mean, std::vector<float>{0.5f});
  const auto has_note = [&](const std::string& text) {
    return std::any_of(p.notes.begin(), p.notes.end(),
                       [&](const std::string& n) { return n.find(text) != n.npos; });
  };
  EXPECT_TRUE(
      has_note("pretrained_cfg.input_size 224x224 is not model_args img_size 16x16: read at the model's"));
  EXPECT_TRUE(has_note("pretrained_cfg is for 3 input channels, the model has 1"));
  EXPECT_EQ(logits(*p.model, 5), logits(m, 5));
  // Where pos_embed is pretrained_cfg's grid and not model_args', the file is read at its grid
  // (as before model_args came first; timm resamples it to model_args' size).
  auto grid = cfg;
  grid["model_args"]["img_size"] = 32;
  grid["pretrained_cfg"]["input_size"] = {1, 16, 16};
  grid["pretrained_cfg"]["mean"] = {0.5}, grid["pretrained_cfg"]["std"] = {0.5};
  write_file_atomic(tmp / "timm/config.json", grid.dump(2));
  Pretrained at_grid = load_pretrained(tmp / "timm");
  EXPECT_EQ(at_grid.model->config().img_h, 16);
  EXPECT_EQ(logits(*at_grid.model, 5), logits(m, 5));
  // model_args global_pool '' is timm's head on every token: refused (it was read as 'token').
  auto no_pool = cfg;
  no_pool["model_args"]["global_pool"] = "";
  write_file_atomic(tmp / "timm/config.json", no_pool.dump(2));
  const std::string pool = test::error_of([&] { load_pretrained(tmp / "timm"); });
  EXPECT_NE(pool.find("model_args global_pool '' (timm's head on every token, no pooling) is not supported"),
            std::string::npos)
      << pool;
  // Where the channels agree, mean and std of another count are still an error.
  cfg["pretrained_cfg"]["input_size"] = {1, 224, 224};
  write_file_atomic(tmp / "timm/config.json", cfg.dump(2));
  const std::string msg = test::error_of([&] { load_pretrained(tmp / "timm"); });
  EXPECT_NE(msg.find("pretrained_cfg mean/std have 3 entries for 1 input channels"), std::string::npos)
      << msg;
}

// timm's ViT has no fixed table: a sin-cos one is written as its learned pos_embed, with a
// note (it was silent; the Hugging Face export said so).
TEST(Pretrained, TimmExportOfAFixedTableSaysItBecomesLearned) {
  test::TempDir tmp("sincos");
  ViTConfig c = small_config();
  c.pos_embed = "sincos";
  ViT m(c);
  m.init_weights(3);
  const auto notes = export_timm(m, tmp / "timm");
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("sin-cos position embedding is written as timm's learned one"), std::string::npos)
      << notes[0];
  Pretrained p = load_pretrained(tmp / "timm");
  EXPECT_EQ(p.model->config().pos_embed, "learn");
  EXPECT_EQ(logits(*p.model, 5), logits(m, 5));
}

// SigLIP's attention pool (global_pool 'map'): exported with model_args global_pool 'map'
// (timm builds its AttentionPoolLatent from that), read back to the same bits, and read from
// the tensors alone (attn_pool.latent says map); Hugging Face's ViT cannot hold it.
TEST(Pretrained, AttentionPoolExportsAndReadsBackAsTimm) {
  test::TempDir tmp("map");
  ViTConfig c = small_config();
  c.global_pool = "map";
  c.class_token = false;
  c.reg_tokens = 2;
  ViT m(c);
  m.init_weights(6);
  export_timm(m, tmp / "timm");
  const auto cfg = nlohmann::json::parse(read_text_file(tmp / "timm/config.json"));
  EXPECT_EQ(cfg["model_args"]["global_pool"], "map");
  EXPECT_EQ(cfg["model_args"]["fc_norm"], false);
  Pretrained p = load_pretrained(tmp / "timm");
  EXPECT_EQ(p.model->config().to_json(), m.config().to_json());
  EXPECT_EQ(logits(*p.model, 6), logits(m, 6));  // the same weights, bit for bit
  fs::remove(tmp / "timm/config.json");
  LoadOptions o;
  o.num_heads = 4;
  Pretrained bare = load_pretrained(tmp / "timm", o);
  EXPECT_EQ(bare.model->config().global_pool, "map");
  EXPECT_EQ(logits(*bare.model, 6), logits(m, 6));
  const std::string msg = test::error_of([&] { export_hf(m, tmp / "hf"); });
  EXPECT_NE(msg.find("attention pooling (global_pool=map"), std::string::npos) << msg;
  EXPECT_FALSE(fs::exists(tmp / "hf"));
}

// SigLIP's head: an in_proj of another shape than [3D, D] and [3D] is an error naming it, not
// a copy past its end.
TEST(Pretrained, SiglipInProjOfAnotherShapeIsAnError) {
  test::TempDir tmp("siglip_in_proj");
  const std::string bias = "vision_model.head.attention.in_proj_bias";
  rewrite(fixture("hf_siglip_vision"), tmp / "m", {bias}, {bias});  // [96] becomes [4]
  const std::string msg = test::error_of([&] { load_pretrained(tmp / "m"); });
  EXPECT_NE(msg.find(bias + " has shape [4], expected [96]"), std::string::npos) << msg;
}

// timm's ViT splits embed_dim over the heads and has no LayerNorm before the patch projection:
// vit-pytorch's variants have no timm form, and nothing is written. vitcpp's own checkpoint
// keeps them. The mean over the class token too is timm 1.0's model_args.pool_include_prefix,
// written with a note and read back.
TEST(Pretrained, WhatTimmCannotExpressIsRefusedAndKeptByCheckpoints) {
  test::TempDir tmp("dimhead");
  ViTConfig c = small_config();
  c.dim_head = 8;
  ViT m(c);
  m.init_weights(2);
  const std::string msg = test::error_of([&] { export_timm(m, tmp / "timm"); });
  EXPECT_NE(msg.find("heads are 8 wide (dim_head)"), std::string::npos) << msg;
  EXPECT_FALSE(fs::exists(tmp / "timm"));
  save_checkpoint(tmp / "m.safetensors", m);
  Pretrained p = load_pretrained(tmp / "m.safetensors");
  EXPECT_EQ(p.model->config().dim_head, 8);
  EXPECT_EQ(logits(*p.model, 2), logits(m, 2));
  c.dim_head = 0;
  c.patch_norm = true;
  ViT pn(c);
  EXPECT_NE(test::error_of([&] { export_timm(pn, tmp / "timm"); }).find("patch_norm"), std::string::npos);
  c.patch_norm = false;
  c.global_pool = "avg";
  c.pool_include_prefix = true;
  ViT inc(c);
  inc.init_weights(3);
  const std::vector<std::string> notes = export_timm(inc, tmp / "timm");
  EXPECT_TRUE(std::any_of(notes.begin(), notes.end(), [](const std::string& n) {
    return n.find("pool_include_prefix") != std::string::npos;
  }));
  const auto cfg = nlohmann::json::parse(read_text_file(tmp / "timm/config.json"));
  EXPECT_EQ(cfg["model_args"]["pool_include_prefix"], true) << cfg.dump();
  Pretrained back = load_pretrained(tmp / "timm");
  EXPECT_EQ(back.format, "timm");
  EXPECT_TRUE(back.model->config().pool_include_prefix);
  EXPECT_EQ(logits(*back.model, 2), logits(inc, 2));
}

// transformers' DeiT without its distillation token, or a ViT config over DeiT's tensors: an
// error that says which.
TEST(Pretrained, HfDeitAndItsDistillationTokenMustAgree) {
  test::TempDir tmp("hfdeit");
  const std::string src = fixture("libraries/hf_deit");
  rewrite(src, tmp / "no_token", {"deit.embeddings.distillation_token"}, {});
  std::string msg = test::error_of([&] { load_pretrained(tmp / "no_token"); });
  EXPECT_NE(msg.find("model_type 'deit' needs a distillation token"), std::string::npos) << msg;
  rewrite(src, tmp / "as_vit", {}, {});
  auto cfg = nlohmann::json::parse(read_text_file(tmp / "as_vit/config.json"));
  cfg["model_type"] = "vit";
  write_file_atomic(tmp / "as_vit/config.json", cfg.dump());
  msg = test::error_of([&] { load_pretrained(tmp / "as_vit"); });
  EXPECT_NE(msg.find("model_type 'vit' has a distillation token"), std::string::npos) << msg;
}

TEST(Pretrained, VitcppCheckpointsAreDetected) {
  test::TempDir tmp("vc");
  ViT m(small_config());
  m.init_weights(1);
  save_checkpoint(tmp / "m.safetensors", m, {{"class_names", R"(["0","1","2","3","4","5"])"}});
  Pretrained p = load_pretrained(tmp / "m.safetensors");
  EXPECT_EQ(p.format, "vitcpp");
  EXPECT_EQ(p.class_names.size(), 6u);
  EXPECT_EQ(logits(*p.model, 2), logits(m, 2));
}

TEST(Pretrained, UnsupportedTensorsAreNamed) {
  test::TempDir tmp("unsup");
  rewrite(fixture("timm_b"), tmp / "m", {}, {"blocks.0.attn.q_norm.weight", "attn_pool.latent"});
  const std::string msg = test::error_of([&] { load_pretrained(tmp / "m"); });
  EXPECT_NE(msg.find("blocks.0.attn.q_norm.weight"), std::string::npos) << msg;
  EXPECT_NE(msg.find("attn_pool.latent"), std::string::npos) << msg;
  EXPECT_NE(msg.find("2 tensor(s)"), std::string::npos) << msg;
}

// timm's clean_state_dict: a state dict saved from a model inside torch's DDP wrapper
// (module.) or torch.compile's (_orig_mod.) loads as the bare one; a name both ways is an error.
TEST(Pretrained, WrapperPrefixesAreDroppedAsTimmDoes) {
  test::TempDir tmp("prefixes");
  const Pretrained bare = load_pretrained(fixture("timm_b"));
  for (const std::string prefix : {"module.", "_orig_mod.", "module._orig_mod."}) {
    rewrite(fixture("timm_b"), tmp / prefix, {}, {}, "", prefix);
    const Pretrained p = load_pretrained(tmp / prefix);
    EXPECT_EQ(p.format, "timm") << prefix;
    EXPECT_EQ(logits(*p.model, 3), logits(*bare.model, 3)) << prefix;
  }
  rewrite(fixture("timm_b"), tmp / "both", {}, {"module.head.bias"});
  const std::string msg = test::error_of([&] { load_pretrained(tmp / "both"); });
  EXPECT_NE(msg.find("two tensors are named 'head.bias' once renamed (one was 'module.head.bias')"),
            std::string::npos)
      << msg;
}

TEST(Pretrained, MissingTensorsAreNamed) {
  test::TempDir tmp("missing");
  rewrite(fixture("timm_b"), tmp / "m", {"blocks.1.mlp.fc2.bias"}, {});
  const std::string msg = test::error_of([&] { load_pretrained(tmp / "m"); });
  EXPECT_NE(msg.find("missing tensor 'blocks.1.mlp.fc2.bias'"), std::string::npos) << msg;
  rewrite(fixture("hf"), tmp / "h", {"vit.encoder.layer.1.attention.attention.key.weight"}, {});
  const std::string hmsg = test::error_of([&] { load_pretrained(tmp / "h"); });
  EXPECT_NE(hmsg.find("vit.encoder.layer.1.attention.attention.key.weight"), std::string::npos) << hmsg;
}

TEST(Pretrained, HuggingFacePoolerIsSkippedWithANote) {
  test::TempDir tmp("pooler");
  rewrite(fixture("hf"), tmp / "h", {}, {"vit.pooler.dense.bias"});
  Pretrained p = load_pretrained(tmp / "h");
  ASSERT_EQ(p.notes.size(), 1u);
  EXPECT_NE(p.notes[0].find("pooler"), std::string::npos);
}

// A checkpoint without a head loads as a model that gives features only (its classes are
// an error that says what to do), or with --num-classes a new zero head.
TEST(Pretrained, HeadlessCheckpointsGiveFeaturesOrGetAZeroHead) {
  test::TempDir tmp("headless");
  rewrite(fixture("timm_b"), tmp / "m", {"head.weight", "head.bias"}, {});
  const Pretrained h = load_pretrained(tmp / "m");
  EXPECT_EQ(h.model->config().num_classes, 0);
  const std::string msg = test::error_of([&] { logits(*h.model, 1); });
  EXPECT_NE(msg.find("--num-classes"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--features"), std::string::npos) << msg;
  LoadOptions o;
  o.num_classes = 7;
  Pretrained p = load_pretrained(tmp / "m", o);
  EXPECT_EQ(p.model->config().num_classes, 7);
  const auto z = logits(*p.model, 1);
  for (float v : z) EXPECT_EQ(v, 0.f);  // zero head: every logit 0
  // A new head on a full checkpoint drops its class names.
  Pretrained q = load_pretrained(fixture("timm_a"), o);
  EXPECT_TRUE(q.class_names.empty());
}

TEST(Pretrained, NewInputSizeResamplesThePositionGrid) {
  LoadOptions o;
  o.img_h = 48;
  o.img_w = 40;
  Pretrained p = load_pretrained(fixture("timm_a"), o);  // no_embed_class: the grid alone
  EXPECT_EQ(p.model->table().at("pos_embed").shape, (Shape{1, 30, 32}));
  ASSERT_FALSE(p.notes.empty());
  EXPECT_NE(p.notes.back().find("4x4 grid to 6x5"), std::string::npos) << p.notes.back();
  Pretrained h = load_pretrained(fixture("hf"), o);  // class token kept in front
  EXPECT_EQ(h.model->table().at("pos_embed").shape, (Shape{1, 31, 32}));
  const Pretrained orig = load_pretrained(fixture("hf"));
  const float* a = orig.model->params().data() + orig.model->table().at("pos_embed").offset;
  const float* b = h.model->params().data() + h.model->table().at("pos_embed").offset;
  EXPECT_TRUE(std::equal(a, a + 32, b));
  for (float v : logits(*p.model, 4)) EXPECT_TRUE(std::isfinite(v));
  o.img_w = 41;  // past a multiple of the patch (8): the grid floored, as timm's Conv2d
  EXPECT_EQ(load_pretrained(fixture("timm_a"), o).model->config().grid_w(), 5);
  o.img_w = 7;
  EXPECT_NE(test::error_of([&] { load_pretrained(fixture("timm_a"), o); }).find("is smaller than one patch"),
            std::string::npos);
}

TEST(Pretrained, LabelsFileMustMatchTheHead) {
  test::TempDir tmp("labels");
  write_file_atomic(tmp / "labels.txt", "x\ny\n");
  LoadOptions o;
  o.labels_file = tmp / "labels.txt";
  EXPECT_NE(test::error_of([&] { load_pretrained(fixture("hf"), o); }).find("has 2 names"),
            std::string::npos);
  write_file_atomic(tmp / "labels.txt", "x\r\ny\r\n\r\nz\n");
  EXPECT_EQ(load_pretrained(fixture("hf"), o).class_names, (std::vector<std::string>{"x", "y", "z"}));
}

TEST(Pretrained, BadConfigJsonNamesTheFile) {
  test::TempDir tmp("badcfg");
  rewrite(fixture("timm_b"), tmp / "m", {}, {});
  write_file_atomic(tmp / "m/config.json", "{\"architecture\": ");
  const std::string msg = test::error_of([&] { load_pretrained(tmp / "m"); });
  EXPECT_NE(msg.find("config.json"), std::string::npos) << msg;
  EXPECT_NE(test::error_of([&] { load_pretrained(tmp / "nothing"); }).find("nothing"), std::string::npos);
}

// Numbers a config.json may hold that do not fit the field: a float past int64's range was
// undefined behaviour to convert (fuzz_pretrained_config found "hidden_size": 1e300 under
// UBSan), an id2label key past int64 threw std::out_of_range past the loader's catch.
TEST(Pretrained, OutOfRangeNumbersInConfigJsonAreErrors) {
  test::TempDir tmp("bignum");
  rewrite(fixture("hf"), tmp / "hf", {}, {});
  rewrite(fixture("timm_a"), tmp / "timm", {}, {});
  const nlohmann::json hf = nlohmann::json::parse(read_text_file(fixture("hf/config.json")));
  const nlohmann::json timm = nlohmann::json::parse(read_text_file(fixture("timm_a/config.json")));
  struct Case {
    const char* dir;
    nlohmann::json cfg;
    const char* expect;
  };
  std::vector<Case> cases;
  for (const char* key : {"hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                          "num_channels", "image_size", "patch_size"})
    for (double v : {1e300, -1e300, 2.5}) {
      nlohmann::json j = hf;
      j[key] = v;
      cases.push_back({"hf", j, key});
    }
  {
    nlohmann::json j = hf;
    j["id2label"] = {{"99999999999999999999999", "x"}};
    cases.push_back({"hf", j, "id2label"});
  }
  for (double v : {0.0, -16.0}) {  // a patch size of 0 divided by zero (fuzz_pretrained_config)
    nlohmann::json j = hf;
    j["patch_size"] = v;
    cases.push_back({"hf", j, "patch_size must be positive"});
  }
  for (const char* key : {"num_heads", "embed_dim", "img_size"}) {
    nlohmann::json j = timm;
    j["model_args"][key] = 1e300;
    j["pretrained_cfg"].erase("input_size");  // which would win over img_size
    cases.push_back({"timm", j, key});
  }
  {
    nlohmann::json j = timm;
    j["pretrained_cfg"]["input_size"] = {3, 1e300, 1e300};
    cases.push_back({"timm", j, "input_size"});
  }
  for (const Case& c : cases) {
    write_file_atomic(tmp / c.dir + "/config.json", c.cfg.dump());
    const std::string msg = test::error_of([&] { load_pretrained(tmp / c.dir); });
    EXPECT_NE(msg.find(c.expect), std::string::npos) << c.cfg.dump() << "\n -> " << msg;
  }
}

}  // namespace vit
