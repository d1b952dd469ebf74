#include "serve/json_tensor.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <string_view>
#include <system_error>
#include <type_traits>

namespace vit::serve {

namespace {

bool digit(std::string_view t, size_t i) {
  return i < t.size() && t[i] >= '0' && t[i] <= '9';
}

void skip_space(std::string_view t, size_t& i) {
  while (i < t.size() && (t[i] == ' ' || t[i] == '\t' || t[i] == '\n' || t[i] == '\r')) ++i;
}

// The end of the JSON string whose opening quote is t[i] (past its closing quote), or npos.
size_t string_end(std::string_view t, size_t i) {
  for (++i; i < t.size(); ++i) {
    if (t[i] == '\\')
      ++i;
    else if (t[i] == '"')
      return i + 1;
  }
  return std::string_view::npos;
}

// text[first, last) as a T when all of it is one, in T's range; then out = float of it.
template <typename T>
bool parse_as(const char* first, const char* last, float& out) {
  T v = 0;
  const auto r = std::from_chars(first, last, v);
  if (r.ec != std::errc() || r.ptr != last) return false;
  if constexpr (std::is_floating_point_v<T>)
    if (!fits_fp32(double(v))) return false;  // the cast is undefined beyond
  out = float(v);
  return true;
}

// The JSON number at t[i] as a float, as nlohmann's value of it gives one; i moves past it.
// False for what is not a JSON number (RFC 8259's grammar: no '+', no leading zeros, digits
// around '.') and for a number beyond float's range: nlohmann's path then answers those.
bool read_number(std::string_view t, size_t& i, float& out) {
  size_t j = i;
  if (j < t.size() && t[j] == '-') ++j;
  if (!digit(t, j)) return false;
  if (t[j] == '0')
    ++j;
  else
    while (digit(t, j)) ++j;
  bool integer = true;
  if (j < t.size() && t[j] == '.') {
    integer = false;
    if (!digit(t, ++j)) return false;
    while (digit(t, j)) ++j;
  }
  if (j < t.size() && (t[j] == 'e' || t[j] == 'E')) {
    integer = false;
    if (++j < t.size() && (t[j] == '+' || t[j] == '-')) ++j;
    if (!digit(t, j)) return false;
    while (digit(t, j)) ++j;
  }
  const char *first = t.data() + i, *last = t.data() + j;
  // nlohmann keeps an integer as int64 (uint64 when not negative) where it fits, else as double.
  const bool ok = (integer && (*first == '-' ? parse_as<int64_t>(first, last, out)
                                             : parse_as<uint64_t>(first, last, out))) ||
                  parse_as<double>(first, last, out);
  if (ok) i = j;
  return ok;
}

// The lengths of a nested array's arrays, depth by depth, while they are regular: every
// array at a depth as long as the first there, numbers at one depth only, the deepest.
struct Nesting {
  std::vector<int64_t> lengths;  // [d]: the length of the arrays at depth d (0: the outermost)
  std::vector<int64_t> counts;   // the open arrays' items so far
  int leaf = -1;                 // the depth of the numbers
  bool regular = true;
  void open(int level) {  // an array at depth level - 1 begins
    if (level > 1) ++counts[size_t(level - 2)];
    if (int(counts.size()) < level) counts.resize(size_t(level));
    counts[size_t(level - 1)] = 0;
    if (leaf >= 0 && level - 2 >= leaf) regular = false;  // an array beside numbers, or below them
  }
  void number(int level) {
    ++counts[size_t(level - 1)];
    if (leaf < 0) leaf = level - 1;
    if (leaf != level - 1) regular = false;
  }
  void close(int level) {
    const size_t d = size_t(level - 1);
    if (lengths.size() <= d) lengths.resize(d + 1, -1);
    if (lengths[d] < 0) lengths[d] = counts[d];
    if (lengths[d] != counts[d]) regular = false;
  }
};

// The array at t[i] == '[', when it holds numbers and arrays of them alone: its numbers
// appended to out, i moved past its ']', deepest raised to its innermost array's depth (the
// array itself at depth + 1). False otherwise, or once deeper than most. With nesting, its
// arrays' lengths are followed too.
bool read_numbers(std::string_view t, size_t& i, int depth, int most, int& deepest, std::vector<float>& out,
                  Nesting* nesting = nullptr) {
  enum class Want { value, value_or_close, comma_or_close };
  size_t j = i + 1;
  int level = 1;
  deepest = std::max(deepest, depth + 1);
  if (nesting) nesting->open(level);
  Want want = Want::value_or_close;
  for (;;) {
    skip_space(t, j);
    if (j >= t.size()) return false;
    const char c = t[j];
    if (c == ']' && want != Want::value) {
      ++j;
      if (nesting) nesting->close(level);
      if (--level == 0) break;
      want = Want::comma_or_close;
    } else if (want == Want::comma_or_close) {
      if (c != ',') return false;
      ++j;
      want = Want::value;
    } else if (c == '[') {
      ++j;
      deepest = std::max(deepest, depth + ++level);
      if (depth + level > most) return false;
      if (nesting) nesting->open(level);
      want = Want::value_or_close;
    } else {
      float v = 0;
      if (!read_number(t, j, v)) return false;
      out.push_back(v);
      if (nesting) nesting->number(level);
      want = Want::comma_or_close;
    }
  }
  i = j;
  return true;
}

}  // namespace

JsonScan scan_json(std::string_view t, int most, JsonTarget target) {
  struct Frame {
    char kind;             // '{' or '['
    std::string_view key;  // an object's latest key
    bool expect_key;       // an object's next string is a key
    int64_t items;         // an array's objects so far
  };
  JsonScan s;
  std::vector<Frame> stack;
  int found = 0, inputs_keys = 0;
  for (size_t i = 0; i < t.size();) {
    const char c = t[i];
    if (c == '"') {
      const size_t end = string_end(t, i);
      if (end == std::string_view::npos) break;  // not JSON: nlohmann says so
      if (!stack.empty() && stack.back().kind == '{' && stack.back().expect_key) {
        stack.back().key = t.substr(i + 1, end - i - 2);
        stack.back().expect_key = false;
        if (stack.size() == 1 && (stack.back().key == "inputs" ||
                                  (target == JsonTarget::v1_instances && stack.back().key == "instances")))
          ++inputs_keys;
      }
      i = end;
    } else if (c == '{' || c == '[') {
      // {"inputs": [{..., "data": [...]}]}: the array of inputs[k].data, read when numbers alone.
      // KServe V1: {"instances": [...]} (or "inputs"), read when numbers alone.
      const bool v1 = target == JsonTarget::v1_instances;
      const bool data = !v1 && stack.size() == 3 && stack[0].kind == '{' && stack[0].key == "inputs" &&
                        stack[1].kind == '[' && stack[2].kind == '{' && stack[2].key == "data";
      const bool instances = v1 && stack.size() == 1 && stack[0].kind == '{' &&
                             (stack[0].key == "instances" || stack[0].key == "inputs");
      if (c == '[' && (data || instances)) {
        size_t end = i;
        std::vector<float> values;
        int deepest = s.deepest;
        Nesting nesting;
        if (read_numbers(t, end, int(stack.size()), most, deepest, values, instances ? &nesting : nullptr)) {
          ++found;
          s.deepest = deepest;
          s.begin = i;
          s.end = end;
          s.input = data ? stack[1].items - 1 : 0;
          s.values = std::move(values);
          if (instances && nesting.regular) s.shape = std::move(nesting.lengths);
          i = end;
          continue;
        }
      }
      if (c == '{' && !stack.empty() && stack.back().kind == '[') ++stack.back().items;
      stack.push_back({c, {}, c == '{', 0});
      s.deepest = std::max(s.deepest, int(stack.size()));
      if (s.deepest > most) break;
      ++i;
    } else if (c == '}' || c == ']') {
      if (!stack.empty()) stack.pop_back();
      ++i;
    } else {
      if (c == ',' && !stack.empty() && stack.back().kind == '{') stack.back().expect_key = true;
      ++i;
    }
  }
  // Two (two inputs, or "inputs" given twice, which nlohmann reads as the last) are left to
  // nlohmann and the checks after it.
  s.found = found == 1 && inputs_keys == 1 && s.deepest <= most;
  if (!s.found) s.values.clear(), s.shape.clear();
  return s;
}

}  // namespace vit::serve
