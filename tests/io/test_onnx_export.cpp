// ONNX export: every model variant passes ONNX's checker, and, where ONNX Runtime is
// installed and loads (npm onnxruntime-node in bench/peers/ort, with node on PATH), runs there with
// vitcpp's logits (a model without a head: its pooled features): |ort - vitcpp| <= 1e-4 x
// max |vitcpp logit| per model.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "core/file.h"
#include "io/onnx_export.h"
#include "io/pretrained.h"
#include "support/check.h"
#include "support/models.h"
#include "support/temp_dir.h"

namespace vit {
namespace {

namespace fs = std::filesystem;

constexpr double kTol = 1e-4;  // relative to the largest |logit|: float rounding in another order

struct Variant {
  std::string name;
  ViTConfig cfg;
};

// Every architectural switch of ViTConfig at least once, on tiny_vit (8x12 inputs in 4x6
// patches, two channels), plus the two named models of issue 27.
std::vector<Variant> variants() {
  std::vector<Variant> v;
  v.push_back({"token", test::tiny_vit()});
  v.push_back({"avg_fc_norm", test::tiny_vit("avg")});
  ViTConfig c = test::tiny_vit("avg");
  c.fc_norm = false;  // timm's norm on every token before the mean
  v.push_back({"avg_norm", c});
  v.push_back({"no_class_token_sincos", test::tiny_vit("avg", false, "sincos")});
  c = test::tiny_vit();
  c.reg_tokens = 2;
  c.no_embed_class = true;
  c.init_values = 0.1f;  // LayerScale
  v.push_back({"registers_no_embed_class_layerscale", c});
  c = test::tiny_vit();
  c.pre_norm = true;
  c.patch_bias = false;
  c.qkv_bias = false;
  c.fc_norm = true;
  c.norm_eps = 1e-5f;
  v.push_back({"pre_norm_no_biases_token_fc_norm", c});
  c = test::tiny_vit("avg");
  c.num_classes = 0;  // no head: the ONNX output is the pooled features
  v.push_back({"headless_avg", c});
  c = test::tiny_vit();
  c.num_heads = 3;
  c.dim_head = 5;  // vit-pytorch's dim_head: 15 attention channels on an 8-wide model
  v.push_back({"dim_head", c});
  c = test::tiny_vit("avg");
  c.patch_norm = true;           // vit-pytorch's: LayerNorms around the patch projection,
  c.fc_norm = false;             // the final norm on every token,
  c.pool_include_prefix = true;  // the mean over all of them
  c.qkv_bias = false;
  c.dim_head = 6;
  v.push_back({"vit_pytorch_style", c});
  c = test::tiny_vit("avg");
  c.act_layer = "quick_gelu";  // x sigmoid(1.702 x)
  v.push_back({"quick_gelu", c});
  c = test::tiny_vit();
  c.act_layer = "gelu_tanh";  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
  v.push_back({"gelu_tanh", c});
  c = test::tiny_vit();
  c.dist_token = c.head_dist = true;  // DeiT's distilled head: the mean of two heads
  v.push_back({"deit_distilled", c});
  c.head_dist = false;  // transformers' DeiTForImageClassification: the class token's head
  v.push_back({"deit_dist_token", c});
  c.head_dist = true;
  c.num_classes = 0;  // no heads: the mean of the two normed tokens
  v.push_back({"deit_headless", c});
  c = test::tiny_vit("map", false);  // SigLIP's attention pool (timm's AttentionPoolLatent)
  c.reg_tokens = 1;
  c.act_layer = "gelu_tanh";
  v.push_back({"map_pool", c});
  c.num_classes = 0;
  v.push_back({"map_pool_headless", c});
  c = test::tiny_vit("map", true);  // a class token and registers: timm 1.0 pools the patches alone
  c.reg_tokens = 2;
  v.push_back({"map_pool_prefix", c});
  c.pool_include_prefix = true;  // unless pool_include_prefix
  v.push_back({"map_pool_include_prefix", c});
  c = test::tiny_vit();
  c.img_h += 3;  // past a multiple of the patch: the Conv's floored grid, the last pixels unread
  c.img_w += 1;
  v.push_back({"size_past_the_patch", c});
  v.push_back({"mnist-seed", preset("mnist-seed")});
  v.push_back({"vit_tiny_patch16_224", preset("vit_tiny_patch16_224")});
  return v;
}

// Weights for a test that sees mistakes: timm's init (std 0.02) leaves attention almost
// uniform and logits near 0, so the small models get N(0, 0.5) in every parameter instead
// (ViT-Ti keeps timm's init, as a freshly created model has).
void init_for_test(ViT& m) {
  m.init_weights(7);
  if (m.config().embed_dim > 64) return;
  const std::vector<float> w = test::randn(m.table().total(), 13, 0.5f);
  std::copy(w.begin(), w.end(), m.params().data());
}

// The logits, or for a model without a head the pooled features ([B, D]).
std::vector<float> vitcpp_logits(ViT& m, const std::vector<float>& x, int64_t B) {
  const ViTConfig& c = m.config();
  std::vector<float> z(size_t(B * (m.has_head() ? c.num_classes : c.embed_dim)));
  if (m.has_head())
    m.infer(x.data(), B, nullptr, z.data());
  else
    m.infer_features(x.data(), B, nullptr, z.data(), nullptr);
  return z;
}

std::vector<float> input_for(const ViTConfig& c, int64_t B) {
  return test::randn(B * c.in_chans * c.img_h * c.img_w, 11);
}

// Why ONNX Runtime cannot run here, or "" when it can. Installed is not enough: under
// qemu-user (scripts/arm64_chroot.sh) onnxruntime-node's arm64 library dies with SIGSEGV
// as node loads it, before any model is read, so loading it is tried once first.
std::string ort_missing() {
  static const std::string why = [] {
    if (std::system("command -v node > /dev/null 2>&1") != 0)
      return std::string("node (Node.js) is not on PATH");
    const std::string dir = VIT_ORT_DIR;
    if (!fs::exists(dir + "/node_modules/onnxruntime-node/package.json"))
      return "onnxruntime-node is not installed in " + dir +
             " (scripts/setup.sh installs it; or: cd bench/peers/ort && npm ci --ignore-scripts)";
    const std::string load = "cd '" + dir + "' && node -e 'require(\"onnxruntime-node\")' > /dev/null 2>&1";
    if (const int rc = std::system(load.c_str()); rc != 0)
      return "onnxruntime-node is installed in " + dir + " but node cannot load it here (`" + load +
             "` exited with status " + std::to_string(WIFEXITED(rc) ? WEXITSTATUS(rc) : rc) + ")";
    return std::string();
  }();
  return why;
}

std::vector<float> read_floats(const std::string& path) {
  const std::vector<char> b = read_file_bytes(path);
  std::vector<float> v(b.size() / sizeof(float));
  std::memcpy(v.data(), b.data(), v.size() * sizeof(float));
  return v;
}

TEST(OnnxExport, EveryVariantPassesOnnxsChecker) {
  test::TempDir tmp("onnx");
  for (const Variant& v : variants()) {
    ViT m(v.cfg);
    m.init_weights(7);
    const std::string path = tmp / (v.name + ".onnx");
    const OnnxExportInfo info = export_onnx(m, path, {});
    EXPECT_EQ(info.opset, 17);
    EXPECT_EQ(info.bytes, fs::file_size(path));
    const std::string io = check_onnx_file(path);
    const ViTConfig& c = v.cfg;
    const std::string want = "pixel_values float [batch," + std::to_string(c.in_chans) + "," +
                             std::to_string(c.img_h) + "," + std::to_string(c.img_w) + "] -> " +
                             (c.num_classes > 0 ? "logits float [batch," + std::to_string(c.num_classes)
                                                : "features float [batch," + std::to_string(c.embed_dim)) +
                             "]";
    EXPECT_EQ(io, want) << v.name;
    // Weights: the file holds at least every parameter once (4 bytes each).
    EXPECT_GT(int64_t(info.bytes), m.table().total() * 4 / 2) << v.name;
  }
}

// The preprocessing travels in the file's metadata under timm's pretrained_cfg names, the
// crop included (without it a reader resizes as another model), floats as written.
TEST(OnnxExport, MetadataHoldsThePreprocessing) {
  test::TempDir tmp("onnxmeta");
  ViTConfig c = test::tiny_vit();
  c.mean = {0.485f, 0.456f};
  c.std = {0.229f, 0.224f};
  c.crop_pct = 0.875;
  c.crop_mode = "center";
  ViT m(c);
  m.init_weights(7);
  export_onnx(m, tmp / "m.onnx", {});
  const std::string bytes = read_text_file(tmp / "m.onnx");
  // metadata_props entries: the key, then the value's tag (field 2: 0x12) and length: the keys
  // alone appear inside vitcpp_config's JSON too, followed by a quote.
  for (const std::string& want : std::vector<std::string>{
           std::string("mean\x12\x0d[0.485,0.456]"), std::string("std\x12\x0d[0.229,0.224]"),
           std::string("crop_pct\x12\x05") + "0.875", std::string("crop_mode\x12\x06") + "center"})
    EXPECT_NE(bytes.find(want), std::string::npos) << want;
  EXPECT_EQ(bytes.find("0.48500001"), std::string::npos);
}

TEST(OnnxExport, CheckerRejectsAFileThatIsNotOnnx) {
  test::TempDir tmp("notonnx");
  write_file_atomic(tmp / "x.onnx", std::string("\x0a\xff\xff garbage", 12));
  const std::string msg = test::error_of([&] { check_onnx_file(tmp / "x.onnx"); });
  EXPECT_NE(msg.find("x.onnx"), std::string::npos) << msg;
}

TEST(OnnxExport, PackedWeightsAreRefused) {
  test::TempDir tmp("onnxref");
  ViT m(test::tiny_vit());
  m.pack_weights();
  const std::string msg = test::error_of([&] { export_onnx(m, tmp / "m.onnx"); });
  EXPECT_NE(msg.find("packed"), std::string::npos) << msg;
  EXPECT_FALSE(fs::exists(tmp / "m.onnx"));
}

// Exports m (weights of external_from bytes or more in a data file; int8: the blocks'
// products in int8) and runs the file in ONNX Runtime on x, a batch of B.
std::vector<float> ort_logits(ViT& m, const std::string& name, const std::string& dir,
                              const std::vector<float>& x, int64_t B, int64_t external_from = -1,
                              bool int8 = false) {
  const ViTConfig& c = m.config();
  const std::string model = dir + "/" + name + ".onnx", in = dir + "/in.f32", out = dir + "/out.f32";
  export_onnx(m, model, {}, external_from, int8);
  write_file_atomic(in, std::string_view(reinterpret_cast<const char*>(x.data()), x.size() * sizeof(float)));
  const std::string cmd = "node " + std::string(VIT_SOURCE_DIR) + "/tests/io/ort_logits.mjs " + VIT_ORT_DIR +
                          " " + model + " " + in + " " + std::to_string(B) + "," +
                          std::to_string(c.in_chans) + "," + std::to_string(c.img_h) + "," +
                          std::to_string(c.img_w) + " " + out + " > " + dir + "/node.log 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << name << ": " << cmd << "\n" << read_text_file(dir + "/node.log");
  return read_floats(out);
}

// The worst |got - want| over max |want|.
double worst_rel(const std::vector<float>& got, const std::vector<float>& want) {
  double scale = 0, worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    scale = std::max(scale, double(std::fabs(want[i])));
    worst = std::max(worst, double(std::fabs(got[i] - want[i])));
  }
  return worst / scale;
}

// Exports m, runs the file in ONNX Runtime at batch 3 and compares its logits with vitcpp's.
void expect_ort_matches(ViT& m, const std::string& name, const std::string& dir, int64_t external_from = -1) {
  const int64_t B = 3;  // the batch dimension is dynamic: not the 1 a fixed export would have
  const std::vector<float> x = input_for(m.config(), B);
  const std::vector<float> want = vitcpp_logits(m, x, B);
  const std::vector<float> got = ort_logits(m, name, dir, x, B, external_from);
  ASSERT_EQ(got.size(), want.size()) << name;
  double scale = 0, worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    scale = std::max(scale, double(std::fabs(want[i])));
    worst = std::max(worst, double(std::fabs(got[i] - want[i])));
  }
  std::cout << "[ ORT      ] " << name << ": worst |ort - vitcpp| " << worst << " = " << worst / scale
            << " x max|logit| " << scale << " (" << want.size() << " logits, batch " << B << ")\n";
  EXPECT_TRUE(test::close_rel_max(name + " ONNX Runtime vs vitcpp logits", got.data(), want.data(),
                                  int64_t(want.size()), kTol));
}

// --dtype int8: ONNX Runtime runs quantize_dynamic's graph (its int8 kernels), near the fp32
// logits, and about as near as vitcpp's own int8 (per-row activations against ORT's per-tensor
// ones); both figures printed.
TEST(OnnxExport, Int8GraphRunsInOnnxRuntimeNearTheFp32Logits) {
  const std::string missing = ort_missing();
  if (!missing.empty()) GTEST_SKIP() << "ONNX Runtime not available: " << missing;
  test::TempDir tmp("ort_int8");
  for (const Variant& v : variants()) {
    ViT m(v.cfg);
    init_for_test(m);
    const int64_t B = 3;
    const std::vector<float> x = input_for(m.config(), B);
    const std::vector<float> fp32 = vitcpp_logits(m, x, B);
    const std::vector<float> ort = ort_logits(m, v.name + "_int8", tmp.str(), x, B, -1, true);
    m.set_infer_dtype("int8");
    const std::vector<float> own = vitcpp_logits(m, x, B);
    ASSERT_EQ(ort.size(), fp32.size()) << v.name;
    const double e_ort = worst_rel(ort, fp32), e_own = worst_rel(own, fp32);
    std::cout << "[ ORT int8 ] " << v.name << ": worst |logit - fp32| / max|fp32|: ONNX Runtime int8 "
              << e_ort << ", vitcpp int8 " << e_own << "\n";
    // measured on Zen 3 (AVX2): at most 0.024 (ONNX Runtime; 2.6x vitcpp's on registers_...) and
    // 0.023 (vitcpp); int8 weights (u8 x s8) saturated there: up to 0.23
    EXPECT_LT(e_ort, 0.05) << v.name;
    EXPECT_LT(e_own, 0.05) << v.name;
    EXPECT_LT(e_ort, 4 * e_own) << v.name << ": the ONNX graph is far from vitcpp's int8";
    EXPECT_GT(e_ort, 0.0) << v.name << ": the same logits as fp32: the products did not run in int8";
  }
}

TEST(OnnxExport, OnnxRuntimeGivesVitcppsLogits) {
  const std::string missing = ort_missing();
  if (!missing.empty()) GTEST_SKIP() << "ONNX Runtime not available: " << missing;
  test::TempDir tmp("ort");
  for (const Variant& v : variants()) {
    ViT m(v.cfg);
    init_for_test(m);
    expect_ort_matches(m, v.name, tmp.str());
  }
}

// The pretrained fixtures (timm's, Hugging Face's and vit-pytorch's layouts, weights from
// PyTorch), as vit export --format onnx reads them: vit-pytorch's bring the patch LayerNorms,
// dim_head, the mean with and without the class token, and the fixed 2-D table; timm's and
// transformers' own DeiT files the distillation token with two heads and with one; timm's
// SigLIP file its attention pool, transformers' SigLIP layout its features and its classifier,
// timm 1.0's attention pool with registers or a class token (over the patches alone, or with
// pool_include_prefix over every token).
TEST(OnnxExport, OnnxRuntimeGivesThePretrainedFixturesLogits) {
  const std::string missing = ort_missing();
  if (!missing.empty()) GTEST_SKIP() << "ONNX Runtime not available: " << missing;
  test::TempDir tmp("ortfix");
  for (const char* name :
       {"timm_a", "timm_b", "hf", "vit_pytorch", "vit_pytorch_seed", "vit_pytorch_simple",
        "libraries/timm_deit_distilled", "libraries/hf_deit", "libraries/timm_siglip_map", "hf_siglip_vision",
        "hf_siglip_cls", "timm_reg_map", "timm_cls_map", "timm_prefix_map", "hf_nonsquare"}) {
    Pretrained p = load_pretrained(std::string(VIT_FIXTURE_DIR) + "/pretrained/" + name);
    expect_ort_matches(*p.model, fs::path(name).filename().string(), tmp.str());
  }
}

// Weights too large for one protobuf message (over 1.5 GiB by default) go to NAME.onnx.data;
// forced here on a small model.
TEST(OnnxExport, ExternalDataIsCheckedAndRuns) {
  test::TempDir tmp("onnxext");
  ViT m(preset("mnist-small"));  // 64 dims: matrices over the 1 KiB that goes out
  init_for_test(m);
  const OnnxExportInfo info = export_onnx(m, tmp / "m.onnx", {}, 0);
  EXPECT_EQ(info.data_file, tmp / "m.onnx.data");
  ASSERT_TRUE(fs::exists(info.data_file));
  // The data file holds the large tensors (at least the blocks' matrices); the model the graph.
  const ViTConfig& c = m.config();
  EXPECT_GT(fs::file_size(info.data_file),
            size_t(c.depth * (4 * c.embed_dim + 2 * c.mlp_dim) * c.embed_dim * 4));
  EXPECT_LT(info.bytes * 10, fs::file_size(info.data_file));
  EXPECT_EQ(check_onnx_file(tmp / "m.onnx"), "pixel_values float [batch,1,28,28] -> logits float [batch,10]");
  EXPECT_TRUE(export_onnx(m, tmp / "inline.onnx").data_file.empty());
  // The bound is on the bytes written: an int8 graph's weights are about a quarter of the
  // floats (they went out as if written in fp32).
  const int64_t fp32_bytes = m.table().total() * 4;
  EXPECT_FALSE(export_onnx(m, tmp / "f.onnx", {}, fp32_bytes / 2).data_file.empty());
  EXPECT_TRUE(export_onnx(m, tmp / "q.onnx", {}, fp32_bytes / 2, /*int8=*/true).data_file.empty());
  // A model that cannot be written leaves the data file as it was: the new data went in
  // first, beside the old model, which then read another model's weights.
  // (Its temporary name taken by a directory: the model's write fails after the data's.)
  write_file_atomic(tmp / "old.onnx", "old model");
  write_file_atomic(tmp / "old.onnx.data", "old data");
  fs::create_directories(temporary_name(tmp / "old.onnx"));
  EXPECT_THROW(export_onnx(m, tmp / "old.onnx", {}, 0), Error);
  EXPECT_EQ(read_text_file(tmp / "old.onnx.data"), "old data");
  EXPECT_EQ(read_text_file(tmp / "old.onnx"), "old model");
  // A stream has no file beside it for the data ("/dev/null.data" was tried).
  const std::string stream = test::error_of([&] { export_onnx(m, "/dev/null", {}, 0); });
  EXPECT_NE(stream.find("/dev/null: the 0 MiB of weights go to ONNX external data"), std::string::npos)
      << stream;
  fs::rename(info.data_file, tmp / "elsewhere");
  const std::string msg = test::error_of([&] { check_onnx_file(tmp / "m.onnx"); });
  EXPECT_NE(msg.find("m.onnx.data"), std::string::npos)
      << "a missing data file is the checker's error: " << msg;
  fs::rename(tmp / "elsewhere", info.data_file);
  const std::string missing = ort_missing();
  if (!missing.empty()) GTEST_SKIP() << "ONNX Runtime not available: " << missing;
  expect_ort_matches(m, "mnist-small_external", tmp.str(), 0);
}

}  // namespace
}  // namespace vit
