// Built without cairo (cmake -DVIT_CAIRO=OFF, as the aarch64 cross build is): no pictures.
// Making a Canvas is a clear error; everything that computes what a figure shows (attention
// maps, rollout, similarities, ticks, CSV reading) still works.
#include "core/check.h"
#include "viz/canvas.h"

namespace vit::viz {

struct Canvas::Impl {};

bool canvas_available() {
  return false;
}

Canvas::Canvas(int width, int height) : w_(width), h_(height) {
  throw Error(
      "this vit was built without cairo (VIT_CAIRO=OFF): it draws no pictures; rebuild with "
      "libcairo2-dev installed and VIT_CAIRO=ON");
}

Canvas::~Canvas() = default;

// A Canvas never exists in this build: nothing below is reached.
void Canvas::image(const Image&, double, double, double, double, bool) {}
void Canvas::fill_rect(double, double, double, double, Rgb) {}
void Canvas::stroke_rect(double, double, double, double, Rgb, double) {}
void Canvas::line(double, double, double, double, Rgb, double, bool) {}
void Canvas::polyline(const std::vector<std::pair<double, double>>&, Rgb, double, bool) {}
void Canvas::text(const std::string&, double, double, double, Align, bool, Rgb, double) {}
double Canvas::text_width(const std::string&, double, bool) const {
  return 0;
}
void Canvas::fit_text(const std::string&, double, double, double, double, Align, bool, Rgb) {}
void Canvas::clip(double, double, double, double) {}
void Canvas::reset_clip() {}
std::string Canvas::png() const {
  return {};
}
void Canvas::save_png(const std::string&) const {}

}  // namespace vit::viz
