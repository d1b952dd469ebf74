// The numbers of an infer request's tensor, read from its JSON text directly. nlohmann's
// parser makes a value of each number (an RGB 224x224 image is 150,528 of them), and reading
// ViT-S/16's JSON requests took a third of the server's two cores (docs/serving.md). This
// scan finds inputs[i].data when it holds numbers alone, flat or in nested arrays, and reads
// them with std::from_chars to the floats nlohmann's values give: an integer through int64
// (uint64 when not negative), any other number through double, then to float. What it does
// not recognize it leaves to nlohmann, whose path then says what is wrong.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace vit::serve {

// Where the tensor is: the Open Inference Protocol's inputs[i].data, or KServe V1's
// top-level "instances" (or "inputs") array, whose nesting is its shape.
enum class JsonTarget { infer_data, v1_instances };

struct JsonScan {
  // The deepest nesting of arrays and objects (strings skipped); the scan stops once it is
  // past `most`.
  int deepest = 0;
  // found: exactly one inputs[i].data that holds numbers alone, at text[begin, end) (from its
  // '[' to its ']'), its numbers in row-major order in values.
  bool found = false;
  size_t begin = 0, end = 0;
  int64_t input = 0;  // its i
  std::vector<float> values;
  // v1_instances: the array's length at each depth, when it is nested regularly (every array
  // at a depth as long as the others, numbers at the deepest only); empty otherwise.
  std::vector<int64_t> shape;
};

JsonScan scan_json(std::string_view text, int most, JsonTarget target = JsonTarget::infer_data);

// Whether a number of the request is an FP32 value: it rounds to a finite float. The shortest
// text of FLT_MAX ("3.4028235e38", as numpy, Java and Go print it) is a little above FLT_MAX
// as a double, and was refused; only from FLT_MAX + half its ulp (2^128 - 2^103) up does it
// round to infinity.
inline bool fits_fp32(double v) {
  return v < 0x1.ffffffp127 && v > -0x1.ffffffp127;
}

}  // namespace vit::serve
