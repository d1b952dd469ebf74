// Line charts on a Canvas: a frame, ticks at round numbers with grid lines, axis labels, a
// title and a legend. Used for training curves.
#pragma once
#include <string>
#include <vector>

#include "viz/canvas.h"

namespace vit::viz {

struct Series {
  std::string name;
  std::vector<double> x, y;  // same length; non-finite points are skipped
  Rgb color;
  bool dashed = false;
};

struct ChartLabels {
  std::string title, xlabel, ylabel;
};

// Round tick values (1, 2 or 5 times a power of ten apart, at least min_step) covering
// [lo, hi], about `target` of them.
std::vector<double> nice_ticks(double lo, double hi, int target, double min_step = 0);
// A tick's text: as few digits as the step between ticks needs ("0.25", "1e-03" when small).
// `axis`: the largest magnitude of the axis' ticks (default |v|), which picks one style for the
// whole axis: scientific where it is under 1e-3 or from 1e5 on, each with the mantissa digits
// the step needs (an lr axis read 0.0010 beside 8e-04).
std::string tick_label(double v, double step, double axis = -1);
// The largest magnitude of ticks (tick_label's axis).
double axis_magnitude(const std::vector<double>& ticks);

// Draws the chart in the rectangle (x, y, w, h) of the canvas, labels and legend included.
// When every x is a whole number (epochs), x ticks are whole numbers too. The legend goes
// to the corner where it covers the fewest points.
void line_chart(Canvas& cv, double x, double y, double w, double h, const ChartLabels& labels,
                const std::vector<Series>& series);

// The categorical colors used for series (Tableau 10's first four: blue, orange, green, red).
Rgb series_color(int i);

}  // namespace vit::viz
