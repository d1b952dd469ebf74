// `vit predict --tensor FILE:NAME`: the spec (the input's first line) parsed, then the rest
// of the input read as the safetensors file it names and its tensor taken as a batch for a
// [1, 4, 4] model (the shape check, the conversion to float).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "io/tensor_input.h"
#include "vit/core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const uint8_t* nl = std::find(data, data + size, uint8_t('\n'));
  const std::string spec(data, nl);
  try {
    const vit::TensorSpec s = vit::parse_tensor_spec(spec);
    const uint8_t* body = nl == data + size ? nl : nl + 1;
    const vit::SafeTensors st = vit::SafeTensors::parse(std::vector<char>(body, data + size), s.file);
    int64_t rows = 0;
    const std::vector<float> x = vit::read_tensor_input(st, s.name, 1, 4, 4, &rows);
    if (rows < 1 || x.size() != size_t(rows) * 16) __builtin_trap();  // the contract
  } catch (const vit::Error&) {
  }
  return 0;
}
