// Progress of a training epoch: on a terminal, one line redrawn in place (epoch, a bar,
// step, loss, accuracy, images/s, ETA), as tqdm does, held to the terminal's width;
// elsewhere, a plain line after the first step, every `every` steps and after the last, as
// timm's train.py logs, so logs stay readable. EvalProgress does the same for an evaluation.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <utility>

namespace vit {

// Where both read the time: steady_clock, or in tests a clock they move themselves (a test
// that sleeps to pass time fails when a loaded machine sleeps longer).
using ProgressClock = std::function<std::chrono::steady_clock::time_point()>;

// Whether descriptor fd is a terminal a bar can be redrawn on: a tty whose TERM is not
// "dumb" (Emacs' shell, some CI consoles: they print the escape codes as text).
bool redraws_on(int fd);

// A duration as M:SS, or H:MM:SS from an hour (as tqdm prints its ETA).
std::string clock_str(double seconds);

class ProgressLine {
 public:
  ProgressLine(std::ostream& out, bool terminal, int64_t every,
               ProgressClock now = std::chrono::steady_clock::now)
      : out_(out), terminal_(terminal), every_(every), now_(std::move(now)) {}
  // first_step > 0: a run resumed within the epoch, with images_before images done before
  // it (the rate and ETA count from here).
  void start(int64_t epoch, int64_t epochs, int64_t steps, int64_t first_step = 0, int64_t images_before = 0);
  // After step `step` (0-based) of the epoch: running mean loss and accuracy.
  void update(int64_t step, double loss, double top1, int64_t images_done, double lr);
  // Clears the bar (terminal) before the epoch's summary line is printed.
  void finish();
  // The line's width limit; 0 (the default): the terminal's, read at each redraw.
  void set_columns(int columns) { columns_ = columns; }

 private:
  std::ostream& out_;
  bool terminal_;
  int64_t every_;
  int columns_ = 0;
  ProgressClock now_;
  int64_t epoch_ = 0, epochs_ = 0, steps_ = 0, first_ = 0, images_before_ = 0;
  std::chrono::steady_clock::time_point t0_, last_draw_;
};

// Progress of an evaluation (vit eval, the eval after each training epoch): on a terminal,
// "LABEL [=====>    ] 12800/50000 images top1 81.23% 380 img/s ETA 1:37" redrawn in place;
// elsewhere, the same as a plain line every `log_seconds` (0: none), so a short evaluation
// writes nothing and a long one shows it is alive.
class EvalProgress {
 public:
  EvalProgress(std::ostream& out, bool terminal, double log_seconds, std::string label,
               ProgressClock now = std::chrono::steady_clock::now)
      : out_(out),
        terminal_(terminal),
        log_seconds_(log_seconds),
        label_(std::move(label)),
        now_(std::move(now)) {}
  void start(int64_t total);
  // After each batch: images done (of total) and the top-1 accuracy over them (negative:
  // none to show).
  void update(int64_t done, double top1);
  void finish();                                         // clears the bar (terminal)
  void set_columns(int columns) { columns_ = columns; }  // as ProgressLine's

 private:
  std::ostream& out_;
  bool terminal_;
  int columns_ = 0;
  double log_seconds_;
  std::string label_;
  ProgressClock now_;
  int64_t total_ = 0;
  std::chrono::steady_clock::time_point t0_, last_draw_;
};

}  // namespace vit
