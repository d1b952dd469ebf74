// Hugging Face transformers' config.json and preprocessor_config.json as transformers reads
// them (src/io/hf_format.cpp): the image processor's defaults for what a file leaves out, the
// forms transformers accepts, and for the rest an error that names the file and the field
// (a size without its width was undefined behaviour: a crash).
#include <nlohmann/json.hpp>

#include "core/file.h"
#include "io/pretrained.h"
#include "support/check.h"
#include "support/pretrained_copy.h"
#include "support/temp_dir.h"

namespace vit {
namespace {

using json = nlohmann::json;

std::string fixture(const std::string& name) {
  return std::string(VIT_FIXTURE_DIR) + "/pretrained/" + name;
}

// A copy of fixture `from` in tmp/name with `edit` applied to its JSON file `file`.
std::string edited(const test::TempDir& tmp, const std::string& name, const std::string& from,
                   const std::string& file, const std::function<void(json&)>& edit) {
  const std::string dir = tmp / name;
  test::rewrite(fixture(from), dir, {}, {});
  json j = json::parse(read_text_file(dir + "/" + file));
  edit(j);
  write_file_atomic(dir + "/" + file, j.dump());
  return dir;
}

std::string load_error(const std::string& dir) {
  return test::error_of([&] { load_pretrained(dir); });
}

TEST(HfPreprocessor, ASizeWithoutItsWidthOrAnotherFormIsAnErrorNamingIt) {
  test::TempDir tmp("hfsize");
  for (const char* key : {"size", "crop_size"}) {
    const std::string dir = edited(tmp, key, "hf", "preprocessor_config.json", [&](json& p) {
      p["do_center_crop"] = true;
      p["crop_size"] = {{"height", 32}, {"width", 32}};
      p[key] = {{"height", 32}};
    });
    const std::string msg = load_error(dir);
    EXPECT_NE(msg.find(std::string("preprocessor_config.json ") + key + " {\"height\":32} is not read"),
              std::string::npos)
        << msg;
  }
  // CLIP's and ConvNeXt's resize of the shortest edge: transformers' ViT processor refuses it.
  const std::string dir = edited(tmp, "edge", "hf", "preprocessor_config.json", [](json& p) {
    p["size"] = {{"shortest_edge", 32}};
  });
  const std::string msg = load_error(dir);
  EXPECT_NE(msg.find("size {\"shortest_edge\":32} is not read"), std::string::npos) << msg;
  EXPECT_NE(msg.find("aspect ratio"), std::string::npos) << msg;
}

TEST(HfPreprocessor, MeanAndStdTakeOneNumberForAllChannelsAndNullForTheDefault) {
  test::TempDir tmp("hfmean");
  Pretrained p = load_pretrained(edited(tmp, "one", "hf", "preprocessor_config.json", [](json& j) {
    j["image_mean"] = 0.25;
    j["image_std"] = nullptr;
  }));
  EXPECT_EQ(p.model->config().mean, (std::vector<float>{0.25f, 0.25f, 0.25f}));
  EXPECT_EQ(p.model->config().std, (std::vector<float>{0.5f, 0.5f, 0.5f}));  // ViTImageProcessor's
  std::string msg = load_error(edited(tmp, "two", "hf", "preprocessor_config.json", [](json& j) {
    j["image_mean"] = {0.1, 0.2};
  }));
  EXPECT_NE(msg.find("preprocessor_config.json image_mean has 2 values; the model has 3 channels"),
            std::string::npos)
      << msg;
  msg = load_error(
      edited(tmp, "text", "hf", "preprocessor_config.json", [](json& j) { j["image_std"] = "0.5"; }));
  EXPECT_NE(msg.find("preprocessor_config.json image_std must be a number or a list of numbers"),
            std::string::npos)
      << msg;
}

// AutoImageProcessor makes the processor the file names: DeiTImageProcessor's defaults (a
// resize to 256, a center crop of 224, bicubic) for the fields it leaves out; the fixture
// transformers wrote for a DeiT names ViTImageProcessor, whose defaults are no crop, bilinear.
TEST(HfPreprocessor, TheNamedProcessorsDefaultsFillWhatTheFileLeavesOut) {
  test::TempDir tmp("hfdeitpre");
  const ViTConfig as_written = load_pretrained(fixture("libraries/hf_deit")).model->config();
  EXPECT_EQ(as_written.crop_pct, 1.0);
  EXPECT_EQ(as_written.interpolation, "bilinear");
  Pretrained deit =
      load_pretrained(edited(tmp, "deit", "libraries/hf_deit", "preprocessor_config.json", [](json& p) {
        p = {{"image_processor_type", "DeiTImageProcessor"}};
      }));
  const ViTConfig& c = deit.model->config();
  EXPECT_EQ(c.crop_mode, "squash");
  EXPECT_NEAR(c.crop_pct, 224.0 / 256.0, 1e-12);
  EXPECT_EQ(c.interpolation, "bicubic");
  EXPECT_EQ(c.mean, (std::vector<float>{0.5f, 0.5f, 0.5f}));
  // Asked not to crop: not cropped.
  Pretrained plain =
      load_pretrained(edited(tmp, "nocrop", "libraries/hf_deit", "preprocessor_config.json", [](json& p) {
        p = {{"image_processor_type", "DeiTImageProcessor"}, {"do_center_crop", false}};
      }));
  EXPECT_EQ(plain.model->config().crop_pct, 1.0);
}

TEST(HfConfig, Id2labelNamesEachClassOnceByItsIndex) {
  test::TempDir tmp("hfid");
  struct Case {
    json labels;
    const char* expect;
  };
  const std::vector<Case> cases = {
      {{{"0", "a"}, {"1x", "b"}, {"2", "c"}}, "id2label key '1x' is not an integer"},
      {{{"0", "a"}, {"1.5", "b"}, {"2", "c"}}, "id2label key '1.5' is not an integer"},
      {{{"0", "a"}, {"-1", "b"}, {"2", "c"}}, "id2label key -1 is not a class: the classifier has 3 rows"},
      {{{"0", "a"}, {"1", "b"}}, "id2label names 2 classes; the classifier has 3 rows"},
      {{{"0", "a"}, {"1", "b"}, {"01", "c"}}, "id2label has class 1 twice"},
      {{{"0", "a"}, {"1", 7}, {"2", "c"}}, "id2label[1] must be a string"},
  };
  int i = 0;
  for (const Case& k : cases) {
    const std::string msg = load_error(
        edited(tmp, std::to_string(i++), "hf", "config.json", [&](json& j) { j["id2label"] = k.labels; }));
    EXPECT_NE(msg.find(k.expect), std::string::npos) << k.labels.dump() << ": " << msg;
  }
}

TEST(HfConfig, AFieldOfAnotherTypeIsAnErrorNamingIt) {
  test::TempDir tmp("hftype");
  struct Case {
    const char* file;
    const char* key;
    json value;
    const char* expect;
  };
  const std::vector<Case> cases = {
      {"config.json", "layer_norm_eps", "1e-12", "config.json layer_norm_eps must be a number"},
      {"config.json", "qkv_bias", "yes", "config.json qkv_bias must be true or false"},
      {"config.json", "model_type", 3, "config.json model_type must be a string"},
      {"preprocessor_config.json", "do_normalize", 1,
       "preprocessor_config.json do_normalize must be true or false"},
      {"preprocessor_config.json", "rescale_factor", "1/255",
       "preprocessor_config.json rescale_factor must be a number"},
  };
  int i = 0;
  for (const Case& k : cases) {
    const std::string msg =
        load_error(edited(tmp, std::to_string(i++), "hf", k.file, [&](json& j) { j[k.key] = k.value; }));
    EXPECT_NE(msg.find(k.expect), std::string::npos) << k.key << ": " << msg;
  }
}

// transformers' other image classifiers (Dinov2ForImageClassification: dinov2.embeddings.*,
// BeitForImageClassification: beit.*) are named by their model_type, not read as timm files.
TEST(HfConfig, OtherTransformersModelsAreNamedByTheirModelType) {
  test::TempDir tmp("hfother");
  for (const std::string type : {"dinov2", "beit"}) {
    const std::string dir = tmp / type;
    test::rewrite(fixture("hf"), dir, {}, {}, "vit.", type + ".");
    json j = json::parse(read_text_file(dir + "/config.json"));
    j["model_type"] = type;
    write_file_atomic(dir + "/config.json", j.dump());
    const std::string msg = load_error(dir);
    EXPECT_NE(msg.find("model_type '" + type + "' is not read"), std::string::npos) << msg;
  }
}

TEST(HfConfig, AClassifierTheConfigNamesButTheFileLacksLoadsHeadlessWithANote) {
  test::TempDir tmp("hfnohead");
  test::rewrite(fixture("hf"), tmp / "m", {"classifier.weight", "classifier.bias"}, {});
  Pretrained p = load_pretrained(tmp / "m");
  EXPECT_EQ(p.model->config().num_classes, 0);
  bool noted = false;
  for (const std::string& n : p.notes)
    noted |= n.find("config.json names ViTForImageClassification, but the file has no classifier") !=
             std::string::npos;
  EXPECT_TRUE(noted) << testing::PrintToString(p.notes);
}

}  // namespace
}  // namespace vit
