// vit export's three formats end to end: a Hugging Face model exported to HF again and to
// timm predicts as the original does; ONNX export reports its checked file; what a format
// cannot hold is a one-line error with a non-zero exit.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "core/file.h"
#include "io/checkpoint.h"
#include "model/vit.h"
#include "support/run_vit.h"
#include "support/temp_dir.h"

namespace {
namespace fs = std::filesystem;
using vit::test::Result;
using vit::test::run;

std::string fixture(const std::string& name) {
  return std::string(VIT_FIXTURE_DIR) + "/pretrained/" + name;
}

// vit predict's top 3 on the cat, as printed.
std::string predict(const std::string& checkpoint) {
  const Result r =
      run("predict --checkpoint " + checkpoint + " --topk 3 --threads 1 " + fixture("images/cat.jpg"));
  EXPECT_EQ(r.code, 0) << r.out;
  return r.out;
}

TEST(CliExport, HfAndTimmExportsPredictAsTheOriginal) {
  vit::test::TempDir tmp("cliexp");
  const std::string want = predict(fixture("hf"));
  Result r = run("export --format hf --checkpoint " + fixture("hf") + " --out " + (tmp / "hf"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("preprocessor_config.json"), std::string::npos) << r.out;
  EXPECT_EQ(predict(tmp / "hf"), want);
  r = run("export --checkpoint " + (tmp / "hf") + " --out " + (tmp / "timm"));  // timm: the default
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(fs::exists(tmp / "timm/config.json"));
  EXPECT_NE(want.find("tabby"), std::string::npos) << want;  // the class names came along
  // Floats as they were written, not float's nearest printed as a double (9.99999997e-07).
  const std::string hf = vit::read_text_file(tmp / "hf/config.json");
  EXPECT_NE(hf.find("\"layer_norm_eps\": 1e-12,"), std::string::npos) << hf;
  const std::string timm = vit::read_text_file(tmp / "timm/config.json");
  EXPECT_EQ(timm.find("0000000"), std::string::npos) << timm;
  EXPECT_EQ(timm.find("9999999"), std::string::npos) << timm;
}

TEST(CliExport, OnnxWritesACheckedFile) {
  vit::test::TempDir tmp("cliox");
  const Result r = run("export --format onnx --checkpoint " + fixture("hf") + " --out " + (tmp / "m.onnx"));
#ifdef VIT_NO_ONNX
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("-DVIT_ONNX=OFF"), std::string::npos) << r.out;
#else
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("opset 17"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("checked by ONNX's checker"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("logits [N,3]"), std::string::npos) << r.out;
  EXPECT_GT(fs::file_size(tmp / "m.onnx"), 4u * 32 * 32 * 8) << "the weights are in the file";
#endif
}

TEST(CliExport, WhatAFormatCannotHoldIsAOneLineError) {
  vit::test::TempDir tmp("clixno");
  vit::ViTConfig c = vit::preset("mnist-seed");
  c.global_pool = "avg";
  vit::ViT m(c);
  vit::save_checkpoint(tmp / "avg.safetensors", m, {});
  Result r = run("export --format hf --checkpoint " + (tmp / "avg.safetensors") + " --out " + (tmp / "hf"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("Hugging Face's ViT cannot express average pooling"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(tmp / "hf"));
  // A write that fails (past a file-size limit, as a full disk) takes the folder the export
  // made with it (it stayed, empty).
  vit::save_checkpoint(tmp / "small.safetensors", vit::ViT(vit::preset("mnist-small")), {});
  r = vit::test::run_vit("export --checkpoint " + (tmp / "small.safetensors") + " --out " + (tmp / "timm"),
                         "ulimit -f 30;");
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("File too large"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(tmp / "timm"));
#ifndef VIT_NO_ONNX
  // ONNX's file is streamed: the write's error is said (it ended the program in protobuf's
  // stream's destructor), and no temporary is left.
  r = vit::test::run_vit(
      "export --format onnx --checkpoint " + (tmp / "small.safetensors") + " --out " + (tmp / "small.onnx"),
      "ulimit -f 30;");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find(tmp / "small.onnx" + ": write failed (File too large)"), std::string::npos) << r.out;
  for (const auto& e : fs::directory_iterator(tmp.str()))
    EXPECT_EQ(e.path().filename().string().find("small.onnx"), std::string::npos) << e.path();
#endif
  r = run("export --format keras --checkpoint " + (tmp / "avg.safetensors") + " --out " + (tmp / "k"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("keras"), std::string::npos) << r.out;
}

// The file written is never the one read: ONNX onto the checkpoint, timm onto its own
// directory and vit quantize onto its input are refused, the weights untouched; an --out
// that names no file is refused before any folder is made.
TEST(CliExport, AnOutputThatIsTheInputIsRefused) {
  vit::test::TempDir tmp("clixself");
  vit::ViT m(vit::preset("mnist-seed"));
  const std::string ck = tmp / "best.safetensors";
  vit::save_checkpoint(ck, m, {});
  const std::string before = vit::read_text_file(ck);
  for (const std::string& cmd : {"export --format onnx --checkpoint " + ck + " --out " + ck,
                                 "quantize --checkpoint " + ck + " --out " + ck}) {
    const Result r = run(cmd);
    EXPECT_NE(r.code, 0) << cmd;
    EXPECT_NE(r.out.find("--out " + ck + ": the command reads that file"), std::string::npos) << r.out;
  }
  EXPECT_EQ(vit::read_text_file(ck), before);
  Result r = run("export --checkpoint " + ck + " --out " + (tmp / "timm"));
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string timm = vit::read_text_file(tmp / "timm/model.safetensors");
  r = run("export --checkpoint " + (tmp / "timm") + " --out " + (tmp / "timm"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("the command reads that file"), std::string::npos) << r.out;
  EXPECT_EQ(vit::read_text_file(tmp / "timm/model.safetensors"), timm);
  vit::write_file_atomic(tmp / "timm/args.json", "{}");  // as a training run's directory
  r = run("export --checkpoint " + ck + " --out " + (tmp / "timm"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("a training run's directory (args.json)"), std::string::npos) << r.out;
  r = run("export --format onnx --checkpoint " + ck + " --out " + (tmp / "new/"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("a directory name; --format onnx writes one file"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(tmp / "new"));
  r = run("export --format onnx --checkpoint " + ck + " --out ''");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--out: empty"), std::string::npos) << r.out;
}

}  // namespace

// A head wider than the data's classes (the 10 of mnist-seed on 4 folders) is exported with a
// name for every class: the 4 names alone were dropped when the export was read (a list of the
// wrong length), the folders then numbered in timm's order (a1 b2 B3 b10, not B3 a1 b10 b2),
// and vit eval of the export scored other labels than the run's.
TEST(CliExport, AWiderHeadThanTheDataKeepsItsClassesInTheExport) {
  vit::test::TempDir tmp("cliexp_wide");
  for (const char* split : {"train", "val"})
    for (const char* cls : {"a1", "b2", "B3", "b10"}) {
      const std::string folder = tmp / ("data/" + std::string(split) + "/" + cls);
      fs::create_directories(folder);
      fs::copy_file(std::string(VIT_FIXTURE_DIR) + "/digit_7.png", folder + "/x.png");
    }
  Result r = run("train --model mnist-seed --pos-embed learn --data-dir " + (tmp / "data") +
                 " --epochs 1 -b 4 --threads 1 --output " + (tmp / "run"));
  ASSERT_EQ(r.code, 0) << r.out;
  auto predictions = [&](const std::string& checkpoint, const std::string& name) {
    const Result e = run("eval --checkpoint " + checkpoint + " --data-dir " + (tmp / "data") +
                         " --threads 1 --predictions " + (tmp / name));
    EXPECT_EQ(e.code, 0) << e.out;
    return vit::read_text_file(tmp / name);
  };
  const std::string want = predictions(tmp / "run", "run.csv");
  EXPECT_NE(want.find(",B3,"), std::string::npos) << want;
  for (const char* format : {"timm", "hf"}) {
    r = run("export --format " + std::string(format) + " --checkpoint " + (tmp / "run") + " --out " +
            (tmp / format));
    ASSERT_EQ(r.code, 0) << format << ": " << r.out;
    EXPECT_EQ(predictions(tmp / format, std::string(format) + ".csv"), want) << format;
  }
}
