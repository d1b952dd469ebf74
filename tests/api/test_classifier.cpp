// vit::Classifier and vit::top_k (include/vit/classifier.h): the three kinds of image input
// give the same logits as the library's own preprocessing and forward pass, batches equal
// single images, top-k is softmax order, and bad input is a vit::Error naming it.
#include <gtest/gtest.h>
#include <omp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/file.h"
#include "data/image.h"
#include "data/open.h"
#include "data/preprocess.h"
#include "io/checkpoint.h"
#include "io/pretrained.h"
#include "ops/ops.h"
#include "support/models.h"
#include "support/temp_dir.h"
#include "vit/classifier.h"

namespace {

const std::string kModel = std::string(VIT_FIXTURE_DIR) + "/pretrained/timm_a";  // 5 classes, 32 x 32 RGB
const std::string kImages = std::string(VIT_FIXTURE_DIR) + "/pretrained/images/";

// Bit equality, reporting the worst element.
void expect_same(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t worst = 0;
  double diff = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (std::abs(double(got[i]) - want[i]) > diff) diff = std::abs(double(got[i]) - want[i]), worst = i;
  EXPECT_EQ(diff, 0.0) << what << ": worst at " << worst << ": got " << got[worst] << ", want "
                       << want[worst];
}

TEST(TopK, SoftmaxOrderWithLabelsAndClamp) {
  const std::vector<float> z = {0.5f, 2.f, -1.f, 1.f};
  const auto top = vit::top_k(z.data(), 4, 3, {"a", "b", "c", "d"});
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].index, 1);
  EXPECT_EQ(top[1].index, 3);
  EXPECT_EQ(top[2].index, 0);
  EXPECT_EQ(top[0].label, "b");
  double sum = 0;
  for (float v : z) sum += std::exp(double(v) - 2.0);
  EXPECT_NEAR(top[0].probability, 1.0 / sum, 1e-15);  // double-precision softmax
  EXPECT_NEAR(top[1].probability, std::exp(-1.0) / sum, 1e-15);
  EXPECT_EQ(vit::top_k(z.data(), 4, 10).size(), 4u);         // k clamped to K
  EXPECT_TRUE(vit::top_k(z.data(), 4, 1)[0].label.empty());  // no names: no label
  EXPECT_THROW(vit::top_k(z.data(), 4, 0), vit::Error);
}

// Equal scores in class order whatever k (the first of them changed with k), NaN first.
TEST(TopK, TiesInClassOrderWhateverKAndNanFirst) {
  const std::vector<float> z(10, 1.f);
  for (int64_t k : {1, 5, 10}) {
    const auto top = vit::top_k(z.data(), 10, k);
    for (int64_t i = 0; i < k; ++i) EXPECT_EQ(top[size_t(i)].index, i) << "k " << k;
  }
  const std::vector<float> n = {1.f, 3.f, std::nanf(""), 3.f};
  const auto top = vit::top_k(n.data(), 4, 4);
  EXPECT_EQ(std::vector<int64_t>({top[0].index, top[1].index, top[2].index, top[3].index}),
            std::vector<int64_t>({2, 1, 3, 0}));
}

TEST(Classifier, MatchesTheLibrarysPreprocessingAndForward) {
  vit::Classifier c(kModel);
  EXPECT_EQ(c.num_classes(), 5);
  EXPECT_EQ(c.channels(), 3);
  EXPECT_EQ(c.format(), "timm");
  EXPECT_EQ(c.dtype(), "fp32");
  ASSERT_EQ(c.class_names().size(), 5u);
  EXPECT_EQ(c.classify(vit::ImageInput::file(kImages + "cat.jpg"), 1)[0].label,
            c.class_names()[size_t(c.classify(vit::ImageInput::file(kImages + "cat.jpg"), 1)[0].index)]);
  // The reference: what vit predict runs (load_pretrained, the eval transform, infer).
  vit::Pretrained p = vit::load_pretrained(kModel);
  p.model->pack_weights_if_faster(32);
  const vit::ViTConfig& cfg = p.model->config();
  std::vector<float> x(size_t(cfg.in_chans * cfg.img_h * cfg.img_w)), want(5);
  vit::load_image_input(kImages + "cat.jpg", vit::input_spec(cfg), x.data());
  p.model->infer(x.data(), 1, nullptr, want.data());
  expect_same(c.logits(vit::ImageInput::file(kImages + "cat.jpg")), want, "file");

  const std::vector<char> bytes = vit::read_file_bytes(kImages + "cat.jpg");
  expect_same(c.logits(vit::ImageInput::encoded(bytes.data(), bytes.size())), want, "encoded bytes");
  const vit::Image img = vit::read_image(kImages + "cat.jpg");
  expect_same(c.logits(vit::ImageInput::pixels(img.px.data(), img.w, img.h, img.c)), want, "pixels");

  std::vector<float> pre(x.size());
  c.preprocess(vit::ImageInput::file(kImages + "cat.jpg"), pre.data());
  expect_same(pre, x, "preprocess");
}

// dtype bf16 is `vit predict --dtype bf16`: the bf16 weights, the fp32 copies released.
TEST(Classifier, Bf16IsPredictsBf16) {
  if (!vit::ops::bf16_available()) GTEST_SKIP() << "no bf16 matrix product on this CPU";
  vit::ClassifierOptions o;
  o.dtype = "bf16";
  vit::Classifier c(kModel, o);
  EXPECT_EQ(c.dtype(), "bf16");
  vit::Pretrained p = vit::load_pretrained(kModel);
  p.model->set_infer_dtype("bf16", /*release_fp32=*/true);
  const vit::ViTConfig& cfg = p.model->config();
  std::vector<float> x(size_t(cfg.in_chans * cfg.img_h * cfg.img_w)), want(5);
  vit::load_image_input(kImages + "cat.jpg", vit::input_spec(cfg), x.data());
  p.model->infer(x.data(), 1, nullptr, want.data());
  expect_same(c.logits(vit::ImageInput::file(kImages + "cat.jpg")), want, "bf16");
  // bf16 rounds: the logits are not fp32's (a check that bf16 was used at all).
  const std::vector<float> fp32 = vit::Classifier(kModel).logits(vit::ImageInput::file(kImages + "cat.jpg"));
  EXPECT_NE(fp32, want);
}

// dtype int8 is `vit predict --dtype int8`; a vit quantize file runs in int8 by default, with
// the same logits (its int8 values quantize back to themselves).
TEST(Classifier, Int8IsPredictsInt8AndAQuantizedFileDefaultsToIt) {
  vit::ClassifierOptions o;
  o.dtype = "int8";
  vit::Classifier c(kModel, o);
  vit::Pretrained p = vit::load_pretrained(kModel);
  p.model->set_infer_dtype("int8", /*release_fp32=*/true);
  const vit::ViTConfig& cfg = p.model->config();
  std::vector<float> x(size_t(cfg.in_chans * cfg.img_h * cfg.img_w)), want(5);
  vit::load_image_input(kImages + "cat.jpg", vit::input_spec(cfg), x.data());
  p.model->infer(x.data(), 1, nullptr, want.data());
  expect_same(c.logits(vit::ImageInput::file(kImages + "cat.jpg")), want, "int8");
  const std::vector<float> fp32 = vit::Classifier(kModel).logits(vit::ImageInput::file(kImages + "cat.jpg"));
  EXPECT_NE(fp32, want) << "int8 rounds: not fp32's logits";
  vit::test::TempDir tmp("classifier_int8");
  vit::save_int8_checkpoint(tmp.str() + "/int8.safetensors", *vit::load_pretrained(kModel).model);
  vit::Classifier quantized(tmp.str() + "/int8.safetensors");
  EXPECT_EQ(quantized.dtype(), "int8");
  expect_same(quantized.logits(vit::ImageInput::file(kImages + "cat.jpg")), want,
              "a quantized file, default dtype");
}

TEST(Classifier, BatchEqualsSingleImagesAcrossBatchCuts) {
  vit::ClassifierOptions o;
  o.max_batch = 2;  // 5 images: batches of 2, 2, 1
  vit::Classifier c(kModel, o);
  std::vector<vit::ImageInput> in;
  for (const char* f : {"cat.jpg", "coffee.png", "cat_rgba.png", "astronaut_gray.png", "coffee_32.png"})
    in.push_back(vit::ImageInput::file(kImages + f));
  const std::vector<float> batch = c.logits(in);
  const auto tops = c.classify(in, 3);
  ASSERT_EQ(tops.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const std::vector<float> one = c.logits(in[i]);
    // Another batch size may sum in another order: float rounding apart, the same logits.
    for (int64_t k = 0; k < 5; ++k)
      EXPECT_NEAR(batch[i * 5 + size_t(k)], one[size_t(k)], 1e-5f) << "image " << i << " class " << k;
    const auto top = vit::top_k(batch.data() + i * 5, 5, 3);
    ASSERT_EQ(tops[i].size(), 3u);
    for (size_t j = 0; j < 3; ++j) EXPECT_EQ(tops[i][j].index, top[j].index) << "image " << i;
  }
}

TEST(Classifier, EmbeddingsAreTheModelsFeatures) {
  vit::Classifier c(kModel);
  vit::Pretrained p = vit::load_pretrained(kModel);
  p.model->pack_weights_if_faster(32);
  const vit::ViTConfig& cfg = p.model->config();
  const int64_t D = c.embed_dim(), T = c.num_tokens();
  ASSERT_EQ(D, cfg.embed_dim);
  ASSERT_EQ(T, cfg.num_tokens());
  std::vector<float> x(size_t(cfg.in_chans * cfg.img_h * cfg.img_w)), pooled(static_cast<size_t>(D)),
      tokens(size_t(T * D));
  vit::load_image_input(kImages + "coffee.png", vit::input_spec(cfg), x.data());
  // Each asked for alone: with tokens wanted, the last block runs on every token instead of
  // the class token's row (the class-token tail), which rounds the pooled vector differently.
  p.model->infer_features(x.data(), 1, nullptr, pooled.data(), nullptr);
  p.model->infer_features(x.data(), 1, nullptr, nullptr, tokens.data());
  const auto coffee = vit::ImageInput::file(kImages + "coffee.png");
  expect_same(c.embed(coffee), pooled, "embed");
  expect_same(c.token_features(coffee), tokens, "token_features");
  // Both at once for a batch: the tokens as asked for alone, the pooled vectors within float
  // rounding of embed()'s (the full last block against the tail).
  const std::vector<vit::ImageInput> two = {coffee, vit::ImageInput::file(kImages + "cat.jpg")};
  std::vector<float> p2(size_t(2 * D)), t2(size_t(2 * T * D));
  c.features(two, p2.data(), t2.data());
  expect_same(t2, c.token_features(two), "features' tokens");
  const std::vector<float> e2 = c.embed(two);
  double worst = 0;
  for (size_t i = 0; i < e2.size(); ++i) worst = std::max(worst, std::abs(double(p2[i]) - e2[i]));
  EXPECT_LE(worst, 1e-5) << "features' pooled against embed(): worst difference " << worst;
}

TEST(Classifier, AHeadlessCheckpointGivesEmbeddingsAndSaysWhyNotClasses) {
  vit::ViTConfig cfg = vit::test::with_channels(vit::test::tiny_vit(), 3);  // an RGB model, for images
  cfg.num_classes = 0;
  vit::ViT m(cfg);
  vit::test::TempDir tmp("headless_api");
  vit::export_timm(m, tmp.str());
  vit::Classifier c(tmp.str());
  EXPECT_EQ(c.num_classes(), 0);
  EXPECT_EQ(c.embed(vit::ImageInput::file(kImages + "cat.jpg")).size(), size_t(cfg.embed_dim));
  try {
    c.classify(vit::ImageInput::file(kImages + "cat.jpg"));
    ADD_FAILURE() << "classify on a model without a head did not throw";
  } catch (const vit::Error& e) {
    EXPECT_NE(std::string(e.what()).find("no classifier head"), std::string::npos) << e.what();
  }
}

// A Hugging Face directory (ViTForImageClassification) opens with its own preprocessing
// (preprocessor_config.json) and gives vit predict's logits.
TEST(Classifier, OpensAHuggingFaceDirectory) {
  const std::string hf = std::string(VIT_FIXTURE_DIR) + "/pretrained/hf";
  vit::Classifier c(hf);
  EXPECT_EQ(c.format(), "hf");
  vit::Pretrained p = vit::load_pretrained(hf);
  p.model->pack_weights_if_faster(32);
  const vit::ViTConfig& cfg = p.model->config();
  const int64_t K = cfg.num_classes;
  std::vector<float> x(size_t(cfg.in_chans * cfg.img_h * cfg.img_w)), want(static_cast<size_t>(K));
  vit::load_image_input(kImages + "astronaut_gray.png", vit::input_spec(cfg), x.data());
  p.model->infer(x.data(), 1, nullptr, want.data());
  expect_same(c.logits(vit::ImageInput::file(kImages + "astronaut_gray.png")), want, "hf");
}

// Replicas (Classifier::replica) share the weights and run at the same time as their
// Classifier and each other: every call gives the logits of the Classifier alone, bit for
// bit, in fp32, bf16 and int8 (one thread each: the same summation order), with batch sizes
// that change between calls (bf16 makes a oneDNN primitive per size while others run). A
// replica outlives the Classifier it came from.
TEST(Classifier, ReplicasRunAtTheSameTimeWithTheClassifiersLogits) {
  std::vector<std::string> dtypes = {"fp32", "int8"};
  if (vit::ops::bf16_available()) dtypes.push_back("bf16");
  for (const std::string& dtype : dtypes) {
    vit::ClassifierOptions o;
    o.dtype = dtype;
    o.threads = 1;
    auto c = std::make_unique<vit::Classifier>(kModel, o);
    const int64_t per = c->channels() * c->height() * c->width(), K = c->num_classes(), most = 4;
    std::vector<float> x(size_t(most * per));
    const char* files[] = {"cat.jpg", "coffee.png", "cat_rgba.png", "astronaut_gray.png"};
    for (int64_t i = 0; i < most; ++i)
      c->preprocess(vit::ImageInput::file(kImages + files[i]), x.data() + i * per);
    std::vector<std::vector<float>> want(size_t(most + 1));  // want[n]: the first n images' logits
    for (int64_t n = 1; n <= most; ++n) {
      want[size_t(n)].resize(size_t(n * K));
      c->logits(x.data(), n, want[size_t(n)].data());
    }
    std::vector<vit::Classifier> replicas;
    for (int i = 0; i < 2; ++i) replicas.push_back(c->replica(1));
    std::vector<vit::Classifier*> all = {c.get(), &replicas[0], &replicas[1]};
    std::vector<std::string> wrong(all.size());
    std::vector<std::thread> threads;
    for (size_t t = 0; t < all.size(); ++t)
      threads.emplace_back([&, t] {
        std::vector<float> out(size_t(most * K));
        for (int i = 0; i < 40 && wrong[t].empty(); ++i) {
          const int64_t n = 1 + (i + int64_t(t)) % most;
          const std::string call = "call " + std::to_string(i) + ", " + std::to_string(n) + " images";
          try {
            all[t]->logits(x.data(), n, out.data());
            if (!std::equal(out.begin(), out.begin() + n * K, want[size_t(n)].begin())) wrong[t] = call;
          } catch (const std::exception& e) {
            wrong[t] = call + ": " + e.what();
          }
        }
      });
    for (std::thread& t : threads) t.join();
    for (size_t t = 0; t < all.size(); ++t) EXPECT_EQ(wrong[t], "") << dtype << ", model " << t;
    c.reset();  // the replicas keep the weights
    std::vector<float> out(size_t(most * K));
    replicas[1].logits(x.data(), most, out.data());
    expect_same(out, want[size_t(most)], (dtype + ", a replica after its Classifier").c_str());
    EXPECT_EQ(replicas[0].class_names().size(), 5u);
  }
}

// A prefork server: the model loaded and run, then fork(). In the child, the calls ran on the
// thread whose OpenMP threads fork() left behind, and waited for them forever; now they run
// on a helper thread (core/threads.h). The child has 60 s (SIGALRM) and exits 0 when its
// logits are the parent's, on two threads and on the model's own count.
TEST(Classifier, AForkedChildGivesTheParentsLogits) {
  vit::ClassifierOptions two;
  two.threads = 2;
  vit::Classifier c(kModel, two);
  const std::vector<vit::ImageInput> in{vit::ImageInput::file(kImages + "cat.jpg"),
                                        vit::ImageInput::file(kImages + "coffee.png")};
  const std::vector<float> want = c.logits(in);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    alarm(60);
    const bool same = c.logits(in) == want;
    vit::Classifier loaded(kModel, two);  // loading in the child too
    _exit(same && loaded.logits(in) == want ? 0 : 3);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "the child ended by signal "
                                 << (WIFSIGNALED(status) ? WTERMSIG(status) : 0)
                                 << " (14, SIGALRM: it waited 60 s)";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "3: other logits than the parent's";
}

TEST(Classifier, BadInputIsAnErrorThatNamesIt) {
  auto message = [](auto&& f) {
    try {
      f();
    } catch (const vit::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([] { vit::Classifier("/nonexistent/model"); }).find("/nonexistent/model"),
            std::string::npos);
  vit::ClassifierOptions bad;
  bad.dtype = "fp16";
  EXPECT_NE(message([&] { vit::Classifier(kModel, bad); }).find("fp16"), std::string::npos);
  vit::Classifier c(kModel);
  EXPECT_NE(message([&] { c.classify(vit::ImageInput::file("/nonexistent.png")); }).find("/nonexistent.png"),
            std::string::npos);
  const char junk[] = "not an image at all";
  EXPECT_NE(
      message([&] { c.classify(vit::ImageInput::encoded(junk, sizeof junk)); }).find("not a PNG or JPEG"),
      std::string::npos);
  const uint8_t px[8] = {};
  EXPECT_NE(message([&] { c.classify(vit::ImageInput::pixels(px, 2, 2, 2)); }).find("channels"),
            std::string::npos);
  EXPECT_NE(message([&] { c.classify(vit::ImageInput::pixels(px, 2, 2, 1), 0); }).find("k must be positive"),
            std::string::npos);
  EXPECT_NE(message([&] { c.logits(std::vector<vit::ImageInput>{}); }).find("no images"), std::string::npos);
  // Sizes whose byte count overflows are vit::Error too (a std::length_error escaped).
  EXPECT_NE(message([&] {
              c.classify(vit::ImageInput::pixels(px, int64_t(1) << 62, 4, 1));
            }).find("pixels: 4 x 4611686018427387904 x 1 bytes is more than memory can hold"),
            std::string::npos);
  for (int threads : {-1, 4097}) {
    vit::ClassifierOptions o;
    o.threads = threads;
    EXPECT_NE(message([&] { vit::Classifier(kModel, o); }).find("threads must be 0 (the process's) to 4096"),
              std::string::npos)
        << threads;
    EXPECT_NE(message([&] { c.replica(threads); }).find("threads must be 0 (the process's) to 4096"),
              std::string::npos)
        << threads;
  }
  EXPECT_NE(message([] { vit::Classifier::set_threads(4097); }).find("4096"), std::string::npos);
  // The library names no flag of the vit program.
  if (!vit::ops::bf16_available()) {
    vit::ClassifierOptions o;
    o.dtype = "bf16";
    EXPECT_EQ(message([&] { vit::Classifier(kModel, o); }).rfind("dtype bf16: ", 0), 0u);
  }
  // A moved-from Classifier throws rather than crashing.
  vit::Classifier moved = std::move(c);
  EXPECT_EQ(moved.num_classes(), 5);
  EXPECT_NE(message([&] {
              (void)c.num_classes();
            }).find("used after it was moved from"),  // NOLINT(bugprone-use-after-move)
            std::string::npos);
  c = std::move(moved);
  EXPECT_EQ(c.num_classes(), 5);
}

// set_threads is the process's: a call on another thread runs on its count, whatever that
// thread's OpenMP setting (omp_set_num_threads is per thread: it reached the calling thread
// alone), and set_threads(0) gives the calling thread's setting back. Counted as the OpenMP
// threads a call on a fresh thread starts.
TEST(Classifier, SetThreadsReachesCallsOnEveryThread) {
  vit::Classifier c(kModel);
  auto tasks = [] {
    return std::distance(std::filesystem::directory_iterator("/proc/self/task"),
                         std::filesystem::directory_iterator());
  };
  vit::Classifier::set_threads(1);
  std::ptrdiff_t before = 0, after_one = 0, after_default = 0;
  std::thread([&] {
    omp_set_num_threads(3);  // this thread's own setting
    before = tasks();
    c.logits(vit::ImageInput::file(kImages + "cat.jpg"));
    after_one = tasks();
    vit::Classifier::set_threads(0);
    c.logits(vit::ImageInput::file(kImages + "cat.jpg"));
    after_default = tasks();
  }).join();
  EXPECT_EQ(after_one, before) << "set_threads(1) on another thread: the call started OpenMP threads";
  EXPECT_EQ(after_default, before + 2) << "set_threads(0): the thread's own 3";
}

}  // namespace
