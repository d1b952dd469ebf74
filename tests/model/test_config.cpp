// ViTConfig: presets with timm's dimensions, JSON round trip, and clear errors.
#include <algorithm>
#include <vector>

#include "support/check.h"

#include "core/check.h"
#include "model/config.h"
#include "model/params.h"

namespace vit {

namespace {
int64_t count_params(const ViTConfig& c) {
  const ParamTable table(c);
  int64_t n = 0;
  for (auto& s : table.specs()) n += s.numel();
  return n;
}

}  // namespace

TEST(Config, PresetsHaveTimmParameterCounts) {
  // timm's vit_*_patch*_224 with 1000 classes (model.num_params()).
  EXPECT_EQ(count_params(preset("vit-tiny-16")), 5717416);
  EXPECT_EQ(count_params(preset("vit-small-16")), 22050664);
  EXPECT_EQ(count_params(preset("vit-small-32")), 22878952);
  EXPECT_EQ(count_params(preset("vit-base-16")), 86567656);
  EXPECT_EQ(count_params(preset("vit-base-32")), 88224232);
  EXPECT_EQ(count_params(preset("vit-large-16")), 304326632);
  EXPECT_EQ(count_params(preset("vit-huge-14")), 632045800);  // 256 patches of 14x14, 1000 classes
}

// timm's model names are presets too: the same configs as vitcpp's names, other patch sizes and
// resolutions from the name, and a misspelt name gets a suggestion.
TEST(Config, TimmNamesAreAliasesOfThePresets) {
  for (auto [timm, ours] : {std::pair{"vit_tiny_patch16_224", "vit-tiny-16"},
                            {"vit_small_patch16_224", "vit-small-16"},
                            {"vit_small_patch32_224", "vit-small-32"},
                            {"vit_base_patch16_224", "vit-base-16"},
                            {"vit_base_patch32_224", "vit-base-32"},
                            {"vit_large_patch16_224", "vit-large-16"},
                            {"vit_huge_patch14_224", "vit-huge-14"}})
    EXPECT_EQ(preset(timm).to_json(), preset(ours).to_json()) << timm;
  const ViTConfig c = preset("vit_base_patch16_384");
  EXPECT_EQ(c.img_h, 384);
  EXPECT_EQ(c.img_w, 384);
  EXPECT_EQ(count_params(c), 86859496);  // timm's vit_base_patch16_384: 24 x 24 patches
  EXPECT_EQ(preset("vit_small_patch8_224").patch_h, 8);
  EXPECT_NE(test::error_of([] { preset("vit-bse-16"); }).find("did you mean 'vit-base-16'?"),
            std::string::npos);
  EXPECT_THROW(preset("vit_base_patch16_230"), Error);  // 230 is not a multiple of 16
  // timm's pretrained_cfg for the names: ViT's _cfg (bicubic, center crop 0.9, mean and std
  // 0.5), none at 384; DeiT's ImageNet mean and std with a crop of 0.9 (timm's deit.py: it was
  // 0.875 here, the paper's). They were
  // bilinear, squash and 1.0, so a timm name's eval transform was not timm's.
  const ViTConfig vit = preset("vit_tiny_patch16_224"), deit = preset("deit_tiny_patch16_224");
  EXPECT_EQ(vit.interpolation, "bicubic");
  EXPECT_EQ(vit.crop_mode, "center");
  EXPECT_EQ(vit.crop_pct, 0.9);
  EXPECT_EQ(vit.mean, std::vector<float>(3, 0.5f));
  EXPECT_EQ(c.crop_pct, 1.0);
  EXPECT_EQ(deit.crop_pct, 0.9);
  EXPECT_EQ(deit.mean, (std::vector<float>{0.485f, 0.456f, 0.406f}));
  EXPECT_EQ(deit.std, (std::vector<float>{0.229f, 0.224f, 0.225f}));
}

TEST(Config, SeedPresets) {
  ViTConfig m = preset("mnist-seed");
  EXPECT_EQ(m.num_patches(), 49);
  EXPECT_EQ(m.num_tokens(), 50);
  EXPECT_EQ(m.pos_embed, "sincos");
  EXPECT_EQ(m.embed_dim, 8);
  ViTConfig c = preset("cifar-seed");
  EXPECT_EQ(c.num_tokens(), 65);
  EXPECT_EQ(c.head_dim(), 16);
  EXPECT_NE(test::error_of([] { preset("vit-gigantic"); }).find("known:"), std::string::npos);
}

TEST(Config, JsonRoundTripIsExact) {
  ViTConfig c = preset("cifar-seed");
  c.img_h = 36;
  c.patch_w = 6;
  c.img_w = 36;
  c.global_pool = "avg";
  c.drop_path_rate = 0.1f;
  c.qkv_bias = false;
  ViTConfig r = ViTConfig::from_json(c.to_json());
  EXPECT_EQ(r.to_json(), c.to_json());
  EXPECT_EQ(r.img_w, 36);
  EXPECT_EQ(r.patch_w, 6);
  EXPECT_FLOAT_EQ(r.drop_path_rate, 0.1f);
}

TEST(Config, ErrorsSayWhatIsWrong) {
  // A size past a multiple of the patch is floored (Conv2d's); vit-pytorch's patch embedding
  // cuts whole patches, and nothing is smaller than one patch.
  EXPECT_EQ(ViTConfig::from_json(R"({"img_size": 30, "patch_size": 4})").grid_h(), 7);
  EXPECT_NE(test::error_of([] {
              ViTConfig::from_json(R"({"img_size": 30, "patch_size": 4, "patch_norm": true})");
            }).find("not divisible by patch size 4x4 (vit-pytorch's patch embedding"),
            std::string::npos);
  EXPECT_NE(test::error_of([] {
              ViTConfig::from_json(R"({"img_size": 3, "patch_size": 4})");
            }).find("image size 3x3 is smaller than one patch (4x4)"),
            std::string::npos);
  EXPECT_NE(test::error_of([] {
              ViTConfig::from_json(R"({"embed_dim": 10, "num_heads": 3})");
            }).find("num_heads 3"),
            std::string::npos);
  EXPECT_NE(
      test::error_of([] { ViTConfig::from_json(R"({"embd_dim": 10})"); }).find("unknown key 'embd_dim'"),
      std::string::npos);
  EXPECT_NE(test::error_of([] {
              ViTConfig::from_json(R"({"global_pool": "token", "class_token": false})");
            }).find("needs class_token"),
            std::string::npos);
  EXPECT_NE(test::error_of([] { ViTConfig::from_json("{not json"); }).find("invalid JSON"),
            std::string::npos);
  EXPECT_NE(test::error_of([] { ViTConfig::from_json(R"({"depth": "twelve"})"); }).find("wrong value type"),
            std::string::npos);
  // Found by fuzz/fuzz_config: a number out of double's range escaped as nlohmann's
  // out_of_range; floats out of int64's range were converted (undefined behaviour).
  EXPECT_NE(test::error_of([] { ViTConfig::from_json(R"({"depth": 4e44444})"); }).find("invalid JSON"),
            std::string::npos);
  EXPECT_NE(
      test::error_of([] { ViTConfig::from_json(R"({"depth": 1e300})"); }).find("depth must be an integer"),
      std::string::npos);
  EXPECT_EQ(ViTConfig::from_json(R"({"depth": 3.0})").depth, 3);
  EXPECT_NE(test::error_of([] {
              ViTConfig::from_json(R"({"embed_dim": 4611686018427387904})");
            }).find("embed_dim 4611686018427387904 is implausibly large"),
            std::string::npos);
  EXPECT_NE(
      test::error_of([] { ViTConfig::load("/nonexistent/config.json"); }).find("/nonexistent/config.json"),
      std::string::npos);
}

// DeiT: timm's parameter counts of deit_*_patch16_224 and deit_*_distilled_patch16_224 (the
// distillation token, its pos_embed row and head_dist), the keys in the JSON only when set,
// and what a distillation token cannot go with.
TEST(Config, DeitPresetsAndDistillationToken) {
  EXPECT_EQ(count_params(preset("deit_tiny_patch16_224")), 5717416);
  EXPECT_EQ(count_params(preset("deit_tiny_distilled_patch16_224")), 5910800);
  EXPECT_EQ(count_params(preset("deit_small_distilled_patch16_224")), 22436432);
  EXPECT_EQ(count_params(preset("deit_base_distilled_patch16_224")), 87338192);
  const ViTConfig d = preset("deit_base_distilled_patch16_384");
  EXPECT_TRUE(d.dist_token && d.head_dist);
  EXPECT_EQ(d.num_tokens(), 24 * 24 + 2);
  EXPECT_EQ(ViTConfig::from_json(d.to_json()).to_json(), d.to_json());
  EXPECT_EQ(preset("vit-base-16").to_json().find("dist"), std::string::npos);
  for (auto [json, want] : {std::pair{R"({"head_dist": true})", "head_dist needs dist_token"},
                            {R"({"dist_token": true, "global_pool": "avg"})", "dist_token (DeiT) needs"},
                            {R"({"dist_token": true, "reg_tokens": 4})", "no register tokens"},
                            {R"({"dist_token": true, "no_embed_class": true})", "no_embed_class false"},
                            {R"({"dist_token": true, "head_dist": true, "drop_rate": 0.1})",
                             "drop_rate must be 0 with head_dist"}}) {
    const std::string msg = test::error_of([&] { ViTConfig::from_json(json); });
    EXPECT_NE(msg.find(want), std::string::npos) << json << ": " << msg;
  }
}

// vit-pytorch's dim_head: heads of their own width, the attention in num_heads * dim_head
// channels. The key appears in the JSON only where it changes the model.
TEST(Config, DimHeadWidensTheAttention) {
  ViTConfig c = preset("cifar-seed");
  EXPECT_EQ(c.to_json().find("dim_head"), std::string::npos);
  c.dim_head = 64;  // 12 heads of 64: 768 channels for a 192-wide model
  EXPECT_EQ(c.head_dim(), 64);
  EXPECT_EQ(c.attn_dim(), 768);
  const ViTConfig r = ViTConfig::from_json(c.to_json());
  EXPECT_EQ(r.dim_head, 64);
  EXPECT_EQ(r.to_json(), c.to_json());
  const ParamTable t(c);
  EXPECT_EQ(t.at("blocks.0.attn.qkv.weight").shape, (Shape{3 * 768, 192}));
  EXPECT_EQ(t.at("blocks.0.attn.qkv.bias").shape, (Shape{3 * 768}));
  EXPECT_EQ(t.at("blocks.0.attn.proj.weight").shape, (Shape{192, 768}));
  // The FLOPs count the wider products: qkv, q k^T and P v, proj.
  const int64_t T = 65, extra = c.depth * (2 * T * 192 * 3 * (768 - 192) + 2 * 2 * T * T * (768 - 192) +
                                           2 * T * (768 - 192) * 192);
  EXPECT_EQ(forward_flops(c), forward_flops(preset("cifar-seed")) + extra);
  // Heads that do not divide the width are fine once dim_head gives their width.
  EXPECT_EQ(ViTConfig::from_json(R"({"embed_dim": 10, "num_heads": 3, "dim_head": 4})").attn_dim(), 12);
  EXPECT_NE(test::error_of([] {
              ViTConfig::from_json(R"({"embed_dim": 10, "num_heads": 3})");
            }).find("dim_head sets the heads' width"),
            std::string::npos);
  EXPECT_NE(
      test::error_of([] { ViTConfig::from_json(R"({"dim_head": -1})"); }).find("dim_head must be positive"),
      std::string::npos);
}

// vit-pytorch's patch embedding and mean: two LayerNorms in the table, keys in the JSON only
// when set, the mean over every token only for avg pooling.
TEST(Config, PatchNormAndPoolIncludePrefix) {
  ViTConfig c = preset("mnist-seed");
  c.patch_norm = true;
  c.global_pool = "avg";
  c.pool_include_prefix = true;
  EXPECT_EQ(c.first_pooled(), 0);
  const ViTConfig r = ViTConfig::from_json(c.to_json());
  EXPECT_TRUE(r.patch_norm && r.pool_include_prefix);
  EXPECT_EQ(r.to_json(), c.to_json());
  const ParamTable t(c);
  EXPECT_EQ(t.at("patch_embed.norm_in.weight").shape, (Shape{16}));  // 1 channel x 4 x 4
  EXPECT_EQ(t.at("patch_embed.norm.bias").shape, (Shape{8}));
  EXPECT_FALSE(t.at("patch_embed.norm_in.weight").decay);
  EXPECT_EQ(t.specs()[0].name, "patch_embed.norm_in.weight");  // in the order data flows
  c.pool_include_prefix = false;
  EXPECT_EQ(c.first_pooled(), 1);
  const std::string plain = preset("mnist-seed").to_json();
  EXPECT_EQ(plain.find("patch_norm"), std::string::npos);
  EXPECT_EQ(plain.find("pool_include_prefix"), std::string::npos);
  EXPECT_NE(test::error_of([] {
              ViTConfig::from_json(R"({"pool_include_prefix": true})");
            }).find("pool_include_prefix is for global_pool 'avg' or 'map'"),
            std::string::npos);
}

// Attention pooling with fc_norm: timm builds it (no norm before the pool, fc_norm after);
// vitcpp refuses it, and the reason given was wrong ("timm norms the tokens before the pool").
TEST(Config, MapPoolWithFcNormIsRefusedForWhatItIs) {
  const std::string err = test::error_of(
      [] { ViTConfig::from_json(R"({"class_token": false, "global_pool": "map", "fc_norm": true})"); });
  EXPECT_NE(
      err.find("global_pool 'map' with fc_norm (in timm: no norm before the attention pool, fc_norm after "
               "it) is not supported"),
      std::string::npos)
      << err;
}

// The MLP's activation (timm's act_layer): written only when it is not GELU, so every other
// config reads and writes as before; an unknown name is an error naming the three.
TEST(Config, ActLayer) {
  ViTConfig c = preset("mnist-seed");
  EXPECT_EQ(c.activation(), Activation::gelu);
  EXPECT_EQ(c.to_json().find("act_layer"), std::string::npos);
  for (const char* act : {"gelu_tanh", "quick_gelu"}) {
    c.act_layer = act;
    const ViTConfig r = ViTConfig::from_json(c.to_json());
    EXPECT_EQ(r.act_layer, act);
    EXPECT_EQ(activation_name(r.activation()), std::string(act));
  }
  const std::string msg = test::error_of([] { ViTConfig::from_json(R"({"act_layer": "relu"})"); });
  EXPECT_NE(msg.find("act_layer must be 'gelu', 'gelu_tanh' or 'quick_gelu', got 'relu'"), std::string::npos)
      << msg;
}

TEST(Config, NonSquareImageAndPatch) {
  ViTConfig c = ViTConfig::from_json(R"({"img_size": [8, 12], "patch_size": [4, 2], "in_chans": 1})");
  EXPECT_EQ(c.grid_h(), 2);
  EXPECT_EQ(c.grid_w(), 6);
  EXPECT_EQ(c.mean.size(), 1u);
}

TEST(Config, DropPathIsLinearOverDepth) {
  ViTConfig c = preset("vit-tiny-16");
  c.drop_path_rate = 0.11f;
  EXPECT_FLOAT_EQ(c.drop_path_at(0), 0.f);
  EXPECT_FLOAT_EQ(c.drop_path_at(11), 0.11f);
  EXPECT_FLOAT_EQ(c.drop_path_at(5), 0.05f);
  // timm's torch.linspace(0, rate, depth) is [0] at depth 1: the one block is never dropped
  // (it had the whole rate: a tester saw the loss move with the seed where timm's did not).
  c.depth = 1;
  EXPECT_FLOAT_EQ(c.drop_path_at(0), 0.f);
}

TEST(ParamTable, NamesShapesAndGroups) {
  ViTConfig c = preset("mnist-seed");
  ParamTable t(c);
  EXPECT_EQ(t.at("patch_embed.proj.weight").shape, (Shape{8, 1, 4, 4}));
  EXPECT_EQ(t.at("pos_embed").shape, (Shape{1, 50, 8}));
  EXPECT_FALSE(t.at("pos_embed").trainable);  // sincos is fixed
  EXPECT_EQ(t.at("blocks.1.attn.qkv.weight").shape, (Shape{24, 8}));
  EXPECT_TRUE(t.at("blocks.1.attn.qkv.weight").decay);
  EXPECT_FALSE(t.at("blocks.1.attn.qkv.bias").decay);
  EXPECT_FALSE(t.at("cls_token").decay);
  EXPECT_TRUE(t.at("patch_embed.proj.weight").decay);
  EXPECT_TRUE(t.find("norm.weight"));
  EXPECT_FALSE(t.find("fc_norm.weight"));
  c.reg_tokens = 2;  // timm's no_weight_decay() holds reg_token since 1.0.28 (2cff2350): no decay
  EXPECT_FALSE(ParamTable(c).at("reg_token").decay);
  c.reg_tokens = 0;
  c.global_pool = "avg";
  c.qkv_bias = false;
  c.pos_embed = "learn";
  ParamTable a(c);
  EXPECT_TRUE(a.find("fc_norm.weight"));
  EXPECT_FALSE(a.find("norm.weight"));
  EXPECT_FALSE(a.find("blocks.0.attn.qkv.bias"));
  EXPECT_TRUE(a.at("pos_embed").trainable);
  EXPECT_FALSE(a.at("pos_embed").decay);
  // Offsets are 64-byte aligned and do not overlap.
  int64_t end = 0;
  for (auto& s : a.specs()) {
    EXPECT_EQ(s.offset % 16, 0) << s.name;
    EXPECT_GE(s.offset, end) << s.name;
    end = s.offset + s.numel();
  }
  EXPECT_LE(end, a.total());
}

// Every entry binds its own field: bind_weights gives each table entry's view (its offset,
// its timm shape; the patch weight as a product's [D, C*Ph*Pw]) to one field of Weights, and
// no two entries share one. Checked on configs that between them have every optional tensor.
TEST(ParamTable, EachEntryBindsItsOwnField) {
  std::vector<ViTConfig> configs(4, preset("mnist-seed"));
  configs[0].patch_norm = true;
  configs[0].pre_norm = true;
  configs[0].init_values = 0.1f;
  configs[1].global_pool = "map";
  configs[1].reg_tokens = 2;
  configs[2] = preset("deit_tiny_distilled_patch16_224");
  configs[3].global_pool = "avg";
  configs[3].num_classes = 0;
  for (const ViTConfig& c : configs) {
    const ParamTable t(c);
    std::vector<float> arena(size_t(t.total()));
    Weights w = bind_weights(t, c, arena.data());
    std::vector<const float*> seen;
    for (const ParamSpec& s : t.specs()) {
      const Tensor& v = s.slot.in(w);
      EXPECT_EQ(v.data, arena.data() + s.offset) << s.name;
      EXPECT_EQ(v.numel(), s.numel()) << s.name;
      if (s.name != "patch_embed.proj.weight") {
        EXPECT_EQ(v.shape, s.shape) << s.name;
      }
      EXPECT_EQ(std::count(seen.begin(), seen.end(), v.data), 0) << s.name << ": a field bound twice";
      seen.push_back(v.data);
    }
    EXPECT_EQ(w.patch_w.shape, (Shape{c.embed_dim, c.patch_dim()}));
    EXPECT_EQ(w.blocks.size(), size_t(c.depth));
  }
}

// vit train's "model:" line: the shape in words and the options that are not timm's defaults
// (it printed the whole config as one ~700-character JSON line).
TEST(Config, SummaryIsOneReadableLine) {
  EXPECT_EQ(preset("mnist-seed").summary(),
            "28x28x1 images, 4x4 patches (49), 2 blocks of width 8, 2 heads, MLP 32, class-token pooling, "
            "sincos positions, 10 classes");
  ViTConfig c = preset("vit-small-16");
  c.class_token = false;
  c.reg_tokens = 4;
  c.global_pool = "map";
  c.init_values = 1e-5f;
  c.drop_path_rate = 0.1f;
  c.act_layer = "gelu_tanh";
  c.num_classes = 1;
  c.validate();
  EXPECT_EQ(c.summary(),
            "224x224x3 images, 16x16 patches (196), 12 blocks of width 384, 6 heads, MLP 1536 (gelu_tanh), "
            "no class token, 4 register tokens, attention pooling, LayerScale 1e-05, drop path 0.1, 1 class");
}

}  // namespace vit
