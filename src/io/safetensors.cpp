#include "io/safetensors.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "core/check.h"
#include "core/file.h"
#include "core/json_parse.h"
#include "core/signature.h"

namespace vit {

using json = nlohmann::json;

namespace {
constexpr uint64_t kMaxHeader = 100ull << 20;  // the reference implementation's limit

struct DTypeName {
  DType d;
  const char* name;
  size_t size;
};
constexpr DTypeName kDTypes[] = {{DType::F32, "F32", 4}, {DType::F16, "F16", 2},   {DType::BF16, "BF16", 2},
                                 {DType::F64, "F64", 8}, {DType::I64, "I64", 8},   {DType::I32, "I32", 4},
                                 {DType::U8, "U8", 1},   {DType::BOOL, "BOOL", 1}, {DType::I8, "I8", 1}};

// The header's length from the file's first 8 bytes, checked against the file's size.
uint64_t header_length(std::string_view first, uint64_t file_size, const std::string& path) {
  VIT_CHECK(first.size() >= 8, path, ": not a safetensors file (", file_size,
            " bytes, too short for a header)");
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; --i) hlen = (hlen << 8) | uint8_t(first[i]);
  // A length that cannot be: PyTorch's torch.save writes a zip archive (a pickle before 1.6),
  // said as what it is.
  const bool pickle =
      first.substr(0, 4) == std::string_view("PK\x03\x04", 4) || first.substr(0, 3) == "\x80\x02\x8a";
  VIT_CHECK(!pickle || (hlen <= kMaxHeader && hlen <= file_size - 8), path,
            ": a PyTorch pickle (torch.save's .pth, .bin or .pth.tar), not safetensors: vitcpp reads "
            "safetensors. Convert it: safetensors.torch.save_file(sd, \"model.safetensors\") with sd = "
            "torch.load(path), or torch.load(path)[\"state_dict\"] for timm train.py's checkpoints "
            "(*.pth.tar; \"state_dict_ema\" holds their EMA)");
  // So does an ONNX model (vit export's): a protobuf ModelProto opens with ir_version (field 1,
  // a varint: 0x08 n) and producer_name (field 2: 0x12).
  const bool onnx = (first[0] == '\x08' && first[2] == '\x12') ||
                    (path.size() > 5 && path.compare(path.size() - 5, 5, ".onnx") == 0);
  VIT_CHECK(!onnx || (hlen <= kMaxHeader && hlen <= file_size - 8), path,
            ": an ONNX model, not safetensors: vitcpp reads safetensors checkpoints (give the checkpoint it "
            "was exported from; ONNX Runtime runs this file)");
  // And a JSON file (a checkpoint folder's config.json given for its weights).
  const size_t text = first.find_first_not_of(" \t\r\n");
  const bool json_text = text != std::string_view::npos && (first[text] == '{' || first[text] == '[');
  VIT_CHECK(!json_text || (hlen <= kMaxHeader && hlen <= file_size - 8), path,
            ": a JSON file, not safetensors: give the checkpoint's folder or its .safetensors file");
  // And an image (a predict command line with the checkpoint and image swapped).
  const std::string_view image = image_signature(first);
  VIT_CHECK(image.empty() || (hlen <= kMaxHeader && hlen <= file_size - 8), path, ": a ", image,
            " image, not a checkpoint (a safetensors file)");
  VIT_CHECK(hlen <= kMaxHeader, path,
            ": not a safetensors file (its first 8 bytes, read as the header's length, say ", hlen,
            " bytes: over 100 MiB)");
  VIT_CHECK(hlen <= file_size - 8, path, ": header length ", hlen, " runs past the end of the file (",
            file_size, " bytes): truncated?");
  return hlen;
}

json parse_header(std::string_view text, const std::string& path) {
  json h;
  try {
    h = parse_json(text, path + ": header");
  } catch (const json::exception& e) {
    throw Error(path + ": header is not valid JSON: " + e.what());
  }
  VIT_CHECK(h.is_object(), path, ": header is not a JSON object");
  return h;
}

std::map<std::string, std::string> metadata_of(const json& v, const std::string& path) {
  VIT_CHECK(v.is_object(), path, ": __metadata__ must be an object");
  std::map<std::string, std::string> out;
  for (auto& [k, val] : v.items()) {
    VIT_CHECK(val.is_string(), path, ": __metadata__ value of '", k, "' is not a string");
    out[k] = val.get<std::string>();
  }
  return out;
}
}  // namespace

std::map<std::string, std::string> read_safetensors_metadata(const std::string& path) {
  check_not_directory(path);
  std::ifstream f(path, std::ios::binary);
  VIT_CHECK(f, path, ": cannot open for reading (", std::strerror(errno), ")");
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);
  VIT_CHECK(!ec, path, ": cannot determine the file size (", ec.message(), ")");
  std::string first(8, '\0');
  first.resize(size_t(f.read(first.data(), 8).gcount()));
  const uint64_t hlen = header_length(first, size, path);
  std::string text(hlen, '\0');
  VIT_CHECK(f.read(text.data(), std::streamsize(hlen)), path, ": read failed");
  const json h = parse_header(text, path);
  return h.contains("__metadata__") ? metadata_of(h["__metadata__"], path)
                                    : std::map<std::string, std::string>{};
}

const char* dtype_name(DType d) {
  for (auto& e : kDTypes)
    if (e.d == d) return e.name;
  return "?";
}

size_t dtype_size(DType d) {
  for (auto& e : kDTypes)
    if (e.d == d) return e.size;
  return 0;
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalize
      exp = 127 - 15 + 1;
      while (!(mant & 0x400)) {
        mant <<= 1;
        --exp;
      }
      bits = sign | (exp << 23) | ((mant & 0x3ff) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000 | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

float bf16_to_f32(uint16_t h) {
  uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

SafeTensors SafeTensors::open(const std::string& path, bool populate) {
  if (auto m = map_file(path, populate)) {
    SafeTensors st = parse_view(m, m->data(), m->size(), path);
    st.mapped_ = true;
    return st;
  }
  return parse(read_file_bytes(path), path);
}

SafeTensors SafeTensors::parse(std::vector<char> bytes, const std::string& path) {
  auto owned = std::make_shared<const std::vector<char>>(std::move(bytes));
  return parse_view(owned, owned->data(), owned->size(), path);
}

SafeTensors SafeTensors::parse_view(std::shared_ptr<const void> owner, const char* data, size_t size,
                                    const std::string& path) {
  const std::string_view bytes(data, size);
  SafeTensors st;
  st.path_ = path;
  const uint64_t hlen = header_length(bytes, bytes.size(), path);
  const json h = parse_header(bytes.substr(8, hlen), path);
  st.data_start_ = 8 + hlen;
  const size_t data_size = bytes.size() - st.data_start_;
  for (auto& [name, v] : h.items()) {
    if (name == "__metadata__") {
      st.metadata_ = metadata_of(v, path);
      continue;
    }
    VIT_CHECK(v.is_object() && v.contains("dtype") && v.contains("shape") && v.contains("data_offsets"), path,
              ": tensor '", name, "' needs dtype, shape and data_offsets");
    TensorInfo t;
    t.name = name;
    VIT_CHECK(v["dtype"].is_string(), path, ": tensor '", name, "': dtype is not a string");
    const std::string dt = v["dtype"].get<std::string>();
    auto it = std::find_if(std::begin(kDTypes), std::end(kDTypes), [&](auto& e) { return dt == e.name; });
    VIT_CHECK(it != std::end(kDTypes), path, ": tensor '", name, "' has unsupported dtype '", dt, "'");
    t.dtype = it->d;
    const auto& shape = v["shape"];
    VIT_CHECK(shape.is_array(), path, ": tensor '", name, "': shape is not an array");
    uint64_t count = 1;
    for (auto& d : shape) {
      VIT_CHECK(d.is_number_unsigned(), path, ": tensor '", name,
                "': shape holds a non-integer or negative value");
      uint64_t dim = d.get<uint64_t>();
      VIT_CHECK(dim == 0 || count <= (uint64_t(1) << 62) / dim, path, ": tensor '", name,
                "': shape overflows");
      count *= dim;
      t.shape.push_back(int64_t(dim));
    }
    const auto& off = v["data_offsets"];
    VIT_CHECK(off.is_array() && off.size() == 2 && off[0].is_number_unsigned() && off[1].is_number_unsigned(),
              path, ": tensor '", name, "': data_offsets must be two non-negative integers");
    t.begin = off[0].get<uint64_t>();
    t.end = off[1].get<uint64_t>();
    VIT_CHECK(t.begin <= t.end, path, ": tensor '", name, "': data_offsets [", t.begin, ", ", t.end,
              "] are reversed (the start comes first)");
    VIT_CHECK(t.end <= data_size, path, ": tensor '", name, "': data_offsets [", t.begin, ", ", t.end,
              "] lie outside the data section (", data_size, " bytes): truncated file?");
    VIT_CHECK(t.end - t.begin == count * it->size, path, ": tensor '", name, "': ", t.end - t.begin,
              " bytes do not match dtype ", dt, " x shape ", shape_str(t.shape), " (", count * it->size,
              " bytes)");
    st.tensors_.push_back(std::move(t));
  }
  // Sorted by offset, the tensors must not overlap. Empty ones hold no bytes: safetensors'
  // own writer gives them the offset where the next tensor begins (vit-pytorch's cls_token
  // [1, 0, dim]), which may sort after that tensor.
  std::vector<const TensorInfo*> order;
  for (auto& t : st.tensors_)
    if (t.begin != t.end) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < order.size(); ++i)
    VIT_CHECK(order[i]->begin >= order[i - 1]->end, path, ": tensors '", order[i - 1]->name, "' and '",
              order[i]->name, "' overlap");
  st.owner_ = std::move(owner);
  st.bytes_ = bytes;
  return st;
}

const TensorInfo* SafeTensors::find(const std::string& name) const {
  for (auto& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

void SafeTensors::rename(const std::function<std::optional<std::string>(const std::string&)>& name) {
  std::set<std::string> seen;
  std::vector<TensorInfo> kept;
  for (auto& t : tensors_) {
    std::optional<std::string> to = name(t.name);
    if (!to) continue;
    VIT_CHECK(seen.insert(*to).second, path_, ": two tensors are named '", *to, "' once renamed (one was '",
              t.name, "')");
    kept.push_back(t);
    kept.back().name = std::move(*to);
  }
  tensors_ = std::move(kept);
}

const TensorInfo& SafeTensors::at(const std::string& name) const {
  const TensorInfo* t = find(name);
  VIT_CHECK(t, path_, ": no tensor named '", name, "'");
  return *t;
}

void SafeTensors::copy_float(const std::string& name, float* out) const {
  const TensorInfo& t = at(name);
  const char* p = bytes_.data() + data_start_ + t.begin;
  const size_t n = (t.end - t.begin) / dtype_size(t.dtype);
  if (t.dtype == DType::F32) {  // the common case, at memcpy's speed (n = 0: out may be null)
    if (n > 0) std::memcpy(out, p, 4 * n);
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    switch (t.dtype) {
      case DType::F64: {
        double d;
        std::memcpy(&d, p + 8 * i, 8);
        out[i] = float(d);
        break;
      }
      case DType::F16: {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = f16_to_f32(h);
        break;
      }
      case DType::BF16: {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = bf16_to_f32(h);
        break;
      }
      default:
        throw Error(path_ + ": tensor '" + name + "' has dtype " + dtype_name(t.dtype) +
                    ", expected a float type");
    }
  }
}

std::vector<float> SafeTensors::to_float(const std::string& name) const {
  const TensorInfo& t = at(name);
  std::vector<float> out(numel(t.shape));
  copy_float(name, out.data());
  return out;
}

void SafeTensors::release(const std::string& name) const {
  if (!mapped_) return;
  const TensorInfo& t = at(name);
  const uintptr_t page = uintptr_t(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = uintptr_t(bytes_.data() + data_start_ + t.begin), end = begin + (t.end - t.begin);
  const uintptr_t first = (begin + page - 1) / page * page, last = end / page * page;
  if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

void SafeTensors::populate(const std::string& name) const {
  if (!mapped_) return;
  const TensorInfo& t = at(name);
  const uintptr_t page = uintptr_t(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = uintptr_t(bytes_.data() + data_start_ + t.begin) / page * page;
  const uintptr_t end = uintptr_t(bytes_.data() + data_start_ + t.end);
  // Every page the tensor touches, the shared ones at its ends too. An error (EINVAL before
  // Linux 5.14, EIO) leaves the pages to the reads, whose faults report what is wrong.
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_READ);
}

std::vector<int64_t> SafeTensors::to_int64(const std::string& name) const {
  const TensorInfo& t = at(name);
  const char* p = bytes_.data() + data_start_ + t.begin;
  std::vector<int64_t> out(numel(t.shape));
  for (size_t i = 0; i < out.size(); ++i) {
    switch (t.dtype) {
      case DType::I64: std::memcpy(&out[i], p + 8 * i, 8); break;
      case DType::I32: {
        int32_t v;
        std::memcpy(&v, p + 4 * i, 4);
        out[i] = v;
        break;
      }
      case DType::U8:
      case DType::BOOL: out[i] = uint8_t(p[i]); break;
      case DType::I8: out[i] = int8_t(p[i]); break;
      default:
        throw Error(path_ + ": tensor '" + name + "' has dtype " + dtype_name(t.dtype) +
                    ", expected an integer type");
    }
  }
  return out;
}

std::span<const int8_t> SafeTensors::view_i8(const std::string& name) const {
  const TensorInfo& t = at(name);
  VIT_CHECK(t.dtype == DType::I8, path_, ": tensor '", name, "' has dtype ", dtype_name(t.dtype),
            ", expected I8");
  return {reinterpret_cast<const int8_t*>(bytes_.data() + data_start_ + t.begin), size_t(numel(t.shape))};
}

std::vector<uint8_t> SafeTensors::to_u8(const std::string& name) const {
  auto v = to_int64(name);
  return std::vector<uint8_t>(v.begin(), v.end());
}

std::string safetensors_prefix(const std::string& path, const std::vector<TensorOut>& tensors,
                               const std::map<std::string, std::string>& metadata) {
  json h = json::object();
  if (!metadata.empty()) h["__metadata__"] = metadata;
  size_t off = 0;
  for (auto& t : tensors) {
    VIT_CHECK(t.dtype == DType::F32 || t.dtype == DType::I64 || t.dtype == DType::U8 || t.dtype == DType::I8,
              path, ": cannot write tensor '", t.name, "' as ", dtype_name(t.dtype));
    const size_t n = size_t(numel(t.shape)) * dtype_size(t.dtype);
    h[t.name] = {{"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {off, off + n}}};
    off += n;
  }
  std::string header = h.dump();
  header.append((8 - (8 + header.size()) % 8) % 8, ' ');  // align the data section to 8 bytes
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[size_t(i)] = char((uint64_t(header.size()) >> (8 * i)) & 0xff);
  return out + header;
}

void write_safetensors(const std::string& path, const std::vector<TensorOut>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  const std::string prefix = safetensors_prefix(path, tensors, metadata);
  std::vector<std::string_view> parts = {prefix};
  for (auto& t : tensors)
    parts.emplace_back(static_cast<const char*>(t.data), size_t(numel(t.shape)) * dtype_size(t.dtype));
  write_file_atomic(path, parts);
}

}  // namespace vit
