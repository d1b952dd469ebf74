#include "data/image.h"

#include <jerror.h>  // JWRN_JPEG_EOF
#include <jpeglib.h>
#include <png.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/check.h"
#include "core/file.h"
#include "core/settings.h"
#include "core/signature.h"

namespace vit {

namespace {

// set_max_image_pixels' value; -1 until it is called, and then VIT_MAX_IMAGE_PIXELS or Pillow's
// limit holds.
std::atomic<int64_t> max_pixels{-1};

// Whether a header's size passes max_image_pixels(), and the error when it does not.
bool too_large(int64_t w, int64_t h) {
  const int64_t limit = max_image_pixels();
  return limit > 0 && w * h > limit;
}
Error too_large_error(const std::string& path, int64_t w, int64_t h) {
  return Error(detail::concat(path, ": ", w, " x ", h, " pixels, more than the ", max_image_pixels(),
                              " an image may have (VIT_MAX_IMAGE_PIXELS=N raises the limit; in C++, "
                              "vit::set_max_image_pixels)"));
}

// PNG through libpng's own API with no gamma or color transform, so the pixels are Pillow's
// (Image.open().convert("RGB") or "L", what timm and torchvision read): palettes expanded to
// their colors (transparency dropped), gray of 1, 2 or 4 bits scaled to 8, gray's alpha
// dropped (RGBA's kept, as the 4th channel), 16-bit color and gray + alpha by their high byte, and 16-bit
// gray clipped at 255 (Pillow reads it as mode "I" and clips: a 16-bit file holding 8-bit values keeps them).
// libpng's simplified API, used before 2026-11-29, took 16-bit files as linear light and gamma-encoded them
// (20000 of 65535 read as 149, Pillow 78) and applied gAMA chunks, which Pillow ignores.
struct PngRead {
  const uint8_t* data;
  size_t size, pos = 0;
  const char* stage = "cannot decode PNG";  // "corrupt PNG" once the header is read
  char message[256] = "";
};

Image decode_png(const uint8_t* data, size_t size, const std::string& path) {
  PngRead src{data, size};
  png_structp png = png_create_read_struct(
      PNG_LIBPNG_VER_STRING, &src,
      [](png_structp p, png_const_charp msg) {
        auto* s = static_cast<PngRead*>(png_get_error_ptr(p));
        std::snprintf(s->message, sizeof s->message, "%s", msg);
        png_longjmp(p, 1);
      },
      [](png_structp, png_const_charp) {});  // warnings (a bad ancillary chunk's CRC) are not errors
  VIT_CHECK(png, path, ": cannot decode PNG: out of memory");
  png_infop info = png_create_info_struct(png);
  Image out;
  std::vector<uint8_t> buf;
  std::vector<png_bytep> rows;
  // Nothing with a destructor may be created between setjmp and the decode's end.
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    throw Error(detail::concat(path, ": ", src.stage, ": ", src.message));
  }
  if (!info) png_error(png, "out of memory");
  png_set_read_fn(png, &src, [](png_structp p, png_bytep to, png_size_t n) {
    auto* s = static_cast<PngRead*>(png_get_io_ptr(p));
    if (n > s->size - s->pos) png_error(p, "read beyond end of data");
    std::memcpy(to, s->data + s->pos, n);
    s->pos += n;
  });
  // Chunks as Pillow takes them: a bad CRC before the image data is an error (libpng
  // dropped a bad ancillary chunk and read on), an unknown critical chunk is skipped
  // (libpng refused it), and the image data's CRCs are not checked (below).
  png_set_crc_action(png, PNG_CRC_DEFAULT, PNG_CRC_ERROR_QUIT);
  png_set_read_user_chunk_fn(png, nullptr, [](png_structp, png_unknown_chunkp) { return 1; });
  png_read_info(png, info);
  png_set_crc_action(png, PNG_CRC_QUIET_USE, PNG_CRC_QUIET_USE);
  src.stage = "corrupt PNG";
  const png_uint_32 w = png_get_image_width(png, info), h = png_get_image_height(png, info);
  if (too_large(w, h)) {  // before a buffer of that size
    png_destroy_read_struct(&png, &info, nullptr);
    throw too_large_error(path, w, h);
  }
  const int depth = png_get_bit_depth(png, info), type = png_get_color_type(png, info);
  const bool gray16 = type == PNG_COLOR_TYPE_GRAY && depth == 16;
  if (type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (type == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (depth == 16 && !gray16) png_set_strip_16(png);                // the high byte
  if (type == PNG_COLOR_TYPE_GRAY_ALPHA) png_set_strip_alpha(png);  // RGBA keeps it (Image's 4 channels)
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  const size_t row_bytes = png_get_rowbytes(png, info);
  out.h = h;
  out.w = w;
  out.c = png_get_channels(png, info);
  buf.resize(row_bytes * h);
  rows.resize(h);
  for (png_uint_32 y = 0; y < h; ++y) rows[y] = buf.data() + y * row_bytes;
  png_read_image(png, rows.data());
  // Not png_read_end: what follows the last row (IEND, a cut-off trailer) changes no pixel,
  // and Pillow ignores it (a file missing its last 12 bytes was "read beyond end of data").
  png_destroy_read_struct(&png, &info, nullptr);
  if (gray16) {  // big-endian 16-bit values, clipped at 255 as Pillow's "I" to "L" or "RGB"
    out.px.resize(size_t(out.h * out.w));
    for (size_t i = 0; i < out.px.size(); ++i)
      out.px[i] = uint8_t(std::min(255, buf[2 * i] << 8 | buf[2 * i + 1]));
  } else {
    out.px = std::move(buf);
  }
  return out;
}

struct JpegError {
  jpeg_error_mgr mgr;
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void jpeg_fail(j_common_ptr cinfo) {
  auto* e = reinterpret_cast<JpegError*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, e->message);
  longjmp(e->jump, 1);
}

// A CMYK JPEG's pixels as Pillow gives them by convert("RGB"), to the bit: Pillow reads the
// stored values as inverted (Adobe's convention, "CMYK;I", which it assumes for every CMYK
// JPEG), then R = (255 - K) - C (255 - K) / 255 in its integer rounding (Convert.c's
// cmyk2rgb, MULDIV255). ImageNet's training set holds 22 such files.
void cmyk_to_rgb(Image& img) {
  auto muldiv255 = [](int a, int b) {
    const int t = a * b + 128;
    return ((t >> 8) + t) >> 8;
  };
  const int64_t n = img.h * img.w;
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* in = img.px.data() + 4 * i;
    const int nk = in[3];  // 255 - K, K = 255 - stored
    uint8_t rgb[3];
    for (int k = 0; k < 3; ++k) rgb[k] = uint8_t(std::clamp(nk - muldiv255(255 - in[k], nk), 0, 255));
    std::memcpy(img.px.data() + 3 * i, rgb, 3);  // behind the read: 3 i + 3 <= 4 i + 3
  }
  img.c = 3;
  img.px.resize(size_t(3 * n));
}

Image decode_jpeg(const uint8_t* data, size_t size, const std::string& path) {
  jpeg_decompress_struct cinfo;
  JpegError err;
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = jpeg_fail;
  // Warnings (extraneous bytes, a corrupt segment that resyncs) are not errors, as in Pillow,
  // but the data ending before the image does is: libjpeg would fill the missing rows with
  // gray and say nothing, and Pillow refuses such a file ("image file is truncated").
  err.mgr.emit_message = [](j_common_ptr cinfo, int level) {
    if (level < 0 && cinfo->err->msg_code == JWRN_JPEG_EOF) jpeg_fail(cinfo);
  };
  Image out;
  // Nothing with a destructor may be created between setjmp and the decode's end.
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&cinfo);
    throw Error(path + ": corrupt JPEG: " + err.message);
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(&cinfo, TRUE);
  if (too_large(cinfo.image_width, cinfo.image_height)) {  // before a buffer of that size
    const int64_t w = cinfo.image_width, h = cinfo.image_height;
    jpeg_destroy_decompress(&cinfo);
    throw too_large_error(path, w, h);
  }
  // CMYK (and YCCK, which libjpeg turns into CMYK) as 4 channels, converted below; libjpeg
  // has no CMYK to RGB conversion ("Unsupported color conversion request").
  const bool cmyk = cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK;
  cinfo.out_color_space = cmyk ? JCS_CMYK : cinfo.num_components == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_start_decompress(&cinfo);
  out.h = cinfo.output_height;
  out.w = cinfo.output_width;
  out.c = cinfo.output_components;
  out.px.resize(out.h * out.w * out.c);
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = out.px.data() + int64_t(cinfo.output_scanline) * out.w * out.c;
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  if (cmyk) cmyk_to_rgb(out);
  return out;
}

}  // namespace

namespace {
// "PNG" or "JPEG" as data starts; throws for anything else (the first 8 bytes decide).
std::string_view check_signature(const uint8_t* data, size_t size, const std::string& name) {
  VIT_CHECK(size > 0, name, ": an empty file (0 bytes), not an image");
  const std::string_view kind = image_signature({reinterpret_cast<const char*>(data), size});
  VIT_CHECK(!kind.empty(), name, ": not a PNG or JPEG file");
  return kind;
}
}  // namespace

Image decode_image(const uint8_t* data, size_t size, const std::string& name) {
  VIT_CHECK(data || size == 0, name, ": no data");
  Image img = check_signature(data, size, name) == "PNG" ? decode_png(data, size, name)
                                                         : decode_jpeg(data, size, name);
  VIT_CHECK(img.h > 0 && img.w > 0, name, ": empty image");
  return img;
}

int64_t max_image_pixels() {
  const int64_t set = max_pixels.load(std::memory_order_relaxed);
  if (set >= 0) return set;
  // Read once: check_settings() has judged the value before any image is read.
  static const int64_t from_env = setting_limit("VIT_MAX_IMAGE_PIXELS").value_or(2 * 89478485);
  return from_env;
}

void set_max_image_pixels(int64_t pixels) {
  max_pixels.store(std::max<int64_t>(pixels, 0), std::memory_order_relaxed);
}

Image read_image(const std::string& path) {
  // Refused from its first bytes when it is no image (a video, /dev/zero), before it is read.
  const std::vector<char> bytes = read_file_bytes(path, [&](const char* head, size_t n) {
    check_signature(reinterpret_cast<const uint8_t*>(head), n, path);
  });
  return decode_image(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), path);
}

void write_png(const std::string& path, const Image& img) {
  VIT_CHECK(img.c == 1 || img.c == 3 || img.c == 4, path, ": cannot write ", img.c, "-channel PNG");
  png_image im;
  std::memset(&im, 0, sizeof im);
  im.version = PNG_IMAGE_VERSION;
  im.width = png_uint_32(img.w);
  im.height = png_uint_32(img.h);
  im.format = img.c == 1 ? PNG_FORMAT_GRAY : (img.c == 3 ? PNG_FORMAT_RGB : PNG_FORMAT_RGBA);
  png_alloc_size_t size = 0;
  VIT_CHECK(png_image_write_to_memory(&im, nullptr, &size, 0, img.px.data(), 0, nullptr), path,
            ": PNG encoding failed: ", im.message);
  std::string buf(size, '\0');
  VIT_CHECK(png_image_write_to_memory(&im, buf.data(), &size, 0, img.px.data(), 0, nullptr), path,
            ": PNG encoding failed: ", im.message);
  buf.resize(size);
  write_file_atomic(path, buf);
}

Image convert_channels(const Image& img, int64_t channels) {
  VIT_CHECK(channels == 1 || channels == 3, "images can be converted to 1 or 3 channels, not ", channels);
  if (img.c == channels) return img;
  Image out;
  out.h = img.h;
  out.w = img.w;
  out.c = channels;
  out.px.resize(img.h * img.w * channels);
  for (int64_t i = 0; i < img.h * img.w; ++i) {
    const uint8_t* p = img.px.data() + i * img.c;
    if (channels == 3) {
      for (int k = 0; k < 3; ++k) out.px[i * 3 + k] = img.c == 1 ? p[0] : p[k];
    } else {
      // Pillow: L = R * 299/1000 + G * 587/1000 + B * 114/1000, rounded.
      out.px[i] = uint8_t((p[0] * 19595 + p[1] * 38470 + p[2] * 7471 + 0x8000) >> 16);
    }
  }
  return out;
}

void resize(const std::string& mode, const float* src, int64_t C, int64_t H, int64_t W, float* dst,
            int64_t oh, int64_t ow) {
  if (mode == "bicubic") return resize_bicubic(src, C, H, W, dst, oh, ow);
  VIT_CHECK(mode == "bilinear", "interpolation must be bilinear or bicubic, got '", mode, "'");
  resize_bilinear(src, C, H, W, dst, oh, ow);
}

}  // namespace vit
