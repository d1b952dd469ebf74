#include "train/progress.h"

#include <algorithm>
#include <cstdio>
#include <ostream>
#include <string>

namespace vit {

namespace {
std::string clock_str(double seconds) {
  const int64_t s = int64_t(seconds + 0.5);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", (long long)(s / 3600), (long long)(s / 60 % 60),
                  (long long)(s % 60));
  else
    std::snprintf(buf, sizeof buf, "%lld:%02lld", (long long)(s / 60), (long long)(s % 60));
  return buf;
}

// Images a second: two digits below 10 (a large model on a few cores shows 0.43, not 0).
std::string rate_str(double rate) {
  char buf[32];
  std::snprintf(buf, sizeof buf, rate < 10 ? "%.2g" : "%.0f", rate);
  return buf;
}

// "[=====>      ]": done of total in `width` cells.
std::string bar_str(int64_t done, int64_t total) {
  constexpr int64_t width = 24;
  const int64_t filled = std::min(width, width * done / std::max<int64_t>(1, total));
  std::string bar(width + 2, ' ');
  bar.front() = '[';
  bar.back() = ']';
  for (int64_t i = 0; i < width; ++i) bar[size_t(1 + i)] = i < filled ? '=' : (i == filled ? '>' : ' ');
  return bar;
}
}  // namespace

void ProgressLine::start(int64_t epoch, int64_t epochs, int64_t steps, int64_t first_step,
                         int64_t images_before) {
  epoch_ = epoch;
  epochs_ = epochs;
  steps_ = steps;
  first_ = first_step;
  images_before_ = images_before;
  t0_ = last_draw_ = now_();
}

void ProgressLine::update(int64_t step, double loss, double top1, int64_t images_done, double lr) {
  const auto now = now_();
  const int64_t done = step + 1;
  const bool last = done == steps_;
  if (terminal_) {
    // Redraw at most 10 times a second, and always at the end.
    if (!last && now - last_draw_ < std::chrono::milliseconds(100)) return;
  } else if (every_ <= 0 || (done % every_ != 0)) {
    return;
  }
  last_draw_ = now;
  const double elapsed = std::chrono::duration<double>(now - t0_).count();
  const double rate = elapsed > 0 ? double(images_done - images_before_) / elapsed : 0.0;
  const double eta = done > first_ ? elapsed * double(steps_ - done) / double(done - first_) : 0.0;
  char stats[160];
  std::snprintf(stats, sizeof stats, "%lld/%lld loss %.4f top1 %.2f%% %s img/s lr %.3g ETA %s",
                (long long)done, (long long)steps_, loss, 100 * top1, rate_str(rate).c_str(), lr,
                clock_str(eta).c_str());
  if (terminal_) {
    out_ << "\r\033[2Kepoch " << epoch_ + 1 << "/" << epochs_ << " " << bar_str(done, steps_) << " " << stats
         << std::flush;
  } else {
    out_ << "epoch " << epoch_ + 1 << "/" << epochs_ << " step " << stats << std::endl;  // a log read live
  }
}

void ProgressLine::finish() {
  if (terminal_) out_ << "\r\033[2K" << std::flush;
}

void EvalProgress::start(int64_t total) {
  total_ = total;
  t0_ = last_draw_ = now_();
}

void EvalProgress::update(int64_t done, double top1) {
  const auto now = now_();
  const double since = std::chrono::duration<double>(now - last_draw_).count();
  if (terminal_ ? since < 0.1 && done < total_ : log_seconds_ <= 0 || since < log_seconds_) return;
  last_draw_ = now;
  const double elapsed = std::chrono::duration<double>(now - t0_).count();
  const double rate = elapsed > 0 ? double(done) / elapsed : 0.0;
  const double eta = done > 0 ? elapsed * double(total_ - done) / double(done) : 0.0;
  char stats[128];
  std::snprintf(stats, sizeof stats, "%lld/%lld images top1 %.2f%% %s img/s ETA %s", (long long)done,
                (long long)total_, 100 * top1, rate_str(rate).c_str(), clock_str(eta).c_str());
  if (terminal_)
    out_ << "\r\033[2K" << label_ << " " << bar_str(done, total_) << " " << stats << std::flush;
  else
    out_ << label_ << " " << stats << std::endl;
}

void EvalProgress::finish() {
  if (terminal_) out_ << "\r\033[2K" << std::flush;
}

}  // namespace vit
