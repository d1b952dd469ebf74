#include "viz/canvas.h"

#include <cairo.h>

#include <cmath>

#include "core/check.h"
#include "core/file.h"

namespace vit::viz {

bool canvas_available() {
  return true;
}

struct Canvas::Impl {
  cairo_surface_t* surface = nullptr;
  cairo_t* cr = nullptr;
  ~Impl() {
    if (cr) cairo_destroy(cr);
    if (surface) cairo_surface_destroy(surface);
  }
};

Canvas::Canvas(int width, int height) : impl_(std::make_unique<Impl>()), w_(width), h_(height) {
  VIT_CHECK(width > 0 && height > 0 && width <= 16384 && height <= 16384, "canvas size ", width, "x", height,
            " out of range");
  impl_->surface = cairo_image_surface_create(CAIRO_FORMAT_RGB24, width, height);
  VIT_CHECK(cairo_surface_status(impl_->surface) == CAIRO_STATUS_SUCCESS, "cairo: cannot create a ", width,
            "x", height, " image");
  impl_->cr = cairo_create(impl_->surface);
  fill_rect(0, 0, width, height, {1, 1, 1});
}

Canvas::~Canvas() = default;

void Canvas::image(const Image& img, double x, double y, double w, double h, bool smooth) {
  VIT_CHECK(img.c == 1 || img.c == 3 || img.c == 4, "canvas: images have 1, 3 or 4 channels, got ", img.c);
  cairo_surface_t* s = cairo_image_surface_create(CAIRO_FORMAT_RGB24, int(img.w), int(img.h));
  cairo_surface_flush(s);
  unsigned char* data = cairo_image_surface_get_data(s);
  const int stride = cairo_image_surface_get_stride(s);
  for (int64_t i = 0; i < img.h; ++i) {
    auto* row = reinterpret_cast<uint32_t*>(data + i * stride);
    for (int64_t j = 0; j < img.w; ++j) {
      const uint8_t* p = &img.px[(i * img.w + j) * img.c];
      const uint32_t r = p[0], g = img.c >= 3 ? p[1] : p[0], b = img.c >= 3 ? p[2] : p[0];
      row[j] = (r << 16) | (g << 8) | b;  // CAIRO_FORMAT_RGB24: native-endian xRGB words
    }
  }
  cairo_surface_mark_dirty(s);
  cairo_t* cr = impl_->cr;
  cairo_save(cr);
  cairo_translate(cr, x, y);
  cairo_scale(cr, w / double(img.w), h / double(img.h));
  cairo_set_source_surface(cr, s, 0, 0);
  cairo_pattern_set_filter(cairo_get_source(cr), smooth ? CAIRO_FILTER_BILINEAR : CAIRO_FILTER_NEAREST);
  cairo_pattern_set_extend(cairo_get_source(cr), CAIRO_EXTEND_PAD);  // no dark fringe at the edges
  cairo_rectangle(cr, 0, 0, double(img.w), double(img.h));
  cairo_fill(cr);
  cairo_restore(cr);
  cairo_surface_destroy(s);
}

void Canvas::fill_rect(double x, double y, double w, double h, Rgb c) {
  cairo_set_source_rgb(impl_->cr, c.r, c.g, c.b);
  cairo_rectangle(impl_->cr, x, y, w, h);
  cairo_fill(impl_->cr);
}

void Canvas::stroke_rect(double x, double y, double w, double h, Rgb c, double line_width) {
  cairo_set_source_rgb(impl_->cr, c.r, c.g, c.b);
  cairo_set_line_width(impl_->cr, line_width);
  cairo_rectangle(impl_->cr, x, y, w, h);
  cairo_stroke(impl_->cr);
}

void Canvas::line(double x0, double y0, double x1, double y1, Rgb c, double line_width, bool dashed) {
  polyline({{x0, y0}, {x1, y1}}, c, line_width, dashed);
}

void Canvas::polyline(const std::vector<std::pair<double, double>>& pts, Rgb c, double line_width,
                      bool dashed) {
  if (pts.size() < 2) return;
  cairo_t* cr = impl_->cr;
  cairo_save(cr);
  cairo_set_source_rgb(cr, c.r, c.g, c.b);
  cairo_set_line_width(cr, line_width);
  cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
  if (dashed) {
    const double dash[] = {6.0, 4.0};
    cairo_set_dash(cr, dash, 2, 0);
  }
  cairo_move_to(cr, pts[0].first, pts[0].second);
  for (size_t i = 1; i < pts.size(); ++i) cairo_line_to(cr, pts[i].first, pts[i].second);
  cairo_stroke(cr);
  cairo_restore(cr);
}

namespace {
void set_font(cairo_t* cr, double size, bool bold) {
  cairo_select_font_face(cr, "DejaVu Sans", CAIRO_FONT_SLANT_NORMAL,
                         bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, size);
}
}  // namespace

double Canvas::text_width(const std::string& s, double size, bool bold) const {
  set_font(impl_->cr, size, bold);
  cairo_text_extents_t e;
  cairo_text_extents(impl_->cr, s.c_str(), &e);
  return e.x_advance;
}

void Canvas::text(const std::string& s, double x, double y, double size, Align align, bool bold, Rgb c,
                  double angle) {
  cairo_t* cr = impl_->cr;
  const double w = text_width(s, size, bold);
  cairo_save(cr);
  cairo_translate(cr, x, y);
  cairo_rotate(cr, -angle * M_PI / 180.0);
  const double dx = align == Align::Left ? 0 : align == Align::Center ? -w / 2 : -w;
  cairo_move_to(cr, dx, 0);
  cairo_set_source_rgb(cr, c.r, c.g, c.b);
  cairo_show_text(cr, s.c_str());
  cairo_restore(cr);
}

void Canvas::fit_text(const std::string& s, double x, double y, double max_width, double size, Align align,
                      bool bold, Rgb c) {
  while (size > 8 && text_width(s, size, bold) > max_width) size -= 0.5;
  text(s, x, y, size, align, bold, c);
}

void Canvas::clip(double x, double y, double w, double h) {
  cairo_reset_clip(impl_->cr);
  cairo_rectangle(impl_->cr, x, y, w, h);
  cairo_clip(impl_->cr);
}

void Canvas::reset_clip() {
  cairo_reset_clip(impl_->cr);
}

std::string Canvas::png() const {
  cairo_surface_flush(impl_->surface);
  std::string out;
  auto append = [](void* closure, const unsigned char* data, unsigned int n) {
    static_cast<std::string*>(closure)->append(reinterpret_cast<const char*>(data), n);
    return CAIRO_STATUS_SUCCESS;
  };
  const cairo_status_t st = cairo_surface_write_to_png_stream(impl_->surface, append, &out);
  VIT_CHECK(st == CAIRO_STATUS_SUCCESS, "cairo: PNG encoding failed: ", cairo_status_to_string(st));
  return out;
}

void Canvas::save_png(const std::string& path) const {
  write_file_atomic(path, png());
}

}  // namespace vit::viz
