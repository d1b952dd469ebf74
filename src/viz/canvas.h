// A white canvas drawn with cairo (text through fontconfig: DejaVu Sans), saved as PNG by
// the crash-safe writer. Coordinates are pixels from the top-left corner. Cairo stays out
// of this header: callers see colors, rectangles, lines, text and images only.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "data/image.h"
#include "viz/colormap.h"

namespace vit::viz {

enum class Align { Left, Center, Right };

// False in a build without cairo (VIT_CAIRO=OFF): there a Canvas cannot be made (vit::Error).
bool canvas_available();

class Canvas {
 public:
  Canvas(int width, int height);
  ~Canvas();
  Canvas(const Canvas&) = delete;
  Canvas& operator=(const Canvas&) = delete;

  int width() const { return w_; }
  int height() const { return h_; }

  // An 8-bit image (gray, RGB or RGBA) scaled into the rectangle; smooth: bilinear, else
  // nearest (crisp pixels, for small maps).
  void image(const Image& img, double x, double y, double w, double h, bool smooth);
  void fill_rect(double x, double y, double w, double h, Rgb c);
  void stroke_rect(double x, double y, double w, double h, Rgb c, double line_width);
  void line(double x0, double y0, double x1, double y1, Rgb c, double line_width, bool dashed = false);
  void polyline(const std::vector<std::pair<double, double>>& pts, Rgb c, double line_width,
                bool dashed = false);
  // Text with its baseline at y; x is its left edge, center or right edge. angle in degrees
  // (counter-clockwise, e.g. 90 for a y-axis label), turning around (x, y).
  void text(const std::string& s, double x, double y, double size, Align align = Align::Left,
            bool bold = false, Rgb c = {}, double angle = 0);
  double text_width(const std::string& s, double size, bool bold = false) const;
  // Text as above, its font shrunk (down to 8) until it is at most max_width wide.
  void fit_text(const std::string& s, double x, double y, double max_width, double size,
                Align align = Align::Left, bool bold = false, Rgb c = {});
  // Everything outside the rectangle is left untouched until reset_clip.
  void clip(double x, double y, double w, double h);
  void reset_clip();

  std::string png() const;                       // the encoded file
  void save_png(const std::string& path) const;  // written to a temporary name and renamed

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int w_, h_;
};

}  // namespace vit::viz
