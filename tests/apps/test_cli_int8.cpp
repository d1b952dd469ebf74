// vit quantize and --dtype int8 from the command line: the int8 file is smaller, says what it
// is, and predicts (int8 by default) what the fp32 file predicts with --dtype int8, to the
// printed digit; vit bench runs int8 inference and refuses int8 training with the reason.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "io/safetensors.h"
#include "support/run_vit.h"
#include "support/temp_dir.h"

namespace {
namespace fs = std::filesystem;
using vit::test::Result;
using vit::test::run;

TEST(CliInt8, QuantizeWritesAFileThatPredictsAsDtypeInt8) {
  vit::test::TempDir tmp("cli_int8");
  const std::string dir = tmp.str() + "/run", q = tmp.str() + "/int8.safetensors";
  Result t = run("train --model mnist-seed --synthetic 256 --epochs 1 -b 64 --threads 1 --output " + dir);
  ASSERT_EQ(t.code, 0) << t.out;
  Result r = run("quantize --checkpoint " + dir + " --out " + q);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("in int8 per output channel"), std::string::npos) << r.out;
  EXPECT_LT(fs::file_size(q), fs::file_size(dir + "/best.safetensors"));
  EXPECT_TRUE(vit::read_safetensors_metadata(q).count("quantization"));
  const std::string image = std::string(VIT_FIXTURE_DIR) + "/digit_7.png";
  Result from_fp32 = run("predict --json --logits --checkpoint " + dir + " --dtype int8 " + image);
  Result from_int8 = run("predict --json --logits --checkpoint " + q + " " + image);
  ASSERT_EQ(from_fp32.code, 0) << from_fp32.out;
  ASSERT_EQ(from_int8.code, 0) << from_int8.out;
  const auto json_line = [](const std::string& out) { return out.substr(out.rfind("{\"")); };
  EXPECT_EQ(json_line(from_int8.out), json_line(from_fp32.out));
  EXPECT_NE(from_int8.out.find("int8 checkpoint (vit quantize)"), std::string::npos) << from_int8.out;
  Result fp32 = run("predict --checkpoint " + q + " --dtype fp32 " + image);
  EXPECT_EQ(fp32.code, 0) << fp32.out;
  // vit eval says which precision ran (an fp32 and an int8 evaluation read the same).
  for (const char* c : {"/imgs/val/0", "/imgs/val/7"}) {
    fs::create_directories(tmp.str() + c);
    fs::copy_file(image, tmp.str() + c + "/a.png");
  }
  Result eval = run("eval --json --checkpoint " + q + " --data-dir " + tmp.str() + "/imgs");
  ASSERT_EQ(eval.code, 0) << eval.out;
  EXPECT_NE(eval.out.find("\"dtype\":\"int8\""), std::string::npos) << eval.out;
  eval = run("eval --checkpoint " + q + " --data-dir " + tmp.str() + "/imgs");
  EXPECT_NE(eval.out.find("(2 images, int8 products)"), std::string::npos) << eval.out;
  // Its ONNX export is int8 too, as every command runs it (it was fp32); --dtype fp32 says not.
  Result onnx = run("export --format onnx --checkpoint " + q + " --out " + tmp.str() + "/q.onnx");
  ASSERT_EQ(onnx.code, 0) << onnx.out;
  EXPECT_NE(onnx.out.find("(int8, "), std::string::npos) << onnx.out;
  onnx = run("export --format onnx --dtype fp32 --checkpoint " + q + " --out " + tmp.str() + "/f.onnx");
  ASSERT_EQ(onnx.code, 0) << onnx.out;
  EXPECT_EQ(onnx.out.find("(int8, "), std::string::npos) << onnx.out;
  // Mix-ups named: an .onnx --out (it wrote safetensors under that name), and a checkpoint
  // given to --resume (it said "--resume .: not a run directory").
  Result mixed = run("quantize --checkpoint " + dir + " --out " + tmp.str() + "/q2.onnx");
  EXPECT_NE(mixed.code, 0);
  EXPECT_NE(mixed.out.find("vit export --format onnx --dtype int8"), std::string::npos) << mixed.out;
  EXPECT_FALSE(fs::exists(tmp.str() + "/q2.onnx"));
  mixed = run("train --resume " + q);
  EXPECT_NE(mixed.code, 0);
  EXPECT_NE(mixed.out.find("--resume " + q + ": not a run"), std::string::npos) << mixed.out;
  EXPECT_NE(mixed.out.find("--pretrained " + q), std::string::npos) << mixed.out;
}

TEST(CliInt8, BenchRunsInt8InferenceAndRefusesInt8Training) {
  Result r = run("bench --model mnist-seed -b 4 --threads 1 --dtype int8 --runs 2 --min-time 0 --warmup 0");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("int8"), std::string::npos) << r.out;
  Result t = run("bench --model mnist-seed -b 4 --threads 1 --dtype int8 --mode train");
  EXPECT_NE(t.code, 0);
  EXPECT_NE(t.out.find("int8 is for inference"), std::string::npos) << t.out;
}

}  // namespace
