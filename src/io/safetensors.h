// safetensors files (https://github.com/huggingface/safetensors): an 8-byte little-endian
// header length, a JSON header {name: {dtype, shape, data_offsets}, "__metadata__": {..}},
// then the tensor bytes. Reading validates everything before any tensor is used: header
// length, JSON, dtypes, offsets inside the file, no overlaps, sizes equal dtype x shape.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"

namespace vit {

enum class DType { F32, F16, BF16, F64, I64, I32, U8, BOOL, I8 };
const char* dtype_name(DType d);
size_t dtype_size(DType d);

struct TensorInfo {
  std::string name;
  DType dtype;
  Shape shape;
  size_t begin = 0, end = 0;  // byte offsets into the data section
};

class SafeTensors {
 public:
  // Maps (or, where mapping fails, reads) and validates the whole file; errors name the file
  // and the problem. Mapped read-only: the tensors are copied out of the page cache once,
  // without a second buffer (a ViT-B/16 checkpoint is 346 MB). populate false: the pages are
  // read as they are touched (the header alone, for a config).
  static SafeTensors open(const std::string& path, bool populate = true);
  static SafeTensors parse(std::vector<char> bytes, const std::string& path_for_errors);

  const std::string& path() const { return path_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const TensorInfo* find(const std::string& name) const;
  // Renames every tensor name(t) (a state dict's keys cleaned), and leaves out those it gives
  // no name; two names made one are an error.
  void rename(const std::function<std::optional<std::string>(const std::string&)>& name);
  const TensorInfo& at(const std::string& name) const;
  // Converted copies (F16/BF16/F64 widen or narrow to float; integer kinds to int64/uint8).
  std::vector<float> to_float(const std::string& name) const;
  void copy_float(const std::string& name, float* out) const;
  std::vector<int64_t> to_int64(const std::string& name) const;
  // An I8 tensor's values where they lie in the file, without a copy (vit quantize's weights).
  std::span<const int8_t> view_i8(const std::string& name) const;
  // Gives back the memory of a mapped file's pages that lie wholly inside the tensor's bytes,
  // once they are copied out: a load then holds the file and the model together one tensor at
  // a time, not whole (a resume held its whole state beside its arenas). A later read
  // of the tensor maps its pages again from the file. Nothing for a file read into memory.
  void release(const std::string& name) const;
  // Maps in the pages of a tensor of a file opened without populate, all at once
  // (MADV_POPULATE_READ), before it is read: a load that reads and releases tensor by tensor
  // is then as fast as one that mapped the whole file in, without holding it. Nothing where
  // the kernel cannot (before Linux 5.14; qemu-user): the reads fault the pages in.
  void populate(const std::string& name) const;
  std::vector<uint8_t> to_u8(const std::string& name) const;

 private:
  static SafeTensors parse_view(std::shared_ptr<const void> owner, const char* data, size_t size,
                                const std::string& path);

  std::string path_;
  std::shared_ptr<const void> owner_;  // keeps bytes_ alive: a vector or a file mapping
  bool mapped_ = false;                // owner_ is a file mapping
  std::string_view bytes_;
  size_t data_start_ = 0;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

// The header's __metadata__ alone, without reading the tensors (validated as open does
// the header): for a look at a large file, such as a training state's position.
std::map<std::string, std::string> read_safetensors_metadata(const std::string& path);

// One tensor to write: a name, a shape and F32, I64, U8 or I8 data.
struct TensorOut {
  std::string name;
  Shape shape;
  DType dtype = DType::F32;
  const void* data = nullptr;
};

// Writes atomically (temporary file, fsync, rename); tensors are stored in the given order.
void write_safetensors(const std::string& path, const std::vector<TensorOut>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// What precedes the tensors' bytes in such a file (the header's length and the header, the
// data pointers unused): for writers that stream the data after it (ArrayFileWriter).
std::string safetensors_prefix(const std::string& path, const std::vector<TensorOut>& tensors,
                               const std::map<std::string, std::string>& metadata = {});

// Half-precision conversions (round to nearest even when narrowing).
float f16_to_f32(uint16_t h);
float bf16_to_f32(uint16_t h);

}  // namespace vit
