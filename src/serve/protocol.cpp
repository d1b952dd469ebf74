#include "serve/protocol.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <semaphore>
#include <thread>

#include "serve/json_tensor.h"
#include "vit/core/version.h"

namespace vit::serve {

using nlohmann::json;

namespace {

[[noreturn]] void bad(const std::string& what) {
  throw RequestError(400, what);
}

// j as JSON text. Strings that are not UTF-8 (a class name from a file, a message quoting a
// byte of the request) get U+FFFD where nlohmann would throw, which would end the server.
template <typename Json>
std::string dump(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// The numbers of a row-major tensor, flat or nested, appended to out (where scan_json did
// not read them: the request is unusual, or wrong).
void flatten(const json& j, std::vector<float>& out) {
  if (j.is_array()) {
    for (const json& e : j) flatten(e, out);
  } else if (j.is_number()) {
    const double v = j.get<double>();  // to float only within its range: beyond, the cast is undefined
    if (!fits_fp32(v)) bad("pixel_values: " + j.dump() + " is beyond FP32's range");
    out.push_back(j.get<float>());
  } else {
    bad("pixel_values: data holds " + std::string(j.type_name()) + " values; FP32 wants numbers");
  }
}

// A string member of an object ("" when it has none); 400 when it is not a string.
std::string text(const json& object, const char* key) {
  if (!object.contains(key)) return "";
  const json& v = object[key];
  if (!v.is_string()) bad(std::string("\"") + key + "\" must be a string, got " + v.type_name());
  return v.get<std::string>();
}

// The input's shape. Each element takes a byte of the body at least, in JSON or binary, so a
// shape of more elements than the body has bytes is refused before anything is allocated.
std::vector<int64_t> shape_of(const json& input, const std::string& name, size_t body_size) {
  if (!input.contains("shape") || !input["shape"].is_array()) bad(name + ": no \"shape\" list");
  std::vector<int64_t> s;
  uint64_t elements = 1;
  for (const json& d : input["shape"]) {
    if (!d.is_number_integer() || d.get<int64_t>() < 1)
      bad(name + ": shape " + input["shape"].dump() + " is not a list of positive integers");
    s.push_back(d.get<int64_t>());
    if (uint64_t(s.back()) > body_size / elements)
      bad(name + ": shape " + input["shape"].dump() + " has more elements than the body's " +
          std::to_string(body_size) + " bytes can hold");
    elements *= uint64_t(s.back());
  }
  return s;
}

// The bytes after the JSON (the binary tensor data extension), taken in order by the inputs
// that give a "binary_data_size" parameter.
struct BinaryData {
  std::string_view rest;
  bool sent = false;      // the request had an Inference-Header-Content-Length header
  size_t body_size = 0;   // the whole body's bytes
  size_t max_floats = 0;  // the most floats the decoded images may take

  // The input's binary bytes; nullopt when its data is in the JSON.
  std::optional<std::string_view> take(const json& input, const std::string& name) {
    const json& p = input.value("parameters", json::object());
    if (!p.is_object() || !p.contains("binary_data_size")) return std::nullopt;
    const json& size = p["binary_data_size"];
    if (!size.is_number_integer() || size.get<int64_t>() < 0)
      bad(name + ": \"binary_data_size\" must be a non-negative integer");
    if (!sent)
      bad(name +
          ": binary_data_size given, but the request has no Inference-Header-Content-Length header "
          "(the length of its JSON, with the binary data after it)");
    if (input.contains("data")) bad(name + ": both \"data\" and binary_data_size given; give one");
    const auto n = size.get<uint64_t>();
    if (n > rest.size())
      bad(name + ": binary_data_size " + std::to_string(n) + ", but " + std::to_string(rest.size()) +
          " bytes of binary data are left after the JSON");
    const std::string_view bytes = rest.substr(0, size_t(n));
    rest.remove_prefix(size_t(n));
    return bytes;
  }
};

// An input without its values: no "data" (or null) and no binary_data_size. Said before its
// shape is weighed against the body (which said the shape was too large for the body).
void check_has_data(const json& input, const std::string& name) {
  const json& p = input.value("parameters", json::object());
  if (input.value("data", json()).is_null() && !(p.is_object() && p.contains("binary_data_size")))
    bad(name + ": no \"data\" (nor a binary_data_size parameter with the binary data after the JSON)");
}

// The strings of a BYTES input's "data", flat or nested (the protocol allows either), in
// row-major order; 400 naming the first element that is not a string.
void strings_of(const json& data, std::vector<const json*>& out) {
  if (data.is_array()) {
    for (const json& e : data) strings_of(e, out);
    return;
  }
  if (!data.is_string())
    bad("image: data[" + std::to_string(out.size()) + "] is " + std::string(data.type_name()) +
        ", not a base64 string");
  out.push_back(&data);
}

// scanned: the numbers scan_json read from this input's "data" (replaced by [] in the JSON
// parsed), or null.
void read_pixels(const json& input, const Classifier& m, BinaryData& bin, InferRequest& r,
                 std::vector<float>* scanned) {
  const std::string type = text(input, "datatype");
  if (type != "FP32") bad("pixel_values: datatype must be FP32, got \"" + type + "\"");
  check_has_data(input, "pixel_values");
  const std::vector<int64_t> s = shape_of(input, "pixel_values", bin.body_size);
  r.n = pixel_batch(s, m);
  const int64_t count = r.n * m.channels() * m.height() * m.width();
  if (const auto bytes = bin.take(input, "pixel_values")) {
    static_assert(std::endian::native == std::endian::little, "binary tensor data is little-endian");
    if (int64_t(bytes->size()) != count * int64_t(sizeof(float)))
      bad("pixel_values: " + std::to_string(bytes->size()) + " bytes of binary data; shape " + shape_text(s) +
          " needs " + std::to_string(count * int64_t(sizeof(float))) + " (FP32)");
    r.x.resize(size_t(count));
    std::memcpy(r.x.data(), bytes->data(), bytes->size());
    return;
  }
  if (!input.contains("data")) bad("pixel_values: no \"data\"");
  // "data" given twice in the input: nlohmann kept the other one.
  const bool replaced = input["data"].is_array() && input["data"].empty();
  if (scanned && replaced) {
    r.x = std::move(*scanned);
  } else {
    r.x.reserve(size_t(count));
    flatten(input["data"], r.x);
  }
  if (int64_t(r.x.size()) != count)
    bad("pixel_values: data holds " + std::to_string(r.x.size()) + " values; shape " + shape_text(s) +
        " needs " + std::to_string(count));
}

void read_images(const json& input, const Classifier& m, BinaryData& bin, InferRequest& r) {
  const std::string type = text(input, "datatype");
  if (type != "BYTES")
    bad("image: datatype must be BYTES (base64 of PNG or JPEG files), got \"" + type + "\"");
  check_has_data(input, "image");
  const std::vector<int64_t> s = shape_of(input, "image", bin.body_size);
  r.n = image_batch(s, m, bin.max_floats);
  std::vector<std::string> decoded;  // base64 from the JSON
  std::vector<std::string_view> files;
  if (const auto bytes = bin.take(input, "image")) {
    files = bytes_elements(*bytes, r.n);
  } else {
    const json& data = input.value("data", json());
    std::vector<const json*> strings;
    if (data.is_array()) strings_of(data, strings);
    if (!data.is_array() || int64_t(strings.size()) != r.n)
      bad("image: data must be a list of " + std::to_string(r.n) +
          " base64 strings (flat or nested as the shape)");
    for (const json* e : strings) decoded.push_back(base64_decode(e->get<std::string>()));
    files.assign(decoded.begin(), decoded.end());
  }
  preprocess_images(files, m, r.x);
}

// A boolean parameter of `where` (a request or one of its outputs), or `otherwise`.
bool flag(const json& where, const char* name, bool otherwise) {
  const json& p = where.value("parameters", json::object());
  if (!p.is_object() || !p.contains(name)) return otherwise;
  if (!p[name].is_boolean()) bad(std::string("\"") + name + "\" must be true or false");
  return p[name].get<bool>();
}

}  // namespace

std::string shape_text(const std::vector<int64_t>& s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

int64_t pixel_batch(const std::vector<int64_t>& s, const Classifier& m) {
  const std::vector<int64_t> want = {s.empty() ? 0 : s[0], m.channels(), m.height(), m.width()};
  if (s.size() != 4 || s != want || s[0] < 1)
    bad("pixel_values: shape " + shape_text(s) + " does not fit the model's input [N, " +
        std::to_string(m.channels()) + ", " + std::to_string(m.height()) + ", " + std::to_string(m.width()) +
        "]");
  return s[0];
}

int64_t image_batch(const std::vector<int64_t>& s, const Classifier& m, size_t max_floats) {
  if (s.empty() || s.size() > 2 || (s.size() == 2 && s[1] != 1) || s[0] < 1)
    bad("image: shape must be [N] or [N, 1], got " + shape_text(s));
  const int64_t per = m.channels() * m.height() * m.width();
  if (uint64_t(s[0]) > max_floats / uint64_t(per))
    throw RequestError(413, detail::concat("image: ", s[0], " images make an input of ",
                                           double(s[0]) * double(per) * 4 / 1e6,
                                           " MB, over the --max-body-mb limit; send fewer per request"));
  return s[0];
}

// BYTES elements as binary data: each a 4-byte little-endian length, then its bytes.
std::vector<std::string_view> bytes_elements(std::string_view data, int64_t n) {
  std::vector<std::string_view> out;
  for (int64_t i = 0; i < n; ++i) {
    if (data.size() < 4) bad("image: the binary data ends before element " + std::to_string(i) + "'s length");
    uint32_t len = 0;
    for (int b = 3; b >= 0; --b) len = (len << 8) | uint8_t(data[size_t(b)]);
    data.remove_prefix(4);
    if (len > data.size())
      bad("image: element " + std::to_string(i) + " is " + std::to_string(len) + " bytes long, but " +
          std::to_string(data.size()) + " are left");
    out.push_back(data.substr(0, len));
    data.remove_prefix(len);
  }
  if (!data.empty())
    bad("image: " + std::to_string(data.size()) + " bytes of binary data left after the " +
        std::to_string(n) + " elements of its shape");
  return out;
}

void preprocess_file(const Classifier& m, std::string_view file, float* out) {
  static std::counting_semaphore<> slots(std::max<std::ptrdiff_t>(1, std::thread::hardware_concurrency()));
  slots.acquire();
  struct Release {
    ~Release() { slots.release(); }
  } release;
  m.preprocess(ImageInput::encoded(file.data(), file.size()), out);
}

void preprocess_images(const std::vector<std::string_view>& files, const Classifier& m,
                       std::vector<float>& x) {
  const int64_t per = m.channels() * m.height() * m.width();
  x.resize(files.size() * size_t(per));
  for (size_t i = 0; i < files.size(); ++i) {
    try {
      preprocess_file(m, files[i], x.data() + int64_t(i) * per);
    } catch (const Error& e) {
      bad("image: data[" + std::to_string(i) + "]: " + e.what());
    }
  }
}

std::vector<std::string> classification(const float* logits, int64_t n, int64_t k, const Classifier& m) {
  const int64_t K = m.num_classes();
  std::vector<std::string> out;
  for (int64_t i = 0; i < n; ++i)
    for (const Prediction& p : top_k(logits + i * K, K, std::min(k, K), m.class_names())) {
      std::string s = std::to_string(logits[i * K + p.index]) + ":" + std::to_string(p.index);
      if (!p.label.empty()) s += ":" + p.label;
      out.push_back(std::move(s));
    }
  return out;
}

std::string bytes_binary(const std::vector<std::string>& elements) {
  std::string out;
  for (const std::string& e : elements) {
    for (int b = 0; b < 4; ++b) out.push_back(char((e.size() >> (8 * b)) & 0xff));
    out += e;
  }
  return out;
}

InferRequest parse_infer(std::string_view body, const Classifier& m, size_t json_length,
                         size_t max_input_bytes) {
  if (json_length > body.size())
    bad("Inference-Header-Content-Length " + std::to_string(json_length) + " is more than the body's " +
        std::to_string(body.size()) + " bytes");
  BinaryData bin{json_length > 0 ? body.substr(json_length) : std::string_view(), json_length > 0,
                 body.size(), max_input_bytes / sizeof(float)};
  const std::string_view head = json_length > 0 ? body.substr(0, json_length) : body;
  // A pixel tensor nests 5 deep in a request; 2 MB of "[" nested a million deep overflowed
  // the stack of the recursion that reads it (flatten), ending the server.
  constexpr int kMostNesting = 32;
  JsonScan scan = scan_json(head, kMostNesting);
  if (scan.deepest > kMostNesting)
    bad("the JSON nests arrays and objects more than " + std::to_string(kMostNesting) + " deep");
  // The numbers scan_json read are left out of what nlohmann parses.
  std::string rest;
  if (scan.found) rest = std::string(head.substr(0, scan.begin)).append("[]").append(head.substr(scan.end));
  json j = json::parse(scan.found ? std::string_view(rest) : head, nullptr, false);
  if (j.is_discarded()) {
    const bool binary = json_length == 0 && body.find("\"binary_data_size\"") != std::string_view::npos;
    bad(binary ? "the body is not valid JSON: with binary data after it, send the JSON's length in the "
                 "Inference-Header-Content-Length header"
               : "the body is not valid JSON");
  }
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
  const std::string name = text(in, "name");
  if (name == "pixel_values")
    read_pixels(in, m, bin, r, scan.found && scan.input == 0 ? &scan.values : nullptr);
  else if (name == "image")
    read_images(in, m, bin, r);
  else
    bad("unknown input \"" + name +
        "\": the model takes \"pixel_values\" (FP32 [N, C, H, W]) or \"image\" (BYTES [N])");
  if (!bin.rest.empty())
    bad(std::to_string(bin.rest.size()) +
        " bytes of binary data after the JSON that no input's binary_data_size takes");
  r.binary_output = flag(j, "binary_data_output", false);
  if (const json& p = j.value("parameters", json::object()); p.is_object() && p.contains("timeout")) {
    if (!p["timeout"].is_number_integer() || p["timeout"].get<int64_t>() < 0)
      bad("\"timeout\" must be a non-negative integer (microseconds)");
    r.timeout_us = p["timeout"].get<int64_t>();
  }
  if (j.contains("outputs")) {
    const json& outs = j["outputs"];
    if (!outs.is_array()) bad("\"outputs\" must be a list");
    for (const json& o : outs) {
      if (!o.is_object() || text(o, "name") != "logits") bad("the only output is \"logits\"");
      if (&o != &outs.front())
        bad("\"outputs\" names \"logits\" twice (as Triton, an output is asked for once)");
      r.binary_output = flag(o, "binary_data", r.binary_output);
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

InferResponse infer_response(const std::string& model_name, const InferRequest& r,
                             const std::vector<float>& logits, const Classifier& m,
                             const std::string& version) {
  const int64_t K = m.num_classes();
  json out = {{"model_name", model_name}, {"model_version", version}};
  if (!r.id.empty()) out["id"] = r.id;
  json o = {{"name", "logits"}};
  std::string binary;  // the output's binary data, when asked for
  if (r.classification > 0) {
    const int64_t k = std::min(r.classification, K);
    std::vector<std::string> data = classification(logits.data(), r.n, k, m);
    if (r.binary_output) binary = bytes_binary(data);
    o["datatype"] = "BYTES";
    o["shape"] = {r.n, k};
    if (!r.binary_output) o["data"] = std::move(data);
  } else {
    o["datatype"] = "FP32";
    o["shape"] = {r.n, K};
    if (r.binary_output)
      binary.assign(reinterpret_cast<const char*>(logits.data()), logits.size() * sizeof(float));
    else
      o["data"] = logits;
  }
  if (r.binary_output) o["parameters"] = {{"binary_data_size", binary.size()}};
  out["outputs"] = json::array({o});
  InferResponse res{dump(out)};
  if (r.binary_output) {
    res.json_length = res.body.size();
    res.body += binary;
  }
  return res;
}

std::string model_metadata(const std::string& model_name, const Classifier& m, const std::string& version) {
  json j = {{"name", model_name},
            {"versions", {version}},
            {"platform", "vitcpp"},
            {"inputs",
             {{{"name", "pixel_values"},
               {"datatype", "FP32"},
               {"shape", {-1, m.channels(), m.height(), m.width()}}},
              {{"name", "image"}, {"datatype", "BYTES"}, {"shape", {-1}}}}},
            {"outputs", {{{"name", "logits"}, {"datatype", "FP32"}, {"shape", {-1, m.num_classes()}}}}}};
  return dump(j);
}

std::string model_config(const std::string& model_name, const Classifier& m, const ModelSettings& s) {
  using ojson = nlohmann::ordered_json;  // in model_config.proto's order, as Triton writes it
  ojson j = {{"name", model_name},
             {"platform", "vitcpp"},
             {"backend", "vitcpp"},
             {"version_policy", {{"latest", {{"num_versions", 1}}}}},
             {"max_batch_size", s.max_batch},
             {"input",
              {{{"name", "pixel_values"},
                {"data_type", "TYPE_FP32"},
                {"format", "FORMAT_NCHW"},
                {"dims", {m.channels(), m.height(), m.width()}},
                {"optional", true}},
               {{"name", "image"},  // BYTES in the protocol is TYPE_STRING in a configuration
                {"data_type", "TYPE_STRING"},
                {"format", "FORMAT_NONE"},
                {"dims", {1}},
                {"optional", true}}}},
             {"output", {{{"name", "logits"}, {"data_type", "TYPE_FP32"}, {"dims", {m.num_classes()}}}}}};
  if (s.dynamic)
    j["dynamic_batching"] = {{"max_queue_delay_microseconds", s.max_delay_us()},
                             {"default_queue_policy", {{"max_queue_size", s.max_queue}}}};
  j["instance_group"] = {{{"name", model_name}, {"kind", "KIND_CPU"}, {"count", s.instances}}};
  j["parameters"] = {{"dtype", {{"string_value", s.dtype}}}};
  return dump(j);
}

void repository_parameter(const std::string& key, bool bool_value, bool string_value, bool load) {
  if (key == "unload_dependents" && !load) {
    if (!bool_value) bad("parameter unload_dependents: true or false");
    return;
  }
  if (key == "config" && load) {
    if (!string_value) bad("parameter config: Triton's model configuration in JSON, as a string");
    return;
  }
  bad("parameter '" + key + "': vit serve " +
      (load ? "loads a model with one parameter, config (Triton's file: overrides are not taken)"
            : "unloads a model with one parameter, unload_dependents"));
}

std::string repository_parameters(std::string_view body, bool load) {
  if (body.empty()) return "";
  const json j = json::parse(body, nullptr, false);
  if (!j.is_object() || (j.contains("parameters") && !j["parameters"].is_object()))
    bad("the body must be empty or a JSON object, with \"parameters\" an object");
  std::string config;
  if (j.contains("parameters"))
    for (const auto& [key, value] : j["parameters"].items()) {
      repository_parameter(key, value.is_boolean(), value.is_string(), load);
      if (key == "config") config = value.get<std::string>();
    }
  return config;
}

std::string top5_json(const float* logits, const Classifier& m) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();  // best first, as TorchServe answers
  for (const Prediction& p : top_k(logits, m.num_classes(), 5, m.class_names())) {
    std::string key = p.label.empty() ? std::to_string(p.index) : p.label;
    // Two classes of one name (ImageNet's "crane", "maillot"): the second took the first's
    // key and place, and the best class showed the other's probability (TorchServe's dict
    // does the same). The later one is named with its index.
    while (j.contains(key)) key += " (" + std::to_string(p.index) + ")";  // a class named "x (4)" too
    j[key] = p.probability;
  }
  return dump(j);
}

std::string error_json(const std::string& message) {
  return dump(json{{"error", message}});
}

std::string base64_decode(std::string_view text) {
  std::array<int, 256> value;
  value.fill(-1);
  const std::string_view alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (size_t i = 0; i < alphabet.size(); ++i) value[size_t(uint8_t(alphabet[i]))] = int(i);
  // Line breaks and spaces are skipped: MIME's base64 (Python's base64.encodebytes) breaks
  // lines every 76 characters.
  const auto space = [](char c) { return c == '\n' || c == '\r' || c == ' ' || c == '\t'; };
  while (!text.empty() && (text.back() == '=' || space(text.back()))) text.remove_suffix(1);
  if ((text.size() - size_t(std::count_if(text.begin(), text.end(), space))) % 4 == 1)
    bad("image: not base64 (its length)");
  std::string out;
  out.reserve(text.size() * 3 / 4);
  uint32_t bits = 0;
  int have = 0;
  for (char c : text) {
    if (space(c)) continue;
    const int v = value[size_t(uint8_t(c))];
    if (v < 0) {
      char byte[8];
      std::snprintf(byte, sizeof byte, "0x%02x", unsigned(uint8_t(c)));
      bad("image: not base64 (byte " + std::string(byte) + ")");
    }
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
