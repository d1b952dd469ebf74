// Images: PNG and JPEG decoding (the JPEG written here by libjpeg itself), channel
// conversion, bilinear resizing, corrupt files, and ImageNet-style folders.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <jpeglib.h>
#include <zlib.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/file.h"
#include "core/resample.h"
#include "data/augment.h"
#include "data/folder.h"
#include "data/image.h"
#include "data/open.h"
#include "support/check.h"
#include "support/temp_dir.h"

namespace vit {

namespace {
Image gradient(int64_t h, int64_t w, int64_t c) {
  Image img{h, w, c, std::vector<uint8_t>(h * w * c)};
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x)
      for (int64_t k = 0; k < c; ++k) img.px[(y * w + x) * c + k] = uint8_t((y * 16 + x * 8 + k * 60) % 256);
  return img;
}

void write_jpeg(const std::string& path, const Image& img) {
  jpeg_compress_struct cinfo;
  jpeg_error_mgr err;
  cinfo.err = jpeg_std_error(&err);
  jpeg_create_compress(&cinfo);
  FILE* f = std::fopen(path.c_str(), "wb");
  jpeg_stdio_dest(&cinfo, f);
  cinfo.image_width = JDIMENSION(img.w);
  cinfo.image_height = JDIMENSION(img.h);
  cinfo.input_components = int(img.c);
  cinfo.in_color_space = img.c == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, 98, TRUE);
  jpeg_start_compress(&cinfo, TRUE);
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(img.px.data()) + cinfo.next_scanline * img.w * img.c;
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  std::fclose(f);
}
}  // namespace

TEST(Image, PngRoundTripGrayRgbRgba) {
  test::TempDir dir("png");
  for (int64_t c : {1, 3, 4}) {
    const Image img = gradient(5, 7, c);
    write_png(dir / "a.png", img);
    const Image back = read_image(dir / "a.png");
    EXPECT_EQ(back.h, 5);
    EXPECT_EQ(back.w, 7);
    EXPECT_EQ(back.c, c);
    EXPECT_EQ(back.px, img.px);
  }
}

TEST(Image, JpegDecodesCloseToTheOriginal) {
  test::TempDir dir("jpg");
  // A smooth image: JPEG (with 4:2:0 chroma subsampling) keeps it within a few levels.
  Image img{16, 16, 3, std::vector<uint8_t>(16 * 16 * 3)};
  for (int64_t i = 0; i < 16 * 16; ++i)
    for (int64_t k = 0; k < 3; ++k) img.px[i * 3 + k] = uint8_t(40 + (i / 16) * 6 + (i % 16) * 4 + k * 10);
  write_jpeg(dir / "a.jpg", img);
  const Image back = read_image(dir / "a.jpg");
  ASSERT_EQ(back.c, 3);
  double diff = 0;
  for (size_t i = 0; i < img.px.size(); ++i) diff += std::abs(int(img.px[i]) - int(back.px[i]));
  EXPECT_LT(diff / double(img.px.size()), 4.0) << "JPEG at quality 98 should be within a few levels";
}

TEST(Image, CorruptFilesNameTheFile) {
  test::TempDir dir("bad");
  write_png(dir / "ok.png", gradient(8, 8, 3));
  std::string bytes = read_text_file(dir / "ok.png");
  std::ofstream(dir / "cut.png", std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  std::ofstream(dir / "junk.jpg", std::ios::binary) << "hello, not an image";
  std::ofstream(dir / "cut.jpg", std::ios::binary) << "\xFF\xD8\xFF\xE0 truncated";
  for (const char* name : {"cut.png", "junk.jpg", "cut.jpg", "missing.png"}) {
    const std::string msg = test::error_of([&] { read_image(dir / name); });
    EXPECT_NE(msg.find(name), std::string::npos) << msg;
    EXPECT_NE(msg, "(no error)") << name;
  }
  EXPECT_NE(test::error_of([&] { read_image(dir / "junk.jpg"); }).find("not a PNG or JPEG"),
            std::string::npos);
  // Refused from its first bytes, not read whole first: /dev/zero was read until memory ran out.
  EXPECT_EQ(test::error_of([&] { read_image("/dev/zero"); }), "/dev/zero: not a PNG or JPEG file");
  // A file of 0 bytes (a copy cut off at its start) is said to be empty, not of another kind.
  std::ofstream(dir / "empty.png", std::ios::binary).flush();
  const std::string empty = test::error_of([&] { read_image(dir / "empty.png"); });
  EXPECT_NE(empty.find("empty.png: an empty file (0 bytes), not an image"), std::string::npos) << empty;
}

// A CMYK JPEG (ImageNet's training set holds 22) decodes to the RGB pixels Pillow's
// convert("RGB") gives, to the bit (tools/make_image_fixtures.py wrote both files); libjpeg
// alone refuses the conversion. Printed: the worst channel difference.
TEST(Image, CmykJpegIsPillowsRgb) {
  const std::string dir = VIT_FIXTURE_DIR;
  const Image got = read_image(dir + "/cmyk.jpg"), want = read_image(dir + "/cmyk_as_rgb.png");
  ASSERT_EQ(got.c, 3);
  ASSERT_EQ(want.c, 3);
  ASSERT_EQ(got.h, want.h);
  ASSERT_EQ(got.w, want.w);
  int worst = 0;
  for (size_t i = 0; i < got.px.size(); ++i)
    worst = std::max(worst, std::abs(int(got.px[i]) - int(want.px[i])));
  EXPECT_EQ(worst, 0) << "largest difference from Pillow, in levels";
}

// PNGs a decoder could read two ways (tools/make_image_fixtures.py wrote them byte by byte)
// read as Pillow reads them, to the bit: 16-bit color and gray + alpha by the high byte,
// 16-bit gray clipped at 255, a gAMA chunk ignored, a palette's colors without its
// transparency, 2-bit gray scaled to 8 bits. libpng's simplified API, used before, gamma-
// encoded 16-bit files (20000 of 65535 read 149, Pillow 78). Printed: the worst difference.
TEST(Image, PngIsReadAsPillowReadsIt) {
  const std::string dir = std::string(VIT_FIXTURE_DIR) + "/png_";
  for (const char* name : {"rgb16", "gray16", "gray_alpha16", "gamma", "palette_trns", "gray2"}) {
    const Image got = read_image(dir + name + ".png"), want = read_image(dir + name + ".pillow.png");
    // (the palette's transparency comes as a 4th channel, RGBA's, which the model's input drops)
    ASSERT_TRUE(got.c == want.c || (got.c == 4 && want.c == 3)) << name << ": " << got.c << " channels";
    ASSERT_EQ(got.h, want.h) << name;
    ASSERT_EQ(got.w, want.w) << name;
    int worst = 0;
    for (int64_t i = 0; i < got.h * got.w; ++i)
      for (int64_t k = 0; k < want.c; ++k)
        worst = std::max(worst, std::abs(int(got.px[i * got.c + k]) - int(want.px[i * want.c + k])));
    EXPECT_EQ(worst, 0) << name << ": largest difference from Pillow, in levels";
  }
}

// PNG chunks as Pillow 9.4 takes them (a tester's corpus found each difference): what follows
// the last row is ignored (a file without IEND, or cut inside it, was "read beyond end of
// data"), the image data's CRCs are not checked, an unknown critical chunk is skipped, and a
// bad CRC on a chunk before the image data is an error (libpng read on without that chunk).
TEST(Image, PngChunksAreTakenAsPillowTakesThem) {
  test::TempDir dir("chunks");
  const Image img = gradient(6, 9, 3);
  write_png(dir / "ok.png", img);
  const std::string png = read_text_file(dir / "ok.png");
  auto chunk = [](const std::string& type, const std::string& data, bool good_crc) {
    auto be32 = [](uint32_t v) {
      return std::string{char(v >> 24), char(v >> 16 & 255), char(v >> 8 & 255), char(v & 255)};
    };
    const std::string body = type + data;
    const uint32_t crc = uint32_t(crc32(0, reinterpret_cast<const Bytef*>(body.data()), uInt(body.size())));
    return be32(uint32_t(data.size())) + body + be32(good_crc ? crc : crc ^ 1);
  };
  const size_t idat = png.find("IDAT") - 4;  // the chunk's length field
  const size_t iend = png.size() - 12;
  ASSERT_EQ(png.substr(iend + 4, 4), "IEND");
  const size_t idat_crc = iend - 1;  // the last byte of IDAT's CRC (one IDAT chunk)
  std::string bad_crc = png;
  bad_crc[idat_crc] = char(bad_crc[idat_crc] ^ 0x5a);
  const std::vector<std::pair<const char*, std::string>> read = {
      {"no_iend.png", png.substr(0, iend)},
      {"cut_iend.png", png.substr(0, iend + 6)},
      {"idat_crc.png", bad_crc},
      {"critical.png", png.substr(0, idat) + chunk("ABCD", "xyz", true) + png.substr(idat)}};
  for (const auto& [name, bytes] : read) {
    std::ofstream(dir / name, std::ios::binary) << bytes;
    const Image back = read_image(dir / name);
    EXPECT_EQ(back.px, img.px) << name;
  }
  std::ofstream(dir / "text_crc.png", std::ios::binary)
      << png.substr(0, idat) + chunk("tEXt", "Comment\0hello", false) + png.substr(idat);
  const std::string msg = test::error_of([&] { read_image(dir / "text_crc.png"); });
  EXPECT_NE(msg.find("text_crc.png"), std::string::npos) << msg;
  EXPECT_NE(msg.find("CRC"), std::string::npos) << msg;
}

// A JPEG cut anywhere after its header decodes to gray rows in libjpeg, with only a warning:
// it is an error here, as in Pillow ("image file is truncated"), at every cut from the first
// scan's data to the last byte before the end marker. The whole file still decodes.
TEST(Image, TruncatedJpegIsAnError) {
  test::TempDir dir("cutjpg");
  write_jpeg(dir / "ok.jpg", gradient(48, 40, 3));
  const std::string bytes = read_text_file(dir / "ok.jpg");
  EXPECT_NO_THROW(read_image(dir / "ok.jpg"));
  const size_t sos = bytes.find("\xFF\xDA");
  ASSERT_NE(sos, std::string::npos);
  int cuts = 0;
  for (size_t n = sos + 20; n + 2 < bytes.size(); n += (bytes.size() - sos) / 13, ++cuts) {
    std::ofstream(dir / "cut.jpg", std::ios::binary | std::ios::trunc) << bytes.substr(0, n);
    const std::string msg = test::error_of([&] { read_image(dir / "cut.jpg"); });
    EXPECT_NE(msg.find("cut.jpg: corrupt JPEG: Premature end of JPEG file"), std::string::npos)
        << "cut at " << n << " of " << bytes.size() << " bytes: " << msg;
  }
  EXPECT_GE(cuts, 10);
}

// A header may claim any size in a few bytes: the fuzzer's JPEG (3 KB) claims 65362 x 63356
// pixels, a 12 GB buffer. Such files are refused from the header with a clear error, at
// Pillow's limit by default; the limit is a setting (0 lifts it), checked at its edge for
// PNG and JPEG.
TEST(Image, HeadersClaimingTooManyPixelsAreRefusedBeforeDecoding) {
  const int64_t saved = max_image_pixels();
  EXPECT_EQ(saved, 2 * 89478485);
  const std::string bomb = std::string(VIT_FIXTURE_DIR) + "/jpeg_claiming_4g_pixels.jpg";
  const std::string msg = test::error_of([&] { read_image(bomb); });
  EXPECT_NE(msg.find("jpeg_claiming_4g_pixels.jpg: 65362 x 63356 pixels, more than the 178956970"),
            std::string::npos)
      << msg;
  test::TempDir dir("limit");
  write_png(dir / "a.png", gradient(50, 100, 3));
  write_jpeg(dir / "a.jpg", gradient(50, 100, 3));
  for (const char* name : {"a.png", "a.jpg"}) {
    set_max_image_pixels(4999);
    const std::string over = test::error_of([&] { read_image(dir / name); });
    EXPECT_NE(over.find(std::string(name) + ": 100 x 50 pixels, more than the 4999"), std::string::npos)
        << over;
    set_max_image_pixels(5000);
    EXPECT_EQ(read_image(dir / name).w, 100) << name;
    set_max_image_pixels(0);
    EXPECT_EQ(read_image(dir / name).h, 50) << name;
  }
  set_max_image_pixels(saved);
}

TEST(Image, ChannelConversionAndBilinearResize) {
  const Image rgb{1, 2, 3, {255, 0, 0, 10, 20, 30}};
  const Image gray = convert_channels(rgb, 1);
  EXPECT_EQ(gray.px[0], 76);  // Pillow: 255 * 0.299 = 76.2
  EXPECT_EQ(gray.px[1], 18);  // 10*.299 + 20*.587 + 30*.114 = 18.15
  EXPECT_EQ(convert_channels(gray, 3).px, (std::vector<uint8_t>{76, 76, 76, 18, 18, 18}));
  // Upsampling 2x2 -> 4x4 with half-pixel centers: the corners keep their values and the
  // middle row is the average of the two source rows.
  const float src[4] = {0.f, 1.f, 2.f, 3.f};
  float dst[16];
  resize_bilinear(src, 1, 2, 2, dst, 4, 4);
  EXPECT_FLOAT_EQ(dst[0], 0.f);
  EXPECT_FLOAT_EQ(dst[15], 3.f);
  EXPECT_FLOAT_EQ(dst[1], 0.25f);  // x = 0.25 of the way
  EXPECT_FLOAT_EQ(dst[5], 0.75f);  // (0.25, 0.25): 0.25 * 1 + 0.25 * 2
  // Same size: identity.
  float same[4];
  resize_bilinear(src, 1, 2, 2, same, 2, 2);
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(same[i], src[i]);
}

// Expected values from Debian's PyTorch 1.13:
//   x = arange(12).reshape(1,1,3,4) ** 1.5 / 10;  F.interpolate(x, (5,7), mode=...)
//   x2 = arange(36).reshape(1,1,6,6).sin();         F.interpolate(x2, (4,4), mode='bicubic')
// all with align_corners=False. Tolerance 1e-5 (float32 arithmetic against float64).
TEST(Image, ResizeMatchesTorchInterpolate) {
  std::vector<float> x(12), x2(36);
  for (int i = 0; i < 12; ++i) x[i] = float(std::pow(double(i), 1.5) / 10);
  for (int i = 0; i < 36; ++i) x2[i] = float(std::sin(double(i)));
  const std::vector<float> up = {-0.0846449212f, -0.0601056125f, -0.00995245043f, 0.0721121757f, 0.189349814f,
                                 0.326034349f,   0.41380913f,    0.187619205f,    0.250275085f,  0.359921393f,
                                 0.490994169f,   0.648929836f,   0.824663255f,    0.935614332f,  0.76844579f,
                                 0.886741683f,   1.08359367f,    1.28783597f,     1.50781302f,   1.74337508f,
                                 1.88995956f,    1.71244681f,    1.86484041f,     2.11629382f,   2.37060528f,
                                 2.63704615f,    2.9183399f,     3.09254024f,     2.35864609f,   2.52697566f,
                                 2.8043519f,     3.08388671f,    3.37498649f,     3.68081447f,   3.86993602f};
  const std::vector<float> down = {0.136894856f,  1.00799099f,  -0.0808976576f, -0.94454779f,
                                   -0.265482174f, 0.964386753f, 0.347907942f,   -0.877745401f,
                                   -0.636520729f, 0.724614475f, 0.730257957f,   -0.630915837f,
                                   -0.867048919f, 0.359223135f, 0.95365229f,    -0.276684569f};
  const std::vector<float> bl = {
      0.f,         0.0357142857f, 0.0928571429f, 0.191421356f, 0.299755036f, 0.435053624f, 0.519615242f,
      0.32f,       0.386861998f,  0.493841196f,  0.632398381f, 0.778654333f, 0.947223674f, 1.05257951f,
      0.8f,        0.913583567f,  1.09531728f,   1.29386392f,  1.49700328f,  1.71547875f,  1.85202592f,
      1.67764502f, 1.81677665f,   2.03938727f,   2.27622886f,  2.51699689f,  2.77101895f,  2.92978273f,
      2.2627417f,  2.41890538f,   2.66876726f,   2.93113883f,  3.19699263f,  3.47471241f,  3.64828727f};
  std::vector<float> got(35), got2(16);
  resize_bicubic(x.data(), 1, 3, 4, got.data(), 5, 7);
  EXPECT_TRUE(test::close_rel_max("bicubic up", got.data(), up.data(), 35, 1e-5));
  resize_bicubic(x2.data(), 1, 6, 6, got2.data(), 4, 4);
  EXPECT_TRUE(test::close_rel_max("bicubic down", got2.data(), down.data(), 16, 1e-5));
  resize_bilinear(x.data(), 1, 3, 4, got.data(), 5, 7);
  EXPECT_TRUE(test::close_rel_max("bilinear up", got.data(), bl.data(), 35, 1e-5));
}

TEST(Image, CenterCropAfterShorterSideResize) {
  // 8x12 gray image, input 4x4 with crop_pct 0.5: shorter side to floor(4 / 0.5) = 8 (no
  // resize), then the centered 4x4 window starting at (2, 4).
  test::TempDir dir("crop");
  const Image img = gradient(8, 12, 1);
  write_png(dir / "a.png", img);
  InputSpec in{1, 4, 4, {0.f}, {1.f}};
  in.crop_pct = 0.5;
  in.crop_mode = "center";
  std::vector<float> x(16);
  load_image_input(dir / "a.png", in, x.data());
  for (int y = 0; y < 4; ++y)
    for (int k = 0; k < 4; ++k) EXPECT_FLOAT_EQ(x[y * 4 + k], img.px[(y + 2) * 12 + k + 4] / 255.f) << y << k;
}

// timm's scale size, floor(size / crop_pct), with crop_pct the double a Python config holds.
// In float, 0.8f (0.800000012) made 224 / 0.8 = 280 into 279, and 224 / 240 (0.93333334f)
// made 240 into 239: every pixel of the crop moved (a tester's sweep found 39,646 such pairs).
TEST(Image, ScaleSizeDividesByTheConfigsDouble) {
  EXPECT_EQ(scale_size(224, 0.8), 280);
  EXPECT_EQ(scale_size(8, 0.8), 10);
  EXPECT_EQ(scale_size(224, 0.875), 256);
  EXPECT_EQ(scale_size(224, 0.9), 248);  // 248.9
  EXPECT_EQ(scale_size(384, 0.96), 400);
  EXPECT_EQ(scale_size(224, 1.0), 224);
  EXPECT_EQ(scale_size(224, 224.0 / 240), 240);
  EXPECT_EQ(scale_size(448, 448.0 / 480), 480);
  EXPECT_EQ(scale_size(32, 32.0 / 34), 34);  // (Python's math.floor gives these three)
  InputSpec in{3, 224, 224, {0.5f, 0.5f, 0.5f}, {0.5f, 0.5f, 0.5f}};
  in.crop_pct = 0.8;
  in.crop_mode = "squash";
  EXPECT_EQ(resized_size(500, 375, in), std::make_pair(int64_t(280), int64_t(280)));
}

// Pillow's nearest resize reads the input at a running sum of in / out, truncated; the
// pixel at (x + 0.5) * in / out differed in one size pair of five. The rows below are
// Pillow 9.4's Image.resize((out, 1), NEAREST) of the row 0, 1, ..., in - 1.
TEST(Image, NearestResizeTakesPillowsPixels) {
  const std::vector<std::pair<std::pair<int64_t, int64_t>, std::vector<uint8_t>>> cases = {
      {{8, 6}, {0, 2, 3, 4, 5, 7}},
      {{8, 7}, {0, 1, 2, 3, 5, 6, 7}},
      {{12, 9}, {0, 2, 3, 4, 5, 7, 8, 10, 11}},
      {{14, 5}, {1, 4, 6, 9, 12}},
      {{6, 8}, {0, 1, 1, 2, 3, 4, 4, 5}},
      {{7, 3}, {1, 3, 5}},
      {{3, 7}, {0, 0, 1, 1, 1, 2, 2}},
      {{199, 13}, {7, 22, 38, 53, 68, 84, 99, 114, 130, 145, 160, 176, 191}}};
  for (const auto& [size, want] : cases) {
    const auto [in, out] = size;
    std::vector<uint8_t> row(static_cast<size_t>(in)), got(static_cast<size_t>(out));
    for (int64_t i = 0; i < in; ++i) row[size_t(i)] = uint8_t(i);
    resize_u8_pil(row.data(), 1, in, 1, got.data(), 1, out, Filter::Nearest);
    EXPECT_EQ(got, want) << in << " -> " << out;
    // The same along the height (a column).
    resize_u8_pil(row.data(), in, 1, 1, got.data(), out, 1, Filter::Nearest);
    EXPECT_EQ(got, want) << in << " -> " << out << " (column)";
  }
}

TEST(Folder, ClassesFromSortedSubfoldersAndClearErrors) {
  test::TempDir dir("folder");
  namespace fs = std::filesystem;
  for (const char* split : {"train", "val"})
    for (const char* cls : {"dog", "cat"}) {
      fs::create_directories(fs::path(dir.str()) / split / cls);
      write_png((fs::path(dir.str()) / split / cls / "b.png").string(), gradient(6, 10, 3));
      write_png((fs::path(dir.str()) / split / cls / "a.PNG").string(), gradient(6, 10, 1));
    }
  const InputSpec in{3, 4, 4, {0.5f, 0.5f, 0.5f}, {0.5f, 0.5f, 0.5f}};
  DataSources d = make_datasets(dir.str(), "auto", in, 0.0, 0);
  EXPECT_EQ(d.kind, "folder");
  EXPECT_EQ(d.class_names, (std::vector<std::string>{"cat", "dog"}));
  ASSERT_EQ(d.train->size(), 4);
  std::vector<float> x(3 * 4 * 4);
  EXPECT_EQ(d.train->get(0, x.data()), 0);  // cat/a.PNG: gray, resized to 4x4, replicated to RGB
  EXPECT_FLOAT_EQ(x[0], x[16]);
  EXPECT_EQ(d.train->get(3, x.data()), 1);
  for (float v : x) {
    EXPECT_GE(v, -1.f);
    EXPECT_LE(v, 1.f);
  }
  fs::create_directories(fs::path(dir.str()) / "train" / "empty");
  EXPECT_NE(
      test::error_of([&] { make_datasets(dir.str(), "folder", in, 0.0, 0); }).find("empty class folder"),
      std::string::npos);
  // One of images vitcpp does not decode says so (it was "empty" alone).
  std::ofstream(fs::path(dir.str()) / "train" / "empty" / "a.bmp") << "BM";
  const std::string bmp = test::error_of([&] { make_datasets(dir.str(), "folder", in, 0.0, 0); });
  EXPECT_NE(
      bmp.find("empty class folder (no .png, .jpg or .jpeg files; 1 image(s) of other formats, which vitcpp "
               "does not decode: convert them to PNG)"),
      std::string::npos)
      << bmp;
  fs::remove_all(fs::path(dir.str()) / "train" / "empty");
  std::ofstream(fs::path(dir.str()) / "val" / "cat" / "broken.jpg") << "nope";
  DataSources d2 = make_datasets(dir.str(), "folder", in, 0.0, 0);
  std::string msg;
  for (int64_t i = 0; i < d2.eval->size(); ++i) {
    const std::string m = test::error_of([&] { d2.eval->get(i, x.data()); });
    if (m != "(no error)") msg = m;
  }
  EXPECT_NE(msg.find("broken.jpg"), std::string::npos) << msg;
}

// A class folder's subfolders count, in torchvision's ImageFolder order (os.walk sorted by
// folder path, then names; checked against torchvision 0.14 by hand: "sub" < "sub-1" <
// "sub/deeper" < "sub2", since '-' < '/'), and files of the formats ImageFolder takes but
// vitcpp does not read are left out with a note.
TEST(Folder, SubfoldersInImageFoldersOrderAndOtherFormatsNoted) {
  test::TempDir dir("folder_walk");
  namespace fs = std::filesystem;
  const fs::path root(dir.str());
  const std::vector<std::string> cat = {"b.png",     "z.png", "sub/a.png", "sub-1/e.png", "sub/deeper/d.png",
                                        "sub2/c.png"};
  for (const std::string& f : cat) {
    fs::create_directories((root / "train/cat" / f).parent_path());
    write_png((root / "train/cat" / f).string(), gradient(6, 10, 3));
  }
  std::ofstream(root / "train/cat/x.bmp") << "BM";
  std::ofstream(root / "train/cat/notes.txt") << "not an image";
  for (const char* split : {"train", "val"}) {
    fs::create_directories(root / split / "dog");
    write_png((root / split / "dog/a.png").string(), gradient(6, 10, 3));
  }
  const InputSpec in{3, 4, 4, {0.5f, 0.5f, 0.5f}, {0.5f, 0.5f, 0.5f}};
  FolderDataset train((root / "train").string(), in);
  ASSERT_EQ(train.size(), 7);
  EXPECT_EQ(train.other_formats(), 1);
  // The order shows in the images' labels and in which file a failing index names.
  for (size_t i = 0; i < cat.size(); ++i) {
    fs::rename(root / "train/cat" / cat[i], root / "moved.png");
    std::vector<float> x(3 * 4 * 4);
    const std::string msg = test::error_of([&] { train.get(int64_t(i), x.data()); });
    EXPECT_NE(msg.find(cat[i]), std::string::npos) << "index " << i << ": " << msg;
    fs::rename(root / "moved.png", root / "train/cat" / cat[i]);
  }
  DataSources d = make_datasets(dir.str(), "auto", in, 0.0, 0);
  ASSERT_EQ(d.notes.size(), 1u);
  EXPECT_NE(d.notes[0].find("train: 1 file(s) in formats vitcpp does not read (.bmp"), std::string::npos)
      << d.notes[0];
}

// timm's names for the splits (_TRAIN_SYNONYM, _EVAL_SYNONYM): a train/ valid/ test/ export
// validates on valid/, not test/ (it took test/, ignoring valid/).
TEST(Folder, TimmsNamesForTheSplitsAndTheValidationBeforeTest) {
  test::TempDir dir("folder_names");
  namespace fs = std::filesystem;
  const fs::path root(dir.str());
  auto image = [&](const std::string& split, int n) {
    for (const char* cls : {"cat", "dog"})
      for (int i = 0; i < n; ++i) {
        fs::create_directories(root / split / cls);
        write_png((root / split / cls / (std::to_string(i) + ".png")).string(), gradient(6, 10, 3));
      }
  };
  image("training", 3);
  image("test", 1);
  image("valid", 2);
  const InputSpec in{3, 4, 4, {0.5f, 0.5f, 0.5f}, {0.5f, 0.5f, 0.5f}};
  DataSources d = make_datasets(dir.str(), "auto", in, 0.0, 0);
  ASSERT_TRUE(d.train && d.eval);
  EXPECT_EQ(d.train->size(), 6);
  EXPECT_EQ(d.eval->size(), 4) << "valid/ (2 a class), not test/ (1)";
  fs::rename(root / "valid", root / "validation");
  EXPECT_EQ(make_datasets(dir.str(), "auto", in, 0.0, 0).eval->size(), 4);
  fs::remove_all(root / "validation");
  EXPECT_EQ(make_datasets(dir.str(), "auto", in, 0.0, 0).eval->size(), 2) << "test/ where no other is";
  // One split's class folders given as --data-dir (ImageFolder("x/val")): said what to give.
  const std::string msg =
      test::error_of([&] { make_datasets((root / "test").string(), "auto", in, 0.0, 0); });
  EXPECT_NE(msg.find("holds class folders of images itself"), std::string::npos) << msg;
}

// A link to a file that is not there is listed, as os.walk lists it (torchvision then fails
// to open it): reading it names it, skip_bad leaves it out with its reason. It vanished
// without a word, and a class holding only such a link was "empty".
TEST(Folder, ALinkToNothingIsAnImageThatFailsByName) {
  test::TempDir dir("folder_link");
  namespace fs = std::filesystem;
  const fs::path root(dir.str());
  for (const char* cls : {"cat", "dog"}) {
    fs::create_directories(root / cls);
    write_png((root / cls / "a.png").string(), gradient(6, 10, 3));
  }
  fs::create_symlink("/nonexistent/x.png", root / "dog/broken.png");
  const InputSpec in{3, 4, 4, {0.5f, 0.5f, 0.5f}, {0.5f, 0.5f, 0.5f}};
  FolderDataset all(root.string(), in);
  ASSERT_EQ(all.size(), 3);
  std::vector<float> x(3 * 4 * 4);
  const std::string msg = test::error_of([&] { all.get(2, x.data()); });  // dog/a.png, dog/broken.png
  EXPECT_NE(msg.find("dog/broken.png"), std::string::npos) << msg;
  FolderDataset skipping(root.string(), in, {}, /*skip_bad=*/true);
  EXPECT_EQ(skipping.size(), 2);
  ASSERT_EQ(skipping.skipped().size(), 1u);
  EXPECT_NE(skipping.skipped()[0].find("dog/broken.png"), std::string::npos) << skipping.skipped()[0];
}

// Running out of file descriptors is no bad image: a read says so, without the hint to skip
// the file, and skip_bad does not take it for one (a run under `ulimit -n` finished on 554 of
// its 600 images, exit 0, the rest "skipped"). In a child whose descriptor limit, once the
// folder is listed, leaves none free.
TEST(Folder, TooManyOpenFilesIsNoBadImage) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "the sanitizers check memory through a pipe: with no descriptor free they report errors";
#endif
  test::TempDir dir("folder_emfile");
  namespace fs = std::filesystem;
  const fs::path root(dir.str());
  for (const char* cls : {"cat", "dog"}) {
    fs::create_directories(root / cls);
    write_png((root / cls / "a.png").string(), gradient(6, 10, 3));
  }
  const InputSpec in{3, 4, 4, {0.5f, 0.5f, 0.5f}, {0.5f, 0.5f, 0.5f}};
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    alarm(30);
    const FolderDataset all(root.string(), in);
    const int lowest_free = ::dup(0);  // descriptors below it are taken
    ::close(lowest_free);
    const rlimit none{rlim_t(lowest_free), rlim_t(lowest_free)};
    if (::setrlimit(RLIMIT_NOFILE, &none) != 0) _exit(4);
    std::vector<float> x(3 * 4 * 4);
    try {
      all.get(0, x.data());
      _exit(5);
    } catch (const ResourceError& e) {
      const std::string what = e.what();
      _exit(what.find("Too many open files") == std::string::npos ? 3
            : what.find("--skip-bad-images") != std::string::npos ? 2
                                                                  : 0);
    } catch (...) {
      _exit(6);
    }
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "2: the hint to skip it, 3: another message, 4: no limit set, "
                                       "5: nothing failed, 6: not a ResourceError";
}

// An evaluation alone lists train/'s class names but not its files: val/ without "cat" keeps
// "dog" at train's index 1, a file in train/ that does not decode is neither decoded nor
// reported with skip_bad_images, and a directory holding val/ alone serves (its own classes,
// or the model's where they hold the folder's).
TEST(Folder, AnEvaluationAloneKeepsTrainsClassesWithoutReadingTrain) {
  test::TempDir dir("evalonly");
  namespace fs = std::filesystem;
  const fs::path root(dir.str());
  for (const char* cls : {"cat", "dog"}) {
    fs::create_directories(root / "train" / cls);
    write_png((root / "train" / cls / "a.png").string(), gradient(6, 10, 3));
  }
  std::ofstream(root / "train" / "cat" / "broken.png") << "nope";
  fs::create_directories(root / "val" / "dog");
  write_png((root / "val" / "dog" / "a.png").string(), gradient(6, 10, 3));
  const InputSpec in{3, 4, 4, {0.5f, 0.5f, 0.5f}, {0.5f, 0.5f, 0.5f}};
  DataSources d = make_datasets(dir.str(), "auto", in, 0.0, 0, true, Splits::eval);
  EXPECT_EQ(d.kind, "folder");
  EXPECT_FALSE(d.train);
  ASSERT_TRUE(d.eval);
  EXPECT_EQ(d.class_names, (std::vector<std::string>{"cat", "dog"}));
  std::vector<float> x(3 * 4 * 4);
  EXPECT_EQ(d.eval->get(0, x.data()), 1);
  EXPECT_TRUE(d.skipped.empty()) << d.skipped.front();
  DataSources both = make_datasets(dir.str(), "auto", in, 0.0, 0, true);  // training reads train/
  ASSERT_EQ(both.skipped.size(), 1u);
  EXPECT_NE(both.skipped[0].find("broken.png"), std::string::npos);
  // A model's class names that hold every class of the folder label it (vit eval passes the
  // checkpoint's): "dog" at the model's index 2; names that miss one are not used.
  DataSources named =
      make_datasets(dir.str(), "auto", in, 0.0, 0, true, Splits::eval, {"bird", "cat", "dog"});
  EXPECT_EQ(named.eval->get(0, x.data()), 2);
  EXPECT_EQ(named.class_names, (std::vector<std::string>{"bird", "cat", "dog"}));
  DataSources unnamed = make_datasets(dir.str(), "auto", in, 0.0, 0, true, Splits::eval, {"bird", "cat"});
  EXPECT_EQ(unnamed.eval->get(0, x.data()), 1);
  EXPECT_EQ(unnamed.class_names, (std::vector<std::string>{"cat", "dog"}));
  // The training split evaluated alone (vit eval --split train) takes the eval transform, as
  // timm's validate.py: here a center crop of the 6 x 10 image, where training squashes it.
  InputSpec crop = in;
  crop.crop_mode = "center";
  crop.crop_pct = 0.875;
  DataSources tr = make_datasets(dir.str(), "auto", crop, 0.0, 0, true, Splits::train);
  DataSources tr_both = make_datasets(dir.str(), "auto", crop, 0.0, 0, true);
  ASSERT_TRUE(tr.train && !tr.eval);
  std::vector<float> evaluated(x.size()), trained(x.size()), want(x.size());
  tr.train->get(0, evaluated.data());
  tr_both.train->get(0, trained.data());
  FolderDataset((root / "train").string(), crop).get(0, want.data());
  EXPECT_EQ(evaluated, want);
  EXPECT_NE(evaluated, trained);

  fs::remove_all(root / "train");
  d = make_datasets(dir.str(), "auto", in, 0.0, 0, false, Splits::eval);
  EXPECT_EQ(d.class_names, (std::vector<std::string>{"dog"}));
  EXPECT_EQ(d.eval->get(0, x.data()), 0);
  EXPECT_NE(test::error_of([&] { make_datasets(dir.str(), "folder", in, 0.0, 0); }).find("/train/<class>/"),
            std::string::npos);
}

// train/ alone with --val-split: the held-out share evaluates with the eval transform, the
// rest trains with the training one, the two shares split train/'s files between them (as
// split_indices does for IDX and CIFAR), and a folder with val/ still refuses the flag.
TEST(Folder, ValSplitHoldsOutPartOfTrainWhenThereIsNoVal) {
  test::TempDir dir("folder_valsplit");
  namespace fs = std::filesystem;
  const fs::path root(dir.str());
  for (const char* cls : {"cat", "dog"})
    for (int i = 0; i < 5; ++i) {
      fs::create_directories(root / "train" / cls);
      write_png((root / "train" / cls / (std::to_string(i) + ".png")).string(), gradient(6, 10 + i, 3));
    }
  InputSpec in{3, 4, 4, {0.5f, 0.5f, 0.5f}, {0.5f, 0.5f, 0.5f}};
  in.crop_mode = "center";
  in.crop_pct = 0.875;
  const std::string without = test::error_of([&] { make_datasets(dir.str(), "auto", in, 0.0, 0); });
  EXPECT_NE(without.find("train/ is there without val/ or test/: --val-split 0.1"), std::string::npos)
      << without;
  // Evaluated alone: the split read is the evaluation one, and --split train reads train/.
  const std::string eval =
      test::error_of([&] { make_datasets(dir.str(), "auto", in, 0.0, 0, false, Splits::eval); });
  EXPECT_NE(
      eval.find("train/ is there without val/ or test/, and the evaluation split is read (--split train "
                "evaluates train/)"),
      std::string::npos)
      << eval;
  std::ofstream(root / "train/cat/x.webp") << "RIFF";  // noted here too (it was not, with --val-split)
  DataSources d = make_datasets(dir.str(), "auto", in, 0.2, 7);
  EXPECT_EQ(d.kind, "folder");
  ASSERT_EQ(d.notes.size(), 1u);
  EXPECT_NE(d.notes[0].find("train: 1 file(s) in formats vitcpp does not read"), std::string::npos)
      << d.notes[0];
  ASSERT_TRUE(d.train && d.eval);
  EXPECT_EQ(d.train->size(), 8);
  EXPECT_EQ(d.eval->size(), 2);
  EXPECT_EQ(d.class_names, (std::vector<std::string>{"cat", "dog"}));
  const auto [tr, va] = split_indices(10, 0.2, 7);
  const FolderDataset evaluated((root / "train").string(), in),
      trained((root / "train").string(), training_input(in));
  std::vector<float> got(3 * 4 * 4), want(got.size());
  for (size_t k = 0; k < va.size(); ++k) {
    EXPECT_EQ(d.eval->get(int64_t(k), got.data()), evaluated.get(va[k], want.data()));
    EXPECT_EQ(got, want) << "held-out image " << k;
  }
  for (size_t k = 0; k < tr.size(); ++k) {
    EXPECT_EQ(d.train->get(int64_t(k), got.data()), trained.get(tr[k], want.data()));
    EXPECT_EQ(got, want) << "training image " << k;
  }
  fs::create_directories(root / "val" / "cat");
  write_png((root / "val" / "cat" / "a.png").string(), gradient(6, 10, 3));
  EXPECT_NE(test::error_of([&] { make_datasets(dir.str(), "auto", in, 0.2, 7); }).find("has one"),
            std::string::npos);
}

// Training's random resized crop of an image folder is drawn on the decoded file, as
// torchvision's RandomResizedCrop on a PIL image: a square box (ratio 1) of half a 200 x 100
// ramp (pixel = column) is 100 x 100 of its pixels, so the 20 output columns step by 5 and
// span 95; drawn on the 20 x 20 sample it squashed to (before 2026-12-06), they spanned
// about 130 of a box 14 wide. Also through --val-split's share of train/.
TEST(Folder, RandomResizedCropIsDrawnOnTheDecodedFile) {
  test::TempDir dir("folder_rrc");
  namespace fs = std::filesystem;
  const fs::path root(dir.str());
  Image ramp{100, 200, 1, std::vector<uint8_t>(100 * 200)};
  for (int64_t y = 0; y < 100; ++y)
    for (int64_t x = 0; x < 200; ++x) ramp.px[size_t(y * 200 + x)] = uint8_t(x);
  for (int i = 0; i < 5; ++i) {
    fs::create_directories(root / "train/a");
    write_png((root / "train/a" / (std::to_string(i) + ".png")).string(), ramp);
  }
  const InputSpec in{1, 20, 20, {0.f}, {1.f / 255.f}};  // values are the pixels
  AugmentConfig cfg;
  cfg.scale_min = cfg.scale_max = 0.5f;
  cfg.ratio_min = cfg.ratio_max = 1.f;
  const FolderDataset folder((root / "train").string(), training_input(in));
  const DataSources split = make_datasets(dir.str(), "auto", in, 0.2, 7);
  for (const Dataset* base : std::vector<const Dataset*>{&folder, split.train.get()}) {
    AugmentedDataset crop(*base, cfg, 3);
    std::vector<float> img(400);
    for (int64_t i = 0; i < base->size(); ++i) {
      crop.get(i, img.data());
      EXPECT_NEAR(img[10 * 20 + 19] - img[10 * 20 + 0], 95.f, 1.5f)
          << "sample " << i << ": the span of a row";
      for (int64_t x = 1; x < 20; ++x)
        EXPECT_NEAR(img[10 * 20 + x] - img[10 * 20 + x - 1], 5.f, 1.f) << "sample " << i << ", column " << x;
      for (int64_t y = 0; y < 20; ++y)
        EXPECT_EQ(img[y * 20 + 7], img[7]) << "sample " << i << ": a column varies";
    }
  }
}

// After 10 boxes that do not fit, the central crop held to the ratio range, as torchvision.
TEST(Augment, ResizedCropFallsBackToTheCentralCropInItsRatio) {
  AugmentConfig wide;
  wide.scale_min = wide.scale_max = 1.f;  // the whole area at another aspect never fits
  wide.ratio_min = 2.f;
  wide.ratio_max = 3.f;
  AugmentConfig tall = wide;
  tall.ratio_min = 0.25f;
  tall.ratio_max = 0.5f;
  Rng rng(5);
  const CropBox w = random_resized_box(rng, 32, 32, wide), t = random_resized_box(rng, 32, 32, tall);
  EXPECT_EQ(std::vector<int64_t>({w.y, w.x, w.h, w.w}), std::vector<int64_t>({8, 0, 16, 32}));
  EXPECT_EQ(std::vector<int64_t>({t.y, t.x, t.h, t.w}), std::vector<int64_t>({0, 8, 32, 16}));
}

// timm's natural_key order (Python's sorted(names, key=natural_key), computed there).
TEST(Folder, NaturalOrderIsTimms) {
  const std::vector<std::string> names = {"class10", "class2", "Class1", "apple", "Banana", "cherry",
                                          "10abc",   "abc",    "img007", "img7x", "img7"};
  EXPECT_EQ(natural_sorted(names),
            (std::vector<std::string>{"10abc", "abc", "apple", "Banana", "cherry", "Class1", "class2",
                                      "class10", "img007", "img7", "img7x"}));
}

}  // namespace vit
