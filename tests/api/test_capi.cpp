// The C API (include/vitcpp.h): the same numbers as vit::Classifier, status codes and a
// per-thread message for every failure, and nothing thrown across it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "core/check.h"
#include "core/file.h"
#include "core/threads.h"
#include "vit/classifier.h"
#include "vitcpp.h"

namespace {

const std::string kModel = std::string(VIT_FIXTURE_DIR) + "/pretrained/timm_a";
const std::string kImage = std::string(VIT_FIXTURE_DIR) + "/pretrained/images/coffee.png";

TEST(CApi, ClassifyAndLogitsMatchTheCppApi) {
  vitcpp_model* m = nullptr;
  ASSERT_EQ(vitcpp_open(kModel.c_str(), nullptr, &m), VITCPP_OK) << vitcpp_last_error();
  EXPECT_EQ(vitcpp_num_classes(m), 5);
  int64_t c = 0, h = 0, w = 0;
  vitcpp_input_size(m, &c, &h, &w);
  EXPECT_EQ(c * h * w, 3 * 32 * 32);
  EXPECT_STREQ(vitcpp_version(), vit::version());

  vit::Classifier ref(kModel);
  const auto want = ref.classify(vit::ImageInput::file(kImage), 5);
  const std::vector<char> bytes = vit::read_file_bytes(kImage);
  vitcpp_image images[2] = {};
  images[0].kind = VITCPP_IMAGE_FILE;
  images[0].path = kImage.c_str();
  images[1].kind = VITCPP_IMAGE_ENCODED;
  images[1].data = bytes.data();
  images[1].size = bytes.size();
  vitcpp_prediction top[2 * 7];
  ASSERT_EQ(vitcpp_classify(m, images, 2, 7, top), VITCPP_OK) << vitcpp_last_error();
  for (int i = 0; i < 2; ++i) {
    for (size_t j = 0; j < 5; ++j) {
      EXPECT_EQ(top[i * 7 + int(j)].index, want[j].index) << "image " << i << " rank " << j;
      EXPECT_NEAR(top[i * 7 + int(j)].probability, want[j].probability, 1e-6)
          << "image " << i << " rank " << j;
      EXPECT_STREQ(top[i * 7 + int(j)].label, want[j].label.c_str());
    }
    EXPECT_EQ(top[i * 7 + 5].index, -1);  // k = 7 > 5 classes: the rest are marked
    EXPECT_EQ(top[i * 7 + 6].index, -1);
  }
  float logits[5];
  ASSERT_EQ(vitcpp_logits(m, images, 1, logits), VITCPP_OK) << vitcpp_last_error();
  const std::vector<float> z = ref.logits(vit::ImageInput::file(kImage));
  for (int k = 0; k < 5; ++k) EXPECT_EQ(logits[k], z[size_t(k)]) << "class " << k;
  const int64_t D = vitcpp_embed_dim(m), T = vitcpp_num_tokens(m);
  std::vector<float> pooled(static_cast<size_t>(D)), tokens(size_t(T * D));
  ASSERT_EQ(vitcpp_embed(m, images, 1, pooled.data(), tokens.data()), VITCPP_OK) << vitcpp_last_error();
  std::vector<float> want_pooled(pooled.size()), want_tokens(tokens.size());
  ref.features({vit::ImageInput::file(kImage)}, want_pooled.data(), want_tokens.data());
  EXPECT_EQ(pooled, want_pooled);
  EXPECT_EQ(tokens, want_tokens);
  EXPECT_EQ(vitcpp_embed(m, images, 1, nullptr, nullptr), VITCPP_INVALID_ARGUMENT);
  vitcpp_close(m);
  vitcpp_close(nullptr);
}

// A tensor already preprocessed (API version 4; C had images alone, C++ the tensor too): the
// image's logits and embeddings from its preprocessed input, two rows at once.
TEST(CApi, LogitsAndEmbeddingsOfAPreprocessedTensor) {
  vitcpp_model* m = nullptr;
  ASSERT_EQ(vitcpp_open(kModel.c_str(), nullptr, &m), VITCPP_OK) << vitcpp_last_error();
  int64_t c = 0, h = 0, w = 0;
  vitcpp_input_size(m, &c, &h, &w);
  const size_t per = size_t(c * h * w), K = size_t(vitcpp_num_classes(m)), D = size_t(vitcpp_embed_dim(m)),
               T = size_t(vitcpp_num_tokens(m));
  vitcpp_image image = {};
  image.kind = VITCPP_IMAGE_FILE;
  image.path = kImage.c_str();
  std::vector<float> x(2 * per);
  ASSERT_EQ(vitcpp_preprocess(m, &image, x.data()), VITCPP_OK) << vitcpp_last_error();
  std::copy(x.begin(), x.begin() + std::ptrdiff_t(per), x.begin() + std::ptrdiff_t(per));
  std::vector<float> want(K), got(2 * K);
  ASSERT_EQ(vitcpp_logits(m, &image, 1, want.data()), VITCPP_OK) << vitcpp_last_error();
  ASSERT_EQ(vitcpp_logits_tensor(m, x.data(), 2, got.data()), VITCPP_OK) << vitcpp_last_error();
  for (size_t k = 0; k < 2 * K; ++k) EXPECT_EQ(got[k], want[k % K]) << "row " << k / K << " class " << k % K;
  std::vector<float> want_pooled(D), pooled(2 * D), tokens(2 * T * D);
  ASSERT_EQ(vitcpp_embed(m, &image, 1, want_pooled.data(), nullptr), VITCPP_OK) << vitcpp_last_error();
  ASSERT_EQ(vitcpp_embed_tensor(m, x.data(), 2, pooled.data(), nullptr), VITCPP_OK) << vitcpp_last_error();
  for (size_t d = 0; d < 2 * D; ++d) EXPECT_EQ(pooled[d], want_pooled[d % D]) << "row " << d / D;
  ASSERT_EQ(vitcpp_embed_tensor(m, x.data(), 2, nullptr, tokens.data()), VITCPP_OK) << vitcpp_last_error();
  EXPECT_TRUE(std::equal(tokens.begin(), tokens.begin() + std::ptrdiff_t(T * D),
                         tokens.begin() + std::ptrdiff_t(T * D)));
  EXPECT_EQ(vitcpp_logits_tensor(m, nullptr, 1, got.data()), VITCPP_INVALID_ARGUMENT);
  EXPECT_EQ(vitcpp_logits_tensor(m, x.data(), 0, got.data()), VITCPP_INVALID_ARGUMENT);
  EXPECT_EQ(vitcpp_embed_tensor(m, x.data(), 1, nullptr, nullptr), VITCPP_INVALID_ARGUMENT);
  vitcpp_close(m);
  // C++: null pointers are errors (x null crashed in the patch embedding; out null returned
  // having written nothing).
  vit::Classifier ref(kModel);
  EXPECT_THROW(ref.logits(nullptr, 1, got.data()), vit::Error);
  EXPECT_THROW(ref.logits(x.data(), 1, nullptr), vit::Error);
  EXPECT_THROW(ref.features(x.data(), 1, nullptr, nullptr), vit::Error);
}

// Patch masks (API version 5; the C++ ViT alone took them, and its mask pointer has no size):
// a mask of ones is no mask, bit for bit; hiding patches of one image changes that image
// alone, in batches of any size (the mask follows its rows); a mask of another length or
// with other bytes than 0 and 1 is refused, saying why.
TEST(CApi, APatchMaskHidesPatchesOfItsImageAlone) {
  vitcpp_options o;
  vitcpp_options_init(&o);
  o.max_batch = 1;  // rows one at a time: the mask's offset per batch
  vitcpp_model *m = nullptr, *whole = nullptr;
  ASSERT_EQ(vitcpp_open_with_options(kModel.c_str(), &o, &m), VITCPP_OK) << vitcpp_last_error();
  ASSERT_EQ(vitcpp_open(kModel.c_str(), nullptr, &whole), VITCPP_OK) << vitcpp_last_error();
  int64_t c = 0, h = 0, w = 0;
  vitcpp_input_size(m, &c, &h, &w);
  const size_t per = size_t(c * h * w), N = size_t(vitcpp_num_patches(m)), T = size_t(vitcpp_num_tokens(m)),
               D = size_t(vitcpp_embed_dim(m)), K = size_t(vitcpp_num_classes(m));
  ASSERT_GT(N, 2u);
  EXPECT_EQ(vitcpp_num_patches(nullptr), 0);
  std::vector<float> x(3 * per);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float((i * 7919) % 255) / 127.f - 1.f;
  std::vector<uint8_t> ones(3 * N, 1), mask(3 * N, 1);
  for (size_t n = 0; n < N; n += 2) mask[N + n] = 0;  // image 1: every other patch hidden
  std::vector<float> plain(3 * T * D), seen(3 * T * D), hidden(3 * T * D), batched(3 * T * D);
  ASSERT_EQ(vitcpp_embed_tensor(m, x.data(), 3, nullptr, plain.data()), VITCPP_OK) << vitcpp_last_error();
  ASSERT_EQ(vitcpp_embed_tensor_masked(m, x.data(), 3, ones.data(), ones.size(), nullptr, seen.data()),
            VITCPP_OK)
      << vitcpp_last_error();
  EXPECT_EQ(seen, plain);
  ASSERT_EQ(vitcpp_embed_tensor_masked(m, x.data(), 3, mask.data(), mask.size(), nullptr, hidden.data()),
            VITCPP_OK)
      << vitcpp_last_error();
  ASSERT_EQ(vitcpp_embed_tensor_masked(whole, x.data(), 3, mask.data(), mask.size(), nullptr, batched.data()),
            VITCPP_OK)
      << vitcpp_last_error();
  const auto row = [&](const std::vector<float>& v, size_t i) {
    return std::vector<float>(v.begin() + std::ptrdiff_t(i * T * D),
                              v.begin() + std::ptrdiff_t((i + 1) * T * D));
  };
  EXPECT_EQ(row(hidden, 0), row(plain, 0));
  EXPECT_EQ(row(hidden, 2), row(plain, 2));
  EXPECT_NE(row(hidden, 1), row(plain, 1));
  for (size_t i = 0; i < 3; ++i) {  // one image per forward or three: the same within rounding
    const std::vector<float> a = row(hidden, i), b = row(batched, i);
    float worst = 0;
    for (size_t k = 0; k < a.size(); ++k) worst = std::max(worst, std::abs(a[k] - b[k]));
    EXPECT_LT(worst, 1e-4f) << "image " << i;
  }
  std::vector<float> logits(3 * K), want(3 * K);
  ASSERT_EQ(vitcpp_logits_tensor(m, x.data(), 3, want.data()), VITCPP_OK) << vitcpp_last_error();
  ASSERT_EQ(vitcpp_logits_tensor_masked(m, x.data(), 3, nullptr, 0, logits.data()), VITCPP_OK);
  EXPECT_EQ(logits, want);
  ASSERT_EQ(vitcpp_logits_tensor_masked(m, x.data(), 3, mask.data(), mask.size(), logits.data()), VITCPP_OK);
  EXPECT_TRUE(std::equal(logits.begin(), logits.begin() + std::ptrdiff_t(K), want.begin()));
  EXPECT_FALSE(std::equal(logits.begin() + std::ptrdiff_t(K), logits.begin() + std::ptrdiff_t(2 * K),
                          want.begin() + std::ptrdiff_t(K)));
  EXPECT_EQ(vitcpp_logits_tensor_masked(m, x.data(), 3, mask.data(), mask.size() - 1, logits.data()),
            VITCPP_INVALID_ARGUMENT);
  EXPECT_NE(std::string(vitcpp_last_error()).find("3 images of " + std::to_string(N) + " patches need"),
            std::string::npos)
      << vitcpp_last_error();
  mask[5] = 2;
  EXPECT_EQ(vitcpp_embed_tensor_masked(m, x.data(), 3, mask.data(), mask.size(), nullptr, hidden.data()),
            VITCPP_INVALID_ARGUMENT);
  EXPECT_NE(std::string(vitcpp_last_error()).find("mask: byte 5 is 2"), std::string::npos)
      << vitcpp_last_error();
  vitcpp_close(m);
  vitcpp_close(whole);
  // C++: the same checks.
  vit::Classifier ref(kModel);
  EXPECT_THROW(ref.features(x.data(), 3, mask.data(), mask.size() + 1, nullptr, hidden.data()),
               vit::ValueError);
  EXPECT_THROW(ref.logits(x.data(), 3, mask.data(), mask.size(), logits.data()), vit::ValueError);
}

TEST(CApi, FailuresReturnAStatusAndAMessagePerThread) {
  vitcpp_model* m = reinterpret_cast<vitcpp_model*>(1);
  EXPECT_EQ(vitcpp_open("/nonexistent/model", nullptr, &m), VITCPP_ERROR);
  EXPECT_EQ(m, nullptr);
  EXPECT_NE(std::string(vitcpp_last_error()).find("/nonexistent/model"), std::string::npos)
      << vitcpp_last_error();
  // Another thread's failure leaves this thread's message alone.
  std::thread([] {
    EXPECT_STREQ(vitcpp_last_error(), "");
    EXPECT_EQ(vitcpp_open(nullptr, nullptr, nullptr), VITCPP_INVALID_ARGUMENT);
  }).join();
  EXPECT_NE(std::string(vitcpp_last_error()).find("/nonexistent/model"), std::string::npos);
  EXPECT_EQ(vitcpp_open(kModel.c_str(), "fp16", &m), VITCPP_INVALID_ARGUMENT);
  EXPECT_NE(std::string(vitcpp_last_error()).find("fp16"), std::string::npos);

  ASSERT_EQ(vitcpp_open(kModel.c_str(), "fp32", &m), VITCPP_OK) << vitcpp_last_error();
  vitcpp_image bad = {};
  bad.kind = 7;
  vitcpp_prediction top[1];
  EXPECT_EQ(vitcpp_classify(m, &bad, 1, 1, top), VITCPP_INVALID_ARGUMENT);
  EXPECT_NE(std::string(vitcpp_last_error()).find("unknown kind 7"), std::string::npos)
      << vitcpp_last_error();
  bad.kind = VITCPP_IMAGE_FILE;
  bad.path = "/nonexistent.jpg";
  EXPECT_EQ(vitcpp_classify(m, &bad, 1, 1, top), VITCPP_ERROR);
  EXPECT_NE(std::string(vitcpp_last_error()).find("/nonexistent.jpg"), std::string::npos)
      << vitcpp_last_error();
  const uint8_t px[8] = {};
  bad.kind = VITCPP_IMAGE_PIXELS;
  bad.data = px;
  bad.width = bad.height = 2;
  bad.channels = 2;
  EXPECT_EQ(vitcpp_classify(m, &bad, 1, 1, top), VITCPP_ERROR);
  EXPECT_NE(std::string(vitcpp_last_error()).find("channels"), std::string::npos) << vitcpp_last_error();
  EXPECT_EQ(vitcpp_classify(m, &bad, 1, 0, top), VITCPP_INVALID_ARGUMENT);
  // PIXELS_SIZED takes size as the buffer's length: 2 x 2 x 3 pixels do not fit in 8 bytes.
  // PIXELS does not read it (API 3's programs leave the pixel count there, or an earlier
  // PNG's length).
  const uint8_t rgb[12] = {};
  bad.channels = 3;
  bad.data = rgb;
  bad.size = 4;
  EXPECT_EQ(vitcpp_classify(m, &bad, 1, 1, top), VITCPP_OK) << vitcpp_last_error();
  bad.kind = VITCPP_IMAGE_PIXELS_SIZED;
  EXPECT_EQ(vitcpp_classify(m, &bad, 1, 1, top), VITCPP_INVALID_ARGUMENT);
  EXPECT_NE(
      std::string(vitcpp_last_error()).find("VITCPP_IMAGE_PIXELS_SIZED of 2 x 2 x 3 bytes, but size is 4"),
      std::string::npos)
      << vitcpp_last_error();
  bad.size = sizeof rgb;
  EXPECT_EQ(vitcpp_classify(m, &bad, 1, 1, top), VITCPP_OK) << vitcpp_last_error();
  EXPECT_STREQ(vitcpp_class_name(m, 0), "apple");  // timm_a's config.json names its classes
  EXPECT_EQ(vitcpp_class_name(m, 5), nullptr);
  vitcpp_close(m);
}

}  // namespace

namespace {

// Logits of the coffee image through a model opened with `o`.
std::vector<float> logits_with(const vitcpp_options& o) {
  vitcpp_model* m = nullptr;
  EXPECT_EQ(vitcpp_open_with_options(kModel.c_str(), &o, &m), VITCPP_OK) << vitcpp_last_error();
  vitcpp_image image = {};
  image.kind = VITCPP_IMAGE_FILE;
  image.path = kImage.c_str();
  std::vector<float> out(size_t(vitcpp_num_classes(m)));
  EXPECT_EQ(vitcpp_logits(m, &image, 1, out.data()), VITCPP_OK) << vitcpp_last_error();
  vitcpp_close(m);
  return out;
}

}  // namespace

TEST(CApi, OptionsStructCarriesItsSizeAndRefusesOneItCannotRead) {
  EXPECT_EQ(vitcpp_api_version(), uint32_t(VITCPP_API_VERSION));
  vitcpp_options o;
  vitcpp_options_init(&o);
  EXPECT_EQ(o.struct_size, sizeof(vitcpp_options));
  EXPECT_EQ(o.dtype, nullptr);
  EXPECT_EQ(o.threads, 0);
  EXPECT_EQ(o.max_batch, 0);
  // NULL options: the defaults, the same logits as vitcpp_open.
  vitcpp_model* m = nullptr;
  ASSERT_EQ(vitcpp_open_with_options(kModel.c_str(), nullptr, &m), VITCPP_OK) << vitcpp_last_error();
  vitcpp_close(m);
  // A struct from a newer header (larger) or none filled in (0): refused, and said why.
  for (uint32_t size : {uint32_t(sizeof(vitcpp_options) + 8), uint32_t(0)}) {
    o.struct_size = size;
    m = nullptr;
    EXPECT_EQ(vitcpp_open_with_options(kModel.c_str(), &o, &m), VITCPP_INVALID_ARGUMENT) << size;
    EXPECT_EQ(m, nullptr);
    EXPECT_NE(std::string(vitcpp_last_error()).find("vitcpp_options_init"), std::string::npos)
        << vitcpp_last_error();
  }
  vitcpp_options_init(&o);
  o.dtype = "fp16";
  EXPECT_EQ(vitcpp_open_with_options(kModel.c_str(), &o, &m), VITCPP_INVALID_ARGUMENT);
  vitcpp_options_init(&o);
  o.threads = -1;
  EXPECT_EQ(vitcpp_open_with_options(kModel.c_str(), &o, &m), VITCPP_INVALID_ARGUMENT);
}

// A replica gives its model's logits and outlives it; bad arguments are refused.
TEST(CApi, AReplicaSharesTheModelAndOutlivesIt) {
  vitcpp_options o;
  vitcpp_options_init(&o);
  const std::vector<float> want = logits_with(o);
  vitcpp_model* m = nullptr;
  ASSERT_EQ(vitcpp_open_with_options(kModel.c_str(), &o, &m), VITCPP_OK) << vitcpp_last_error();
  vitcpp_model* r = nullptr;
  ASSERT_EQ(vitcpp_replica(m, 1, &r), VITCPP_OK) << vitcpp_last_error();
  vitcpp_close(m);  // the replica keeps the weights
  const vitcpp_image img = {VITCPP_IMAGE_FILE, kImage.c_str(), nullptr, 0, 0, 0, 0};
  std::vector<float> got(want.size());
  ASSERT_EQ(vitcpp_logits(r, &img, 1, got.data()), VITCPP_OK) << vitcpp_last_error();
  EXPECT_EQ(got, want);
  EXPECT_EQ(vitcpp_replica(nullptr, 0, &m), VITCPP_INVALID_ARGUMENT);
  EXPECT_EQ(vitcpp_replica(r, -1, &m), VITCPP_INVALID_ARGUMENT);
  EXPECT_EQ(m, nullptr);
  vitcpp_close(r);
}

// dtype "int8": the int8 products (other logits than fp32's, within int8's rounding).
TEST(CApi, Int8RunsTheInt8Products) {
  vitcpp_options o;
  vitcpp_options_init(&o);
  const std::vector<float> fp32 = logits_with(o);
  o.dtype = "int8";
  const std::vector<float> int8 = logits_with(o);
  ASSERT_EQ(int8.size(), fp32.size());
  EXPECT_NE(int8, fp32);
  float scale = 0, worst = 0;
  for (size_t i = 0; i < fp32.size(); ++i) {
    scale = std::max(scale, std::fabs(fp32[i]));
    worst = std::max(worst, std::fabs(int8[i] - fp32[i]));
  }
  EXPECT_LE(worst, 0.05f * scale);
}

TEST(CApi, ThreadsArePerModelAndLeaveTheCallersSettingAlone) {
  const int callers = vit::num_threads();
  vitcpp_set_threads(2);
  vitcpp_options o;
  vitcpp_options_init(&o);
  const std::vector<float> process = logits_with(o);
  o.threads = 1;
  o.max_batch = 4;
  const std::vector<float> own = logits_with(o);
  // The process's count and a 1-thread model's calls leave the caller's OpenMP count alone.
  EXPECT_EQ(vit::num_threads(), callers);
  vitcpp_set_threads(100000);  // cannot fail: taken as VITCPP_MAX_THREADS
  vitcpp_set_threads(0);
  vitcpp_model* m = nullptr;
  o.threads = VITCPP_MAX_THREADS + 1;
  EXPECT_EQ(vitcpp_open_with_options(kModel.c_str(), &o, &m), VITCPP_INVALID_ARGUMENT);
  EXPECT_STREQ(vitcpp_last_error(), "vitcpp_open: threads must be 0 to 4096, got 4097");
  ASSERT_EQ(own.size(), process.size());
  for (size_t i = 0; i < own.size(); ++i)
    EXPECT_NEAR(own[i], process[i], 1e-5f * std::abs(process[i]) + 1e-6f);
}
