// One float32 array written as it is produced, so that it need not fit in memory (every
// token's features of a large image set): to `.safetensors` (one tensor, with metadata) or
// `.npy` (NumPy's format 1.0, what numpy.load reads), by the file's extension. Written
// atomically (AtomicFile): an error or a crash leaves no partial file under the name.
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include "core/file.h"
#include "core/tensor.h"

namespace vit {

class ArrayFileWriter {
 public:
  // name: the tensor's name in a .safetensors file; metadata: its __metadata__ (.npy has
  // neither). Any other extension is an error.
  ArrayFileWriter(const std::string& path, const std::string& name, const Shape& shape,
                  const std::map<std::string, std::string>& metadata = {});
  void append(const float* data, int64_t n);  // the next n values, row-major
  void finish();                              // throws unless every value was appended

 private:
  std::string path_;
  AtomicFile file_;
  int64_t left_;
};

// The NumPy 1.0 header of a little-endian float32 C-order array of that shape.
std::string npy_header(const Shape& shape);

}  // namespace vit
