// The attention pictures: the model's view of the image, the map as a viridis heatmap,
// and the two blended.
#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "core/resample.h"
#include "viz/attention.h"
#include "viz/canvas.h"
#include "viz/figures.h"

namespace vit::viz {

namespace {
const Rgb kInk{0.1, 0.1, 0.1};

// The view as RGB at h x w (Pillow's bilinear resize, so a 28x28 digit is not blocky).
Image rgb_at(const Image& view, int64_t h, int64_t w) {
  const Image rgb = convert_channels(view, 3);
  Image out{h, w, 3, std::vector<uint8_t>(h * w * 3)};
  resize_u8_pil(rgb.px.data(), rgb.h, rgb.w, 3, out.px.data(), h, w, Filter::Bilinear);
  return out;
}

// Heatmap (alpha 1) or the view blended with it (0 < alpha < 1): m in [0, 1], [h * w].
Image blend(const Image& rgb, const std::vector<float>& m, double alpha) {
  Image out = rgb;
  for (int64_t i = 0; i < rgb.h * rgb.w; ++i) {
    const auto c = viridis_u8(m[i]);
    for (int k = 0; k < 3; ++k)
      out.px[i * 3 + k] = uint8_t(std::lround((1 - alpha) * rgb.px[i * 3 + k] + alpha * c[k]));
  }
  return out;
}

// A panel's {height, width}: small inputs (MNIST's 28) scaled up by a whole number to
// about `target` on the longer side, inputs larger than `limit` scaled down to it.
std::pair<int64_t, int64_t> panel_size(const Image& view, int64_t target, int64_t limit) {
  const int64_t side = std::max(view.h, view.w);
  if (side > limit)
    return {std::max<int64_t>(1, view.h * limit / side), std::max<int64_t>(1, view.w * limit / side)};
  const int64_t s = std::max<int64_t>(1, int64_t(std::lround(double(target) / double(side))));
  return {view.h * s, view.w * s};
}
// The shares of the view's rows and columns the patch grid covers (0: all).
std::pair<double, double> cover(const Image& view, int64_t covered_h, int64_t covered_w) {
  return {covered_h > 0 ? double(covered_h) / double(view.h) : 1.0,
          covered_w > 0 ? double(covered_w) / double(view.w) : 1.0};
}
}  // namespace

void attention_figure(const Image& view, const std::vector<float>& map, int64_t gh, int64_t gw,
                      const std::string& caption, const std::string& path, int64_t covered_h,
                      int64_t covered_w) {
  VIT_CHECK(view.h > 0 && view.w > 0, "attention figure: empty image");
  const auto [ph, pw] = panel_size(view, 192, 384);
  const Image rgb = rgb_at(view, ph, pw);
  const auto [cover_h, cover_w] = cover(view, covered_h, covered_w);
  const std::vector<float> m = upsample_normalized(map, gh, gw, ph, pw, cover_h, cover_w);
  const double margin = 12, top = 40, bottom = 30;
  Canvas cv(int(3 * pw + 4 * margin), int(top + ph + bottom));
  cv.fit_text(caption, margin, 26, cv.width() - 2 * margin, 15, Align::Left, true, kInk);
  const Image panels[3] = {rgb, blend(rgb, m, 1.0), blend(rgb, m, 0.55)};
  const char* names[3] = {"image (model input)", "attention (low to high)", "overlay"};
  for (int i = 0; i < 3; ++i) {
    const double x = margin + i * (pw + margin);
    cv.image(panels[i], x, top, double(pw), double(ph), false);
    cv.text(names[i], x + pw / 2.0, top + ph + 20, 13, Align::Center, false, kInk);
  }
  cv.save_png(path);
}

void attention_grid_figure(const Image& view, const std::vector<std::vector<float>>& maps, int64_t gh,
                           int64_t gw, const std::vector<std::string>& row_labels,
                           const std::vector<std::string>& col_labels, const std::string& caption,
                           const std::string& path, int64_t covered_h, int64_t covered_w) {
  const int64_t rows = int64_t(row_labels.size()), cols = int64_t(col_labels.size());
  VIT_CHECK(rows > 0 && cols > 0 && int64_t(maps.size()) == rows * cols, "attention grid: ", maps.size(),
            " maps for ", rows, " x ", cols, " cells");
  // Cells stay small: a ViT-B grid is 12 blocks x 13 columns.
  const auto [ch, cw] = panel_size(view, 64, 128);
  const Image rgb = rgb_at(view, ch, cw);
  const auto [cover_h, cover_w] = cover(view, covered_h, covered_w);
  const double gap = 6, left = 78, margin = 12, head = ch + 2 * margin, labels = 22;
  // Caption lines (split at '\n') beside the image, the first in bold. The figure is wide
  // enough for them: a grid of one column (--head N) cut its caption to a few letters.
  std::vector<std::string> lines;
  for (size_t a = 0, b; a <= caption.size(); a = b + 1) {
    b = std::min(caption.find('\n', a), caption.size());
    lines.push_back(caption.substr(a, b - a));
  }
  double caption_w = 0;
  const Canvas measure(1, 1);
  for (size_t i = 0; i < lines.size(); ++i)
    caption_w = std::max(caption_w, measure.text_width(lines[i], 14, i == 0));
  const double width =
      std::max(left + cols * (cw + gap) + margin, 3 * margin + cw + std::min(caption_w, 1200.0));
  Canvas cv(int(std::ceil(width)), int(head + labels + rows * (ch + gap) + margin));
  // Title strip: the image itself, then the caption.
  cv.image(rgb, margin, margin, double(cw), double(ch), false);
  for (size_t i = 0; i < lines.size(); ++i)
    cv.fit_text(lines[i], margin * 2 + cw, margin + 18 + 20.0 * double(i), cv.width() - 3 * margin - cw, 14,
                Align::Left, i == 0, kInk);
  for (int64_t c = 0; c < cols; ++c)
    cv.text(col_labels[c], left + c * (cw + gap) + cw / 2.0, head + 15, 13, Align::Center, false, kInk);
  for (int64_t r = 0; r < rows; ++r) {
    const double y = head + labels + r * (ch + gap);
    cv.text(row_labels[r], left - 8, y + ch / 2.0 + 5, 13, Align::Right, false, kInk);
    for (int64_t c = 0; c < cols; ++c) {
      const std::vector<float> m = upsample_normalized(maps[r * cols + c], gh, gw, ch, cw, cover_h, cover_w);
      cv.image(blend(rgb, m, 0.55), left + c * (cw + gap), y, double(cw), double(ch), false);
    }
  }
  cv.save_png(path);
}

}  // namespace vit::viz
