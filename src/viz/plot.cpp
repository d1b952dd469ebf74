#include "viz/plot.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>

namespace vit::viz {

std::vector<double> nice_ticks(double lo, double hi, int target, double min_step) {
  if (!(hi > lo)) {  // one value (or none): a range of half its size each way (1 around 0)
    // A constant learning rate of 0.005 on a unit-wide axis read as zero: the value sits in
    // the middle of an axis of its own scale, its tick labelled.
    const double c = std::isfinite(lo) ? lo : 0.0, half = c != 0.0 ? std::fabs(c) * 0.5 : 0.5;
    lo = c - half;
    hi = c + half;
  }
  const double raw = (hi - lo) / std::max(target, 1);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (raw <= m * mag * 1.0000001) {
      step = m * mag;
      break;
    }
  step = std::max(step, min_step);
  // Integer multiples of step from below lo to above hi (no drift from repeated adding).
  const int64_t first = int64_t(std::floor(lo / step + 1e-9)), last = int64_t(std::ceil(hi / step - 1e-9));
  std::vector<double> ticks;
  for (int64_t i = first; i <= std::max(last, first + 1); ++i) ticks.push_back(double(i) * step);
  return ticks;
}

double axis_magnitude(const std::vector<double>& ticks) {
  double m = 0;
  for (double t : ticks) m = std::max(m, std::fabs(t));
  return m;
}

std::string tick_label(double v, double step, double axis) {
  char buf[32];
  if (axis < 0) axis = std::fabs(v);
  if (axis != 0 && (axis < 1e-3 || axis >= 1e5)) {
    const int digits =
        std::clamp(int(std::floor(std::log10(axis)) - std::floor(std::log10(step) + 1e-9)), 0, 6);
    std::snprintf(buf, sizeof buf, "%.*e", digits, v);
    return buf;
  }
  const int digits = std::clamp(int(std::ceil(-std::log10(step) - 1e-9)), 0, 6);
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

Rgb series_color(int i) {
  static const Rgb colors[] = {
      {0.122, 0.467, 0.706}, {1.0, 0.498, 0.055}, {0.173, 0.627, 0.173}, {0.839, 0.153, 0.157}};
  return colors[i % 4];
}

void line_chart(Canvas& cv, double x, double y, double w, double h, const ChartLabels& labels,
                const std::vector<Series>& series) {
  const Rgb ink{0.15, 0.15, 0.15}, grid{0.88, 0.88, 0.88};
  const double fs = 13, right = 14, top = 30, bottom = 46;
  double xlo = std::numeric_limits<double>::infinity(), xhi = -xlo, ylo = xlo, yhi = -xlo;
  bool whole_x = true;
  for (const Series& s : series)
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i)
      if (std::isfinite(s.x[i]) && std::isfinite(s.y[i])) {
        xlo = std::min(xlo, s.x[i]);
        xhi = std::max(xhi, s.x[i]);
        ylo = std::min(ylo, s.y[i]);
        yhi = std::max(yhi, s.y[i]);
        whole_x = whole_x && s.x[i] == std::round(s.x[i]);
      }
  if (!std::isfinite(xlo)) xlo = 0, xhi = 1, ylo = 0, yhi = 1;
  const std::vector<double> xt = nice_ticks(xlo, xhi, 6, whole_x ? 1.0 : 0.0), yt = nice_ticks(ylo, yhi, 5);
  const double ystep = yt.size() > 1 ? yt[1] - yt[0] : 1, xstep = xt.size() > 1 ? xt[1] - xt[0] : 1;
  // The axes span the data (plus 5% above and below); ticks outside it are dropped.
  const double x0 = xhi > xlo ? xlo : xt.front(), x1 = xhi > xlo ? xhi : xt.back();
  const double pad = (yhi - ylo) * 0.05;
  const double y0 = yhi > ylo ? ylo - pad : yt.front(), y1 = yhi > ylo ? yhi + pad : yt.back();
  const double ymag = axis_magnitude(yt), xmag = axis_magnitude(xt);
  double tick_w = 0;  // the left margin fits the widest y tick label and the axis label
  for (double t : yt) tick_w = std::max(tick_w, cv.text_width(tick_label(t, ystep, ymag), fs - 1));
  const double left = tick_w + 34;
  const double px = x + left, py = y + top, pw = w - left - right, ph = h - top - bottom;
  auto sx = [&](double v) { return px + (v - x0) / (x1 - x0) * pw; };
  auto sy = [&](double v) { return py + ph - (v - y0) / (y1 - y0) * ph; };

  cv.fit_text(labels.title, x + left + pw / 2, y + 20, w - 8, fs + 2, Align::Center, true, ink);
  for (double t : yt) {
    if (t < y0 - 1e-12 || t > y1 + 1e-12) continue;
    cv.line(px, sy(t), px + pw, sy(t), grid, 1);
    cv.text(tick_label(t, ystep, ymag), px - 6, sy(t) + 4.5, fs - 1, Align::Right, false, ink);
  }
  for (double t : xt) {
    if (t < x0 - 1e-12 || t > x1 + 1e-12) continue;
    cv.line(sx(t), py, sx(t), py + ph, grid, 1);
    cv.text(tick_label(t, xstep, xmag), sx(t), py + ph + 17, fs - 1, Align::Center, false, ink);
  }
  cv.stroke_rect(px, py, pw, ph, ink, 1);
  cv.text(labels.xlabel, px + pw / 2, y + h - 8, fs, Align::Center, false, ink);
  cv.text(labels.ylabel, x + 14, py + ph / 2, fs, Align::Center, false, ink, 90);

  cv.clip(px, py, pw, ph);
  std::vector<std::pair<double, double>> all;
  for (const Series& s : series) {
    // A value that is not finite (a NaN loss) breaks the line: each finite run is drawn on
    // its own, so the gap shows rather than a line drawn through it.
    const size_t n = std::min(s.x.size(), s.y.size());
    auto finite = [&](size_t i) { return std::isfinite(s.x[i]) && std::isfinite(s.y[i]); };
    for (size_t i = 0; i < n;) {
      std::vector<std::pair<double, double>> pts;
      for (; i < n && finite(i); ++i) pts.push_back({sx(s.x[i]), sy(s.y[i])});
      while (i < n && !finite(i)) ++i;
      cv.polyline(pts, s.color, 2, s.dashed);
      if (pts.size() == 1) cv.fill_rect(pts[0].first - 2.5, pts[0].second - 2.5, 5, 5, s.color);
      // Points along the lines (not only the vertices), for placing the legend.
      for (size_t k = 0; k + 1 < pts.size(); ++k)
        for (int j = 0; j < 8; ++j)
          all.push_back({pts[k].first + (pts[k + 1].first - pts[k].first) * j / 8.0,
                         pts[k].second + (pts[k + 1].second - pts[k].second) * j / 8.0});
      if (!pts.empty()) all.push_back(pts.back());
    }
  }
  cv.reset_clip();
  if (series.size() < 2) return;
  // Legend on white, in the corner (top right, bottom right, top left, bottom left) that
  // covers the fewest points of the lines.
  double lw = 0;
  for (const Series& s : series) lw = std::max(lw, cv.text_width(s.name, fs - 1));
  const double bw = lw + 38, bh = 18.0 * double(series.size()) + 6;
  const std::pair<double, double> corners[] = {{px + pw - bw - 6, py + 6},
                                               {px + pw - bw - 6, py + ph - bh - 6},
                                               {px + 6, py + 6},
                                               {px + 6, py + ph - bh - 6}};
  size_t best = 0, best_hits = SIZE_MAX;
  for (size_t c = 0; c < 4; ++c) {
    size_t hits = 0;
    for (auto [qx, qy] : all)
      hits += qx >= corners[c].first - 4 && qx <= corners[c].first + bw + 4 && qy >= corners[c].second - 4 &&
              qy <= corners[c].second + bh + 4;
    if (hits < best_hits) best = c, best_hits = hits;
  }
  const auto [bx, by] = corners[best];
  cv.fill_rect(bx, by, bw, bh, {1, 1, 1});
  cv.stroke_rect(bx, by, bw, bh, {0.7, 0.7, 0.7}, 1);
  for (size_t i = 0; i < series.size(); ++i) {
    const double ly = by + 15 + 18.0 * double(i);
    cv.line(bx + 6, ly - 4, bx + 28, ly - 4, series[i].color, 2, series[i].dashed);
    cv.text(series[i].name, bx + 33, ly, fs - 1, Align::Left, false, ink);
  }
}

}  // namespace vit::viz
