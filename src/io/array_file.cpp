#include "io/array_file.h"

#include <string_view>

#include "core/check.h"
#include "io/safetensors.h"

namespace vit {

namespace {
bool ends_with(const std::string& s, std::string_view end) {
  return s.size() >= end.size() && s.compare(s.size() - end.size(), end.size(), end) == 0;
}
// The path, once it is known to name a file of a format written here.
const std::string& checked(const std::string& path) {
  check_not_directory(path);
  VIT_CHECK(ends_with(path, ".npy") || ends_with(path, ".safetensors"), path,
            ": give a .safetensors or .npy file name");
  return path;
}
}  // namespace

std::string npy_header(const Shape& shape) {
  std::string dims;  // Python's tuple: (N, D), and (N,) for one dimension
  for (size_t i = 0; i < shape.size(); ++i) dims += (i ? ", " : "") + std::to_string(shape[i]);
  if (shape.size() == 1) dims += ",";
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  // Magic, version, a 2-byte length, then the dict padded with spaces and ended by a newline
  // so that the data starts at a multiple of 64 bytes (NumPy's own alignment).
  const size_t fixed = 10;
  dict.append((64 - (fixed + dict.size() + 1) % 64) % 64, ' ');
  dict += '\n';
  VIT_CHECK(dict.size() < 65536, "npy: shape too long for a version 1.0 header");
  std::string out = "\x93NUMPY";
  out += char(1);
  out += char(0);
  out += char(dict.size() & 0xff);
  out += char(dict.size() >> 8);
  return out + dict;
}

ArrayFileWriter::ArrayFileWriter(const std::string& path, const std::string& name, const Shape& shape,
                                 const std::map<std::string, std::string>& metadata)
    : path_(path), file_(checked(path)), left_(numel(shape)) {
  file_.write(ends_with(path, ".npy")
                  ? npy_header(shape)
                  : safetensors_prefix(path, {{name, shape, DType::F32, nullptr}}, metadata));
}

void ArrayFileWriter::append(const float* data, int64_t n) {
  VIT_CHECK(n <= left_, path_, ": more values than the array's shape holds");
  file_.write(std::string_view(reinterpret_cast<const char*>(data), size_t(n) * sizeof(float)));
  left_ -= n;
}

void ArrayFileWriter::finish() {
  VIT_CHECK(left_ == 0, path_, ": ", left_, " values short of the array's shape");
  file_.commit();
}

}  // namespace vit
