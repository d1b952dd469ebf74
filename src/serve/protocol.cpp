#include "serve/protocol.h"

#include <array>
#include <nlohmann/json.hpp>

#include "vit/core/version.h"

namespace vit::serve {

using nlohmann::json;

namespace {

[[noreturn]] void bad(const std::string& what) {
  throw RequestError(400, what);
}

// The numbers of a row-major tensor, flat or nested, appended to out.
void flatten(const json& j, std::vector<float>& out) {
  if (j.is_array()) {
    for (const json& e : j) flatten(e, out);
  } else if (j.is_number()) {
    out.push_back(j.get<float>());
  } else {
    bad("pixel_values: data holds " + std::string(j.type_name()) + " values; FP32 wants numbers");
  }
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

std::vector<int64_t> shape_of(const json& input, const std::string& name) {
  if (!input.contains("shape") || !input["shape"].is_array()) bad(name + ": no \"shape\" list");
  std::vector<int64_t> s;
  for (const json& d : input["shape"]) {
    if (!d.is_number_integer() || d.get<int64_t>() < 1)
      bad(name + ": shape " + input["shape"].dump() + " is not a list of positive integers");
    s.push_back(d.get<int64_t>());
  }
  return s;
}

void read_pixels(const json& input, const Classifier& m, InferRequest& r) {
  const std::string type = input.value("datatype", "");
  if (type != "FP32") bad("pixel_values: datatype must be FP32, got \"" + type + "\"");
  const std::vector<int64_t> s = shape_of(input, "pixel_values");
  const std::vector<int64_t> want = {s.empty() ? 0 : s[0], m.channels(), m.height(), m.width()};
  if (s.size() != 4 || s != want)
    bad("pixel_values: shape " + shape_text(s) + " does not fit the model's input [N, " +
        std::to_string(m.channels()) + ", " + std::to_string(m.height()) + ", " + std::to_string(m.width()) +
        "]");
  if (!input.contains("data")) bad("pixel_values: no \"data\"");
  r.n = s[0];
  r.x.reserve(size_t(r.n * m.channels() * m.height() * m.width()));
  flatten(input["data"], r.x);
  if (int64_t(r.x.size()) != r.n * m.channels() * m.height() * m.width())
    bad("pixel_values: data holds " + std::to_string(r.x.size()) + " values; shape " + shape_text(s) +
        " needs " + std::to_string(r.n * m.channels() * m.height() * m.width()));
}

void read_images(const json& input, const Classifier& m, InferRequest& r) {
  const std::string type = input.value("datatype", "");
  if (type != "BYTES")
    bad("image: datatype must be BYTES (base64 of PNG or JPEG files), got \"" + type + "\"");
  const std::vector<int64_t> s = shape_of(input, "image");
  if (s.empty() || s.size() > 2 || (s.size() == 2 && s[1] != 1))
    bad("image: shape must be [N] or [N, 1], got " + shape_text(s));
  const json& data = input.value("data", json());
  if (!data.is_array() || int64_t(data.size()) != s[0])
    bad("image: data must be a list of " + std::to_string(s[0]) + " base64 strings");
  r.n = s[0];
  const int64_t per = m.channels() * m.height() * m.width();
  r.x.resize(size_t(r.n * per));
  for (int64_t i = 0; i < r.n; ++i) {
    if (!data[size_t(i)].is_string()) bad("image: data[" + std::to_string(i) + "] is not a base64 string");
    const std::string bytes = base64_decode(data[size_t(i)].get<std::string>());
    try {
      m.preprocess(ImageInput::encoded(bytes.data(), bytes.size()), r.x.data() + i * per);
    } catch (const Error& e) {
      bad("image: data[" + std::to_string(i) + "]: " + e.what());
    }
  }
}

}  // namespace

InferRequest parse_infer(std::string_view body, const Classifier& m) {
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded()) bad("the body is not valid JSON");
  if (!j.is_object()) bad("the body must be a JSON object with \"inputs\"");
  InferRequest r;
  if (j.contains("id")) {
    if (!j["id"].is_string()) bad("\"id\" must be a string");
    r.id = j["id"].get<std::string>();
  }
  const json& inputs = j.value("inputs", json());
  if (!inputs.is_array() || inputs.size() != 1 || !inputs[0].is_object())
    bad("\"inputs\" must be a list of one input: \"pixel_values\" (FP32 [N, C, H, W]) or \"image\" (BYTES "
        "[N])");
  const json& in = inputs[0];
  const std::string name = in.value("name", "");
  if (name == "pixel_values")
    read_pixels(in, m, r);
  else if (name == "image")
    read_images(in, m, r);
  else
    bad("unknown input \"" + name +
        "\": the model takes \"pixel_values\" (FP32 [N, C, H, W]) or \"image\" (BYTES [N])");
  if (j.contains("outputs")) {
    const json& outs = j["outputs"];
    if (!outs.is_array()) bad("\"outputs\" must be a list");
    for (const json& o : outs) {
      if (!o.is_object() || o.value("name", "") != "logits") bad("the only output is \"logits\"");
      const json& p = o.value("parameters", json::object());
      if (p.is_object() && p.contains("classification")) {
        if (!p["classification"].is_number_integer() || p["classification"].get<int64_t>() < 1)
          bad("\"classification\" must be a positive integer (the top k)");
        r.classification = p["classification"].get<int64_t>();
      }
    }
  }
  return r;
}

std::string infer_response(const std::string& model_name, const InferRequest& r,
                           const std::vector<float>& logits, const Classifier& m) {
  const int64_t K = m.num_classes();
  json out = {{"model_name", model_name}, {"model_version", "1"}};
  if (!r.id.empty()) out["id"] = r.id;
  json o = {{"name", "logits"}};
  if (r.classification > 0) {
    const int64_t k = std::min(r.classification, K);
    json data = json::array();
    for (int64_t i = 0; i < r.n; ++i)
      for (const Prediction& p : top_k(logits.data() + i * K, K, k, m.class_names())) {
        std::string s = std::to_string(logits[size_t(i * K + p.index)]) + ":" + std::to_string(p.index);
        if (!p.label.empty()) s += ":" + p.label;
        data.push_back(s);
      }
    o["datatype"] = "BYTES";
    o["shape"] = {r.n, k};
    o["data"] = std::move(data);
  } else {
    o["datatype"] = "FP32";
    o["shape"] = {r.n, K};
    o["data"] = logits;
  }
  out["outputs"] = json::array({o});
  return out.dump();
}

std::string model_metadata(const std::string& model_name, const Classifier& m) {
  json j = {{"name", model_name},
            {"versions", {"1"}},
            {"platform", "vitcpp"},
            {"inputs",
             {{{"name", "pixel_values"},
               {"datatype", "FP32"},
               {"shape", {-1, m.channels(), m.height(), m.width()}}},
              {{"name", "image"}, {"datatype", "BYTES"}, {"shape", {-1}}}}},
            {"outputs", {{{"name", "logits"}, {"datatype", "FP32"}, {"shape", {-1, m.num_classes()}}}}}};
  return j.dump();
}

std::string top5_json(const float* logits, const Classifier& m) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();  // best first, as TorchServe answers
  for (const Prediction& p : top_k(logits, m.num_classes(), 5, m.class_names()))
    j[p.label.empty() ? std::to_string(p.index) : p.label] = p.probability;
  return j.dump();
}

std::string error_json(const std::string& message) {
  return json{{"error", message}}.dump();
}

std::string base64_decode(std::string_view text) {
  std::array<int, 256> value;
  value.fill(-1);
  const std::string_view alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (size_t i = 0; i < alphabet.size(); ++i) value[size_t(uint8_t(alphabet[i]))] = int(i);
  while (!text.empty() && text.back() == '=') text.remove_suffix(1);
  if (text.size() % 4 == 1) bad("image: not base64 (its length)");
  std::string out;
  out.reserve(text.size() * 3 / 4);
  uint32_t bits = 0;
  int have = 0;
  for (char c : text) {
    const int v = value[size_t(uint8_t(c))];
    if (v < 0) bad("image: not base64 (character '" + std::string(1, c) + "')");
    bits = (bits << 6) | uint32_t(v);
    have += 6;
    if (have >= 8) {
      have -= 8;
      out.push_back(char((bits >> have) & 0xff));
    }
  }
  return out;
}

}  // namespace vit::serve
