// safetensors: round trip, half-precision reads, and a corpus of malformed files, each of
// which must give a clear error (never a crash).
#include <sys/mman.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/file.h"
#include "io/safetensors.h"
#include "io/tensor_input.h"
#include "support/check.h"
#include "support/temp_dir.h"

namespace vit {

namespace {
namespace fs = std::filesystem;

// A file from a raw header string and a data section.
std::vector<char> make_file(const std::string& header, size_t data_bytes) {
  std::vector<char> out(8 + header.size() + data_bytes, 0);
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = char((n >> (8 * i)) & 0xff);
  std::memcpy(out.data() + 8, header.data(), header.size());
  return out;
}

std::string parse_error(std::vector<char> bytes) {
  try {
    SafeTensors::parse(std::move(bytes), "bad.safetensors");
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}
}  // namespace

TEST(SafeTensors, RoundTripF32I64U8AndMetadata) {
  std::vector<float> a = {1.5f, -2.f, 3.25f, 0.f, 1e-30f, 7.f};
  std::vector<int64_t> b = {-1, 0, 1LL << 40};
  std::vector<uint8_t> c = {0, 1, 255};
  test::TempDir dir("st");
  const std::string p = dir / "rt.safetensors";
  write_safetensors(p,
                    {{"a", {2, 3}, DType::F32, a.data()},
                     {"b", {3}, DType::I64, b.data()},
                     {"c", {3}, DType::U8, c.data()}},
                    {{"k", "v"}});
  SafeTensors st = SafeTensors::open(p);
  EXPECT_EQ(st.at("a").shape, (Shape{2, 3}));
  EXPECT_EQ(st.to_float("a"), a);
  EXPECT_EQ(st.to_int64("b"), b);
  EXPECT_EQ(st.to_u8("c"), c);
  EXPECT_EQ(st.metadata().at("k"), "v");
  // The data section starts 8-byte aligned, as the format recommends.
  auto bytes = read_file_bytes(p);
  uint64_t hlen = 0;
  std::memcpy(&hlen, bytes.data(), 8);
  EXPECT_EQ((8 + hlen) % 8, 0u);
  // No temporary file is left behind.
  int files = 0;
  for (auto& e : fs::directory_iterator(fs::path(p).parent_path()))
    files += e.path().filename() == "rt.safetensors" ? 0 : 1;
  EXPECT_EQ(files, 0);
}

TEST(SafeTensors, ReadsF16AndBF16) {
  // 1.0, -2.0, 0.5, 65504 (max half), a subnormal half (2^-24)
  const uint16_t f16[] = {0x3C00, 0xC000, 0x3800, 0x7BFF, 0x0001};
  // 1.0, -2.0, 0.5, 3.0e38-ish, 2^-126
  const uint16_t bf16[] = {0x3F80, 0xC000, 0x3F00, 0x7F61, 0x0080};
  std::string header = R"({"h":{"dtype":"F16","shape":[5],"data_offsets":[0,10]},)"
                       R"("b":{"dtype":"BF16","shape":[5],"data_offsets":[10,20]}})";
  auto bytes = make_file(header, 20);
  std::memcpy(bytes.data() + 8 + header.size(), f16, 10);
  std::memcpy(bytes.data() + 8 + header.size() + 10, bf16, 10);
  SafeTensors st = SafeTensors::parse(bytes, "half.safetensors");
  auto h = st.to_float("h"), b = st.to_float("b");
  EXPECT_EQ(h[0], 1.f);
  EXPECT_EQ(h[1], -2.f);
  EXPECT_EQ(h[2], 0.5f);
  EXPECT_EQ(h[3], 65504.f);
  EXPECT_EQ(h[4], std::ldexp(1.f, -24));
  EXPECT_EQ(b[0], 1.f);
  EXPECT_EQ(b[1], -2.f);
  EXPECT_EQ(b[2], 0.5f);
  EXPECT_NEAR(b[3], 2.99e38f, 0.01e38f);
  EXPECT_EQ(b[4], std::ldexp(1.f, -126));
}

// F32 tensors are copied out whole (one memcpy): one that starts at an odd byte (after a
// 1-byte U8 tensor) reads the same values, and an empty one (shape [0], whose vector may
// have no storage) reads as empty, which UBSan checks in the sanitizer run (a null
// destination must not reach memcpy, even for 0 bytes).
// Empty tensors hold no bytes wherever their offsets point: at the end, or where the next
// tensor begins, as safetensors' writer puts them (vit-pytorch's cls_token [1, 0, dim] with
// pool='mean'; "overlap" was the error before).
TEST(SafeTensors, ReadsF32AtAnyOffsetAndEmptyTensors) {
  const float v[] = {1.5f, -2.f, 3.25f};
  std::string header = R"({"u":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                       R"("c":{"dtype":"F32","shape":[1,0,4],"data_offsets":[1,1]},)"
                       R"("a":{"dtype":"U8","shape":[0],"data_offsets":[0,0]},)"
                       R"("f":{"dtype":"F32","shape":[3],"data_offsets":[1,13]},)"
                       R"("e":{"dtype":"F32","shape":[0],"data_offsets":[13,13]},)"
                       R"("h":{"dtype":"F16","shape":[2,0],"data_offsets":[13,13]}})";
  auto bytes = make_file(header, 13);
  std::memcpy(bytes.data() + 8 + header.size() + 1, v, 12);
  SafeTensors st = SafeTensors::parse(bytes, "offsets.safetensors");
  EXPECT_EQ(st.to_float("f"), std::vector<float>(v, v + 3));
  EXPECT_TRUE(st.to_float("e").empty());
  EXPECT_TRUE(st.to_float("h").empty());
  EXPECT_TRUE(st.to_float("c").empty());
  EXPECT_EQ(st.at("c").shape, (Shape{1, 0, 4}));
}

struct Bad {
  const char* what;
  std::function<std::vector<char>()> make;
  const char* expect;  // a piece of the message
};

class MalformedSafeTensors : public ::testing::TestWithParam<Bad> {};

TEST_P(MalformedSafeTensors, GivesAClearError) {
  const Bad& b = GetParam();
  const std::string msg = parse_error(b.make());
  EXPECT_NE(msg.find(b.expect), std::string::npos) << b.what << ": got \"" << msg << "\"";
  EXPECT_NE(msg.find("bad.safetensors"), std::string::npos) << "the message must name the file: " << msg;
  // The same bytes in a file, opened the way checkpoints are (mapped; read when empty).
  test::TempDir dir("bad_st");
  const std::string path = dir / "bad.safetensors";
  const std::vector<char> bytes = b.make();
  write_file_atomic(path, std::string_view(bytes.data(), bytes.size()));
  std::string from_file = "(no error)";
  try {
    SafeTensors::open(path);
  } catch (const Error& e) {
    from_file = e.what();
  }
  EXPECT_NE(from_file.find(b.expect), std::string::npos)
      << b.what << " from a file: got \"" << from_file << "\"";
  EXPECT_NE(from_file.find(path), std::string::npos) << from_file;
}

const std::string kGood = R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";

INSTANTIATE_TEST_SUITE_P(
    Corpus, MalformedSafeTensors,
    ::testing::Values(
        Bad{"empty", [] { return std::vector<char>(); }, "too short"},
        Bad{"truncated header",
            [] {
              auto f = make_file(kGood, 8);
              f.resize(20);
              return f;
            },
            "past the end"},
        Bad{"header length past the end",
            [] {
              auto f = make_file(kGood, 8);
              f[0] = char(0xff);
              f[1] = char(0x7f);
              return f;
            },
            "past the end"},
        Bad{"huge header length",
            [] {
              auto f = make_file(kGood, 8);
              f[6] = 1;
              return f;
            },
            "not a safetensors file (its first 8 bytes, read as the header's length, say "},
        Bad{"a PNG image",  // vit predict IMAGE --checkpoint CKPT swapped: "header length 727905341920923785"
            [] {
              std::string f = "\x89PNG\r\n\x1a\n";
              f += std::string(400, 'z');
              return std::vector<char>(f.begin(), f.end());
            },
            "a PNG image, not a checkpoint (a safetensors file)"},
        Bad{"torch.save's zip",
            [] {
              std::string f = "PK\x03\x04";
              f += std::string(400, 'z');
              return std::vector<char>(f.begin(), f.end());
            },
            "a PyTorch pickle (torch.save's .pth, .bin or .pth.tar), not safetensors: vitcpp reads "
            "safetensors. "
            "Convert it: safetensors.torch.save_file(sd, \"model.safetensors\") with sd = torch.load(path), "
            "or "
            "torch.load(path)[\"state_dict\"] for timm train.py's checkpoints"},
        Bad{"an ONNX model",  // ir_version 8, then producer_name "pytorch", as torch.onnx writes
            [] {
              std::string f =
                  "\x08\x08\x12\x07pytorch\x1a\x06"
                  "1.13.1";
              f += std::string(400, 'z');
              return std::vector<char>(f.begin(), f.end());
            },
            "an ONNX model, not safetensors"},
        Bad{"a JSON file",  // a checkpoint folder's config.json, given for its weights
            [] {
              std::string f = "{\n  \"architecture\": \"vit_small_patch16_224\",\n  \"num_classes\": 10\n}\n";
              return std::vector<char>(f.begin(), f.end());
            },
            "a JSON file, not safetensors: give the checkpoint's folder or its .safetensors file"},
        Bad{"truncated data",
            [] {
              auto f = make_file(kGood, 8);
              f.resize(f.size() - 3);
              return f;
            },
            "outside the data section"},
        Bad{"not JSON", [] { return make_file("{\"t\": [1, 2", 0); }, "not valid JSON"},
        Bad{"not an object", [] { return make_file("[1, 2]", 0); }, "not a JSON object"},
        Bad{"unknown dtype",
            [] { return make_file(R"({"t":{"dtype":"F8","shape":[2],"data_offsets":[0,2]}})", 2); },
            "unsupported dtype 'F8'"},
        Bad{"size mismatch",
            [] { return make_file(R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8); },
            "do not match"},
        Bad{"offsets reversed",
            [] { return make_file(R"({"t":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", 8); },
            "data_offsets [8, 0] are reversed (the start comes first)"},
        Bad{"negative shape",
            [] { return make_file(R"({"t":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8); },
            "negative"},
        Bad{"missing field", [] { return make_file(R"({"t":{"dtype":"F32","shape":[2]}})", 8); },
            "needs dtype, shape and data_offsets"},
        Bad{"overlap",
            [] {
              return make_file(
                  R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                  12);
            },
            "overlap"},
        Bad{"shape overflow",
            [] {
              return make_file(
                  R"({"t":{"dtype":"F32","shape":[4294967296,4294967296,4],"data_offsets":[0,8]}})", 8);
            },
            "overflows"},
        Bad{"metadata not strings", [] { return make_file(R"({"__metadata__":{"a":1}})", 0); },
            "not a string"}),
    [](const auto& info) {
      std::string n = info.param.what;
      for (auto& c : n)
        if (!isalnum(static_cast<unsigned char>(c))) c = '_';
      return n;
    });

TEST(SafeTensors, AnOpenFileKeepsItsTensorsWhenReplacedOrRemoved) {
  // open() maps the file: writers replace files by rename, and a removed file stays readable
  // while mapped, so what was opened is what is read.
  test::TempDir dir("st_map");
  const std::string p = dir / "w.safetensors";
  std::vector<float> a(4096), b(4096);
  for (size_t i = 0; i < a.size(); ++i) a[i] = float(i), b[i] = -float(i);
  write_safetensors(p, {{"w", {64, 64}, DType::F32, a.data()}});
  SafeTensors st = SafeTensors::open(p);
  write_safetensors(p, {{"w", {64, 64}, DType::F32, b.data()}});  // replaced by rename
  EXPECT_EQ(st.to_float("w"), a);
  SafeTensors copy = st;  // copies share the mapping
  fs::remove(p);
  EXPECT_EQ(copy.to_float("w"), a);
}

// The process's resident pages of mapped files, in KiB (/proc/self/status' RssFile, and
// RssShmem where the file lies on tmpfs, as /tmp on Debian 13 and in many containers).
int64_t rss_file_kib() {
  std::ifstream f("/proc/self/status");
  std::string key;
  int64_t kib = 0, total = -1;
  for (std::string line; std::getline(f, line);)
    if (std::istringstream(line) >> key >> kib && (key == "RssFile:" || key == "RssShmem:"))
      total = std::max<int64_t>(total, 0) + kib;
  return total;
}

// release() gives a copied tensor's pages back (a load holds the file and the model together
// one tensor at a time: ViT-L's resume peaked at 6.82 GB against 4.94 fresh), and a later
// read maps them again from the file. Open with populate false: nothing is read in.
TEST(SafeTensors, AReleasedTensorsPagesGoAndComeBackOnRead) {
  test::TempDir dir("st_release");
  const std::string p = dir / "w.safetensors";
  std::vector<float> a(size_t(16) << 20);  // 64 MiB
  for (size_t i = 0; i < a.size(); ++i) a[i] = float(i % 1000);
  write_safetensors(p, {{"w", {int64_t(a.size())}, DType::F32, a.data()}});
  const int64_t before = rss_file_kib();
  ASSERT_GE(before, 0) << "no RssFile in /proc/self/status";
  {  // qemu-user reads nothing in for MAP_POPULATE, and takes madvise as a hint it may drop:
     // the pages' count shows nothing there
    const auto probe = map_file(p);
    ASSERT_TRUE(probe);
    if (rss_file_kib() - before < 60 << 10) GTEST_SKIP() << "MAP_POPULATE reads nothing in here";
    const uintptr_t page = uintptr_t(::sysconf(_SC_PAGESIZE)), at = uintptr_t(probe->data());
    ::madvise(reinterpret_cast<void*>(at), probe->size() / page * page, MADV_DONTNEED);
    if (rss_file_kib() - before > 32 << 10) GTEST_SKIP() << "madvise(MADV_DONTNEED) gives nothing back here";
  }
  {
    const SafeTensors lazy = SafeTensors::open(p, /*populate=*/false);
    EXPECT_LT(rss_file_kib() - before, 16 << 10) << "KiB read in by a header-only open";
  }
  const SafeTensors st = SafeTensors::open(p);
  EXPECT_GT(rss_file_kib() - before, 60 << 10) << "KiB mapped: open() reads the file in";
  std::vector<float> out(a.size());
  st.copy_float("w", out.data());
  st.release("w");
  EXPECT_LT(rss_file_kib() - before, 16 << 10) << "KiB still mapped after release";
  EXPECT_EQ(out, a);
  EXPECT_EQ(st.to_float("w"), a) << "read again after release";
}

// The header alone (a large state's position without reading its tensors), checked as open()
// checks it.
TEST(SafeTensors, MetadataIsReadFromTheHeaderAlone) {
  test::TempDir dir("st_meta");
  const std::string p = dir / "m.safetensors";
  std::vector<float> a(1000, 1.f);
  write_safetensors(p, {{"a", {1000}, DType::F32, a.data()}}, {{"k", "v"}, {"step", "12"}});
  EXPECT_EQ(read_safetensors_metadata(p), SafeTensors::open(p).metadata());
  EXPECT_EQ(read_safetensors_metadata(p).at("step"), "12");
  // Tensor bytes cut off: open() refuses the file, the header is still whole.
  const auto bytes = read_file_bytes(p);
  write_file_atomic(p, std::string_view(bytes.data(), bytes.size() - 400));
  EXPECT_EQ(read_safetensors_metadata(p).at("k"), "v");
  const std::vector<std::pair<std::vector<char>, std::string>> bad = {
      {std::vector<char>(bytes.begin(), bytes.begin() + 40), "runs past the end of the file"},
      {std::vector<char>(bytes.begin(), bytes.begin() + 5), "too short for a header"},
      {make_file("{\"__metadata__\": {\"k\": 1}}", 0), "__metadata__ value of 'k' is not a string"},
      {make_file("[1]", 0), "header is not a JSON object"}};
  for (const auto& [file, says] : bad) {
    write_file_atomic(p, std::string_view(file.data(), file.size()));
    const std::string msg = test::error_of([&] { read_safetensors_metadata(p); });
    EXPECT_NE(msg.find(p + ": "), std::string::npos) << msg;
    EXPECT_NE(msg.find(says), std::string::npos) << msg;
  }
  EXPECT_NE(test::error_of([&] { read_safetensors_metadata(dir / "none"); }).find("cannot open"),
            std::string::npos);
}

TEST(SafeTensors, MissingFileNamesIt) {
  try {
    SafeTensors::open("/nonexistent/x.safetensors");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/x.safetensors"), std::string::npos);
  }
}

TEST(FileWrite, FailureLeavesThePreviousFileIntact) {
  test::TempDir dir("write");
  const std::string p = dir / "keep.txt";
  write_file_atomic(p, "first version");
  // A directory in the way of the temporary name makes the write fail part-way.
  const std::string blocked = dir / "blocked_dir";
  fs::create_directories(blocked);
  EXPECT_THROW(write_file_atomic(blocked + "/sub/none.txt", "x"), Error);
  EXPECT_EQ(read_text_file(p), "first version");
  EXPECT_THROW(write_file_atomic("/proc/version", "x"), Error);  // not writable
  write_file_atomic(p, "second");
  EXPECT_EQ(read_text_file(p), "second");
}

}  // namespace vit

TEST(TensorSpec, SplitsAtTheLastColonAndRefusesEmptyParts) {
  const vit::TensorSpec s = vit::parse_tensor_spec("runs/a:b/x.safetensors:images");
  EXPECT_EQ(s.file, "runs/a:b/x.safetensors");
  EXPECT_EQ(s.name, "images");
  for (const char* bad : {"x.safetensors", "x.safetensors:", ":images", ""})
    EXPECT_THROW(vit::parse_tensor_spec(bad), vit::Error) << bad;
}
