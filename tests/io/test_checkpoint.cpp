// Checkpoints: exact round trip, config travelling in metadata and config.json, and errors
// that name the tensor and the file.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "io/checkpoint.h"
#include "support/temp_dir.h"
#include "vit/core/error.h"

namespace vit {

namespace {
namespace fs = std::filesystem;
ViTConfig small() {
  ViTConfig c = preset("mnist-seed");
  c.pos_embed = "learn";
  return c;
}
}  // namespace

TEST(Checkpoint, RoundTripIsBitExact) {
  ViT m(small());
  m.init_weights(7);
  test::TempDir tmp("ckpt");
  const std::string dir = tmp.str(), p = dir + "/model.safetensors";
  save_checkpoint(p, m);
  EXPECT_TRUE(fs::exists(dir + "/config.json"));
  auto r = load_checkpoint(p);
  EXPECT_EQ(r->config().to_json(), m.config().to_json());
  ASSERT_EQ(r->table().total(), m.table().total());
  EXPECT_EQ(0, std::memcmp(r->params().data(), m.params().data(), m.table().total() * sizeof(float)));
  // Names are timm's.
  SafeTensors st = SafeTensors::open(p);
  EXPECT_TRUE(st.find("blocks.1.mlp.fc2.weight"));
  EXPECT_EQ(st.metadata().at("format"), "pt");
  EXPECT_EQ(st.metadata().at("vitcpp_version"), VIT_VERSION);  // CMakeLists.txt's project version
}

TEST(Checkpoint, ConfigFromConfigJsonWhenMetadataLacksIt) {
  ViT m(small());
  test::TempDir tmp("ckpt");
  const std::string dir = tmp.str();
  std::vector<TensorOut> out;
  for (auto& s : m.table().specs())
    out.push_back({s.name, s.shape, DType::F32, m.params().data() + s.offset});
  write_safetensors(dir + "/model.safetensors", out);  // no metadata
  m.config().save(dir + "/config.json");
  auto r = load_checkpoint(dir + "/model.safetensors");
  EXPECT_EQ(r->config().to_json(), m.config().to_json());
}

TEST(Checkpoint, WrongShapeMissingAndExtraTensorsAreNamed) {
  ViT m(small());
  test::TempDir tmp("ckpt");
  const std::string dir = tmp.str();
  auto expect_error = [&](std::vector<TensorOut> out, const std::string& piece) {
    write_safetensors(dir + "/m.safetensors", out, {{"vit_config", m.config().to_json()}});
    ViT target(small());
    target.init_weights(3);
    std::vector<float> before(target.params().data(), target.params().data() + target.table().total());
    try {
      load_weights(target, SafeTensors::open(dir + "/m.safetensors"));
      ADD_FAILURE() << "expected an error containing " << piece;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(piece), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("m.safetensors"), std::string::npos) << e.what();
    }
    EXPECT_EQ(0, std::memcmp(before.data(), target.params().data(), before.size() * sizeof(float)))
        << "a failed load must not change the model";
  };
  std::vector<TensorOut> all;
  for (auto& s : m.table().specs())
    all.push_back({s.name, s.shape, DType::F32, m.params().data() + s.offset});
  auto missing = all;
  missing.erase(missing.begin() + 3);
  expect_error(missing, "missing tensor '" + all[3].name + "'");
  auto extra = all;
  float one = 1.f;
  extra.push_back({"blocks.9.ls1.gamma", {1}, DType::F32, &one});
  expect_error(extra, "unexpected tensor 'blocks.9.ls1.gamma'");
  auto wrong = all;
  for (auto& t : wrong)
    if (t.name == "head.weight") t.shape = {5, 16};
  expect_error(wrong, "tensor 'head.weight' has shape [5, 16], the model expects [10, 8]");
}

TEST(Checkpoint, TruncatedFileIsAClearError) {
  ViT m(small());
  test::TempDir tmp("ckpt");
  const std::string dir = tmp.str(), p = dir + "/m.safetensors";
  save_checkpoint(p, m);
  fs::resize_file(p, fs::file_size(p) - 100);
  try {
    load_checkpoint(p);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
  }
}

}  // namespace vit
