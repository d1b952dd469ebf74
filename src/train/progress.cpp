#include "train/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "core/settings.h"

namespace vit {

bool redraws_on(int fd) {
  const char* term = setting("TERM");
  return ::isatty(fd) != 0 && !(term && std::string_view(term) == "dumb");
}

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

namespace {
// Images a second: two digits below 10 (a large model on a few cores shows 0.43, not 0).
std::string rate_str(double rate) {
  char buf[32];
  std::snprintf(buf, sizeof buf, rate < 10 ? "%.2g" : "%.0f", rate);
  return buf;
}

// The terminal's width in columns (stdout's, else stderr's), 80 where neither says.
int terminal_columns() {
  for (int fd : {STDOUT_FILENO, STDERR_FILENO}) {
    winsize ws{};
    if (::ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  }
  return 80;
}

// "[=====>      ]": done of total in `width` cells.
std::string bar_str(int64_t done, int64_t total, int64_t width = 24) {
  const int64_t filled = std::min(width, width * done / std::max<int64_t>(1, total));
  std::string bar(width + 2, ' ');
  bar.front() = '[';
  bar.back() = ']';
  for (int64_t i = 0; i < width; ++i) bar[size_t(1 + i)] = i < filled ? '=' : (i == filled ? '>' : ' ');
  return bar;
}
// One redrawn line that fits `columns` (a wider one wraps, and \r redraws only its last row,
// so each redraw would leave a line behind): "PREFIX [bar] STATS" with a bar of 10 to 24
// cells beside the first or second of `stats` (fullest first; the bar matters more than the
// lr), else the first of them that fits, with a bar or without; past the last, cut at the edge.
std::string fit_line(const std::string& prefix, int64_t done, int64_t total,
                     const std::vector<std::string>& stats, int columns) {
  const int64_t room = columns - 1;  // the last column left empty: some terminals wrap on it
  auto with_bar = [&](const std::string& st) {
    const int64_t cells = std::min<int64_t>(24, room - int64_t(prefix.size() + st.size()) - 4);
    return cells >= 10 ? prefix + " " + bar_str(done, total, cells) + " " + st : std::string();
  };
  for (size_t k = 0; k < std::min<size_t>(2, stats.size()); ++k)
    if (std::string line = with_bar(stats[k]); !line.empty()) return line;
  for (const std::string& st : stats) {
    if (std::string line = with_bar(st); !line.empty()) return line;
    if (int64_t(prefix.size() + st.size()) + 1 <= room) return prefix + " " + st;  // the figures, no bar
  }
  std::string line = prefix + " " + stats.back();
  if (int64_t(line.size()) > room) line.resize(size_t(std::max<int64_t>(room, 0)));
  return line;
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
  } else if (every_ <= 0 || (done % every_ != 0 && done != first_ + 1 && !last)) {
    return;  // a line every `every` steps, and after the first and the last, as timm logs
  }
  last_draw_ = now;
  const double elapsed = std::chrono::duration<double>(now - t0_).count();
  const double rate = elapsed > 0 ? double(images_done - images_before_) / elapsed : 0.0;
  const double eta = done > first_ ? elapsed * double(steps_ - done) / double(done - first_) : 0.0;
  char steps[48], figures[64], speed[48], tail[48];
  std::snprintf(steps, sizeof steps, "%lld/%lld", (long long)done, (long long)steps_);
  std::snprintf(figures, sizeof figures, " loss %.4f top1 %.2f%%", loss, 100 * top1);
  std::snprintf(speed, sizeof speed, " %s img/s", rate_str(rate).c_str());
  std::snprintf(tail, sizeof tail, " lr %.3g ETA %s", lr, clock_str(eta).c_str());
  const std::string eta_only = " ETA " + clock_str(eta);
  const std::string full = std::string(steps) + figures + speed + tail;
  const std::string prefix = "epoch " + std::to_string(epoch_ + 1) + "/" + std::to_string(epochs_);
  if (terminal_) {
    out_ << "\r\033[2K"
         << fit_line(prefix, done, steps_,
                     {full, std::string(steps) + figures + speed + eta_only,
                      std::string(steps) + figures + eta_only, std::string(steps) + eta_only},
                     columns_ > 0 ? columns_ : terminal_columns())
         << std::flush;
  } else {
    out_ << prefix << " step " << full << std::endl;  // a log read live
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
  char images[64], figures[64];
  std::snprintf(images, sizeof images, "%lld/%lld images", (long long)done, (long long)total_);
  if (top1 >= 0)
    std::snprintf(figures, sizeof figures, " top1 %.2f%% %s img/s", 100 * top1, rate_str(rate).c_str());
  else  // no labels (vit predict)
    std::snprintf(figures, sizeof figures, " %s img/s", rate_str(rate).c_str());
  const std::string eta_only = " ETA " + clock_str(eta), full = std::string(images) + figures + eta_only;
  if (terminal_)
    out_ << "\r\033[2K"
         << fit_line(label_, done, total_, {full, std::string(images) + eta_only},
                     columns_ > 0 ? columns_ : terminal_columns())
         << std::flush;
  else
    out_ << label_ << " " << full << std::endl;
}

void EvalProgress::finish() {
  if (terminal_) out_ << "\r\033[2K" << std::flush;
}

}  // namespace vit
