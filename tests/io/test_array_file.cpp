// ArrayFileWriter: the .npy header NumPy reads, safetensors that SafeTensors reads back, and
// nothing left under the name when the array is not complete.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "core/file.h"
#include "io/array_file.h"
#include "io/safetensors.h"
#include "support/check.h"
#include "support/temp_dir.h"

namespace vit {

TEST(ArrayFile, NpyHasNumpysHeaderThenTheValues) {
  test::TempDir tmp("npy");
  const std::string path = tmp / "a.npy";
  const std::vector<float> v = {1.f, -2.f, 3.5f, 0.f, 1e-7f, 6.f};
  ArrayFileWriter w(path, "x", {2, 3});
  w.append(v.data(), 4);
  w.append(v.data() + 4, 2);
  w.finish();
  const std::vector<char> b = read_file_bytes(path);
  ASSERT_GT(b.size(), 10u);
  EXPECT_EQ(std::string(b.data(), 6), "\x93NUMPY");
  EXPECT_EQ(b[6], 1);
  EXPECT_EQ(b[7], 0);
  const size_t hlen = size_t(uint8_t(b[8])) | size_t(uint8_t(b[9])) << 8;
  EXPECT_EQ((10 + hlen) % 64, 0u);  // NumPy aligns the data to 64 bytes
  const std::string header(b.data() + 10, hlen);
  EXPECT_EQ(header.find("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"), 0u) << header;
  EXPECT_EQ(header.back(), '\n');
  ASSERT_EQ(b.size(), 10 + hlen + v.size() * 4);
  EXPECT_EQ(std::memcmp(b.data() + 10 + hlen, v.data(), v.size() * 4), 0);
  EXPECT_NE(npy_header({5}).find("'shape': (5,)"), std::string::npos);  // a 1-d tuple keeps its comma
}

TEST(ArrayFile, SafetensorsReadsBackWithItsMetadata) {
  test::TempDir tmp("st");
  const std::string path = tmp / "a.safetensors";
  const std::vector<float> v = {1.f, 2.f, 3.f, 4.f};
  ArrayFileWriter w(path, "features", {1, 2, 2}, {{"features", "tokens"}});
  w.append(v.data(), 4);
  w.finish();
  const SafeTensors st = SafeTensors::open(path);
  EXPECT_EQ(st.at("features").shape, (Shape{1, 2, 2}));
  EXPECT_EQ(st.to_float("features"), v);
  EXPECT_EQ(st.metadata().at("features"), "tokens");
}

TEST(ArrayFile, AnIncompleteArrayOrAnotherExtensionLeavesNoFile) {
  test::TempDir tmp("short");
  const std::string path = tmp / "a.npy";
  const std::vector<float> v(3, 1.f);
  {
    ArrayFileWriter w(path, "x", {2, 2});
    w.append(v.data(), 3);
    EXPECT_NE(test::error_of([&] { w.finish(); }).find("1 values short"), std::string::npos);
    EXPECT_NE(test::error_of([&] { w.append(v.data(), 2); }).find("more values"), std::string::npos);
  }
  EXPECT_NE(test::error_of([&] { ArrayFileWriter(tmp / "a.txt", "x", {1}); }).find(".safetensors or .npy"),
            std::string::npos);
  EXPECT_TRUE(std::filesystem::is_empty(tmp.str()));  // no file, no temporary left behind
}

}  // namespace vit
