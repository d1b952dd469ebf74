// scan_json (src/serve/json_tensor.h), the infer request's fast path for its tensor's numbers:
// the floats nlohmann's values give, bit for bit, for numbers written every way JSON allows;
// anything unusual left to nlohmann; and parse_infer the same either way.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "serve/json_tensor.h"
#include "serve/protocol.h"
#include "serve/protocol_v1.h"
#include "vit/classifier.h"

namespace vit::serve {
namespace {

const std::string kModel = std::string(VIT_FIXTURE_DIR) + "/pretrained/timm_a";  // input 3 x 32 x 32

// What nlohmann's path makes of a JSON array of numbers: each value to float, row-major.
void reference(const nlohmann::json& j, std::vector<float>& out) {
  if (j.is_array())
    for (const auto& e : j) reference(e, out);
  else
    out.push_back(j.get<float>());
}

std::string request(const std::string& data, const std::string& shape = "[1, 3, 32, 32]") {
  return R"({"id": "x", "inputs": [{"name": "pixel_values", "shape": )" + shape +
         R"(, "datatype": "FP32", "data": )" + data + "}]}";
}

// Bit equality, naming the first difference.
void expect_bits(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0) {
      ADD_FAILURE() << what << ": value " << i << " is " << got[i] << ", nlohmann gives " << want[i];
      return;
    }
}

// Numbers written as clients write them and as JSON allows: shortest and 17-digit doubles,
// float32 printed at 9 digits, a double rounding's trap, integers (int64's and uint64's ends,
// and past them: nlohmann reads those as doubles), signed zeros, exponents in every form,
// subnormals.
std::vector<std::string> number_texts() {
  std::vector<std::string> t = {"0", "-0", "0.0", "-0.0", "1", "-1", "1e5", "1E5", "1e+5", "1e-5", "2.5E-3",
                                "-3.25e+2", "0e0", "123456789", "9223372036854775807", "-9223372036854775808",
                                "18446744073709551615", "18446744073709551616", "-9223372036854775809",
                                "1e-45", "1.4e-45", "1e-320", "3.4028234663852886e37", "16777217", "0.1",
                                "0.30000000000000004",
                                // Above float's midpoint between 1 and its successor, but rounded
                                // to double it is the midpoint, and then to float it is 1:
                                // nlohmann's double-then-float gives 1, a direct float parse not.
                                "1.0000000596046447753906250000000001"};
  std::mt19937 rng(7);
  std::normal_distribution<double> normal(0, 3);
  char buf[64];
  for (int i = 0; i < 2000; ++i) {
    const double d = normal(rng) * std::pow(10.0, int(rng() % 13) - 6);
    std::snprintf(buf, sizeof buf,
                  i % 3 == 0   ? "%.17g"
                  : i % 3 == 1 ? "%.9g"
                               : "%.6e",
                  i % 3 == 1 ? double(float(d)) : d);
    t.push_back(buf);
  }
  return t;
}

TEST(JsonTensor, NumbersGiveNlohmannsFloatsBitForBit) {
  const std::vector<std::string> texts = number_texts();
  std::string flat = "[";
  for (size_t i = 0; i < texts.size(); ++i) flat += (i ? ", " : "") + texts[i];
  flat += "]";
  const std::string body = request(flat);
  const JsonScan s = scan_json(body, 32);
  ASSERT_TRUE(s.found);
  EXPECT_EQ(s.input, 0);
  EXPECT_EQ(body.substr(s.begin, s.end - s.begin), flat);
  std::vector<float> want;
  reference(nlohmann::json::parse(flat), want);
  expect_bits(s.values, want, "flat");
  // Nested [N][C][H][W] with newlines and tabs, as json.dumps(indent=...) writes it.
  std::string nested = "[\n\t[";
  for (size_t i = 0; i < 60; ++i) nested += std::string(i % 20 ? ", " : i ? "], [" : "[") + texts[i];
  nested += "]\n\t]\r\n]";
  const JsonScan n = scan_json(request(nested), 32);
  ASSERT_TRUE(n.found) << nested;
  want.clear();
  reference(nlohmann::json::parse(nested), want);
  expect_bits(n.values, want, "nested");
  EXPECT_EQ(n.deepest, 6);  // the object, inputs, an input, data and two arrays inside it
}

// FLT_MAX's shortest text (numpy's, Java's, Go's) is a little above FLT_MAX as a double: it
// is FLT_MAX (it was refused as beyond FP32's range); from FLT_MAX + half an ulp up, the
// number rounds to infinity and is left to nlohmann's path, which refuses it.
TEST(JsonTensor, FltMaxAsItsShortestTextIsFltMax) {
  const JsonScan s = scan_json(request("[3.4028235e38, -3.4028235e38, 3.4028235677973362e38]"), 32);
  ASSERT_TRUE(s.found);
  const float m = std::numeric_limits<float>::max();
  EXPECT_EQ(s.values, (std::vector<float>{m, -m, m}));
  EXPECT_FALSE(scan_json(request("[3.4028235677973366e38]"), 32).found);
  EXPECT_TRUE(fits_fp32(3.4028235677973362e38));
  EXPECT_FALSE(fits_fp32(3.4028235677973366e38));
  EXPECT_FALSE(fits_fp32(-std::numeric_limits<double>::infinity()));
  EXPECT_FALSE(fits_fp32(std::nan("")));
}

// What scan_json does not read, nlohmann's path reads (and answers when it is wrong).
TEST(JsonTensor, AnythingUnusualIsLeftToNlohmann) {
  for (const std::string data :
       {"[1, \"2\"]", "[1, true]", "[1, null]", "[+1]", "[01]", "[.5]", "[1.]", "[1e]", "[NaN]", "[Infinity]",
        "[1e400]", "[-1e39]", "[1, 2,]", "[1 2]", "[[1], 2", "{}"}) {
    const JsonScan s = scan_json(request(data), 32);
    EXPECT_FALSE(s.found) << data;
    EXPECT_TRUE(s.values.empty()) << data;
  }
  // Two inputs, "inputs" twice (nlohmann keeps the last), data elsewhere than in an input.
  EXPECT_FALSE(scan_json(R"({"inputs": [{"data": [1]}, {"data": [2]}]})", 32).found);
  EXPECT_FALSE(scan_json(R"({"inputs": [{"data": [1]}], "inputs": [{"data": "x"}]})", 32).found);
  EXPECT_FALSE(scan_json(R"({"outputs": [{"data": [1]}]})", 32).found);
  EXPECT_FALSE(scan_json(R"({"inputs": {"a": {"data": [1]}}})", 32).found);
  EXPECT_FALSE(scan_json(R"({"x": "{\"inputs\": [{\"data\": [1]}]}"})", 32).found);  // in a string
  const JsonScan second = scan_json(R"({"inputs": [5, {"b": 1}, {"data": [3]}]})", 32);
  EXPECT_TRUE(second.found);
  EXPECT_EQ(second.input, 1);  // the second object (a number is not an input)
  // The nesting bound: inside data as anywhere else.
  const std::string deep = std::string(40, '[') + "1" + std::string(40, ']');
  const JsonScan d = scan_json(request(deep), 32);
  EXPECT_FALSE(d.found);
  EXPECT_GT(d.deepest, 32);
  EXPECT_EQ(scan_json(R"({"a": [[{"b": "[[[["}]]})", 32).deepest, 4);
}

// parse_infer gives the same tensor whether scan_json read the numbers or nlohmann did, and
// the request's other fields as before.
TEST(JsonTensor, ParseInferReadsTheSameTensorEitherWay) {
  const Classifier model(kModel);
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0, 1);
  std::string data = "[";
  std::vector<float> want;
  char buf[32];
  for (int i = 0; i < 3 * 32 * 32; ++i) {
    std::snprintf(buf, sizeof buf, "%.9g", double(normal(rng)));
    data += (i ? ", " : "") + std::string(buf);
    want.push_back(float(std::strtod(buf, nullptr)));
  }
  data += "]";
  const InferRequest fast = parse_infer(request(data), model);
  EXPECT_EQ(fast.id, "x");
  EXPECT_EQ(fast.n, 1);
  expect_bits(fast.x, want, "scanned");
  // data given twice: nlohmann keeps the last, so must the request.
  const std::string twice =
      R"({"inputs": [{"name": "pixel_values", "shape": [1, 3, 32, 32], "datatype": "FP32", "data": )" + data +
      R"(, "data": "x"}]})";
  try {
    parse_infer(twice, model);
    ADD_FAILURE() << "data given twice, the last a string: no error";
  } catch (const RequestError& e) {
    EXPECT_EQ(e.status, 400);
    EXPECT_NE(std::string(e.what()).find("string values"), std::string::npos) << e.what();
  }
  // Beyond FP32 (nlohmann's path): a 400 that says so, not an undefined conversion.
  try {
    parse_infer(request("[1e39" + data.substr(data.find(','))), model);
    ADD_FAILURE() << "1e39: no error";
  } catch (const RequestError& e) {
    EXPECT_NE(std::string(e.what()).find("beyond FP32's range"), std::string::npos) << e.what();
  }
  // The wrong count is still said as before.
  try {
    parse_infer(request(data.substr(0, data.rfind(',')) + "]"), model);
    ADD_FAILURE() << "3071 values for 3072: no error";
  } catch (const RequestError& e) {
    EXPECT_NE(std::string(e.what()).find("data holds 3071 values"), std::string::npos) << e.what();
  }
}

// KServe V1's instances: the shape of a regularly nested array; anything irregular has none.
TEST(JsonTensor, V1InstancesGiveTheirShapeWhenRegular) {
  const JsonScan s = scan_json(R"({"signature_name": "x", "instances": [[[1, 2, 3], [4, 5, 6]]]})", 32,
                               JsonTarget::v1_instances);
  ASSERT_TRUE(s.found);
  EXPECT_EQ(s.shape, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(s.values, (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(scan_json(R"({"inputs": [[1, 2], [3, 4]]})", 32, JsonTarget::v1_instances).shape,
            (std::vector<int64_t>{2, 2}));
  for (const std::string irregular :
       {"[[1, 2], [3]]", "[[1, 2], 3]", "[1, [2, 3]]", "[[[1]], [2]]", "[[], [1]]"}) {
    const JsonScan i = scan_json(R"({"instances": )" + irregular + "}", 32, JsonTarget::v1_instances);
    EXPECT_TRUE(i.shape.empty()) << irregular;
  }
  // The infer target does not read instances, nor the V1 target an input's data.
  EXPECT_FALSE(scan_json(R"({"instances": [[1]]})", 32).found);
  EXPECT_FALSE(scan_json(request("[1]"), 32, JsonTarget::v1_instances).found);
  EXPECT_FALSE(scan_json(R"({"instances": [[1]], "instances": [[2]]})", 32, JsonTarget::v1_instances).found);
}

// parse_v1_predict reads the same tensor, bit for bit, from the text and through nlohmann.
TEST(JsonTensor, V1PredictReadsTheSameTensorEitherWay) {
  const Classifier model(kModel);
  std::mt19937 rng(4);
  std::normal_distribution<float> normal(0, 1);
  char buf[32];
  std::string image = "[";
  for (int c = 0; c < 3; ++c) {
    image += c ? ", [" : "[";
    for (int y = 0; y < 32; ++y) {
      image += y ? ", [" : "[";
      for (int x = 0; x < 32; ++x) {
        std::snprintf(buf, sizeof buf, "%.9g", double(normal(rng)));
        image += (x ? ", " : "") + std::string(buf);
      }
      image += "]";
    }
    image += "]";
  }
  image += "]";
  // The first number an integer past 2^53, whose float through a double could differ.
  image.replace(3, image.find(',') - 3, "123456789012345678");
  const std::string bare = R"({"instances": [)" + image + ", " + image + "]}";
  const std::string named = R"({"instances": [{"pixel_values": )" + image + "}, " + image + "]}";
  EXPECT_EQ(scan_json(bare, 32, JsonTarget::v1_instances).shape, (std::vector<int64_t>{2, 3, 32, 32}));
  EXPECT_FALSE(scan_json(named, 32, JsonTarget::v1_instances).found);  // nlohmann's path
  const InferRequest fast = parse_v1_predict(bare, model, 1 << 30);
  const InferRequest slow = parse_v1_predict(named, model, 1 << 30);
  EXPECT_EQ(fast.x[0], float(123456789012345678LL));
  EXPECT_EQ(fast.n, 2);
  EXPECT_EQ(slow.n, 2);
  expect_bits(fast.x, slow.x, "text and nlohmann");
  // The rest of the body must be JSON; a wrong shape is said by nlohmann's path.
  for (const auto& [body, message] : std::vector<std::pair<std::string, std::string>>{
           {R"({"instances": [)" + image + "], }", "not JSON"},
           {R"({"instances": [[)" + image + "]]}", "at depth 0 found 1 items"},
           {R"({"instances": [[1, 2]]})", "at depth 0 found 2 items"}}) {
    try {
      parse_v1_predict(body, model, 1 << 30);
      ADD_FAILURE() << message << ": no error";
    } catch (const RequestError& e) {
      EXPECT_EQ(e.status, 400);
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  }
}

// TorchServe's top-5 is a JSON object keyed by label: a second class of the same name took the
// first's key, and the best class showed the other's probability. The later one gets its index.
TEST(Protocol, TopFiveNamesADuplicateLabelByItsIndex) {
  const std::string labels = ::testing::TempDir() + "vit_dup_labels.txt";
  FILE* f = std::fopen(labels.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs("same\nsame\nsame\nother\nsame\n", f);
  std::fclose(f);
  ClassifierOptions o;
  o.labels_file = labels;
  const Classifier m(kModel, o);
  const float logits[5] = {1.f, 4.f, 3.f, 2.f, 0.f};
  const nlohmann::ordered_json j = nlohmann::ordered_json::parse(top5_json(logits, m));
  std::vector<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"same", "same (2)", "other", "same (0)", "same (4)"}))
      << j.dump();
  EXPECT_GT(j["same"].get<double>(), j["same (2)"].get<double>());
  std::remove(labels.c_str());
}

}  // namespace
}  // namespace vit::serve
