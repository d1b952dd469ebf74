// Progress log lines: the rate and ETA count the steps this process ran (an epoch resumed
// after step 2 does not count the images before it), and a slow rate (a large model on a
// few cores) reads as two digits, not "0 img/s". An evaluation's progress: a bar redrawn in
// place on a terminal, ending at the total; in a log nothing for a short one, else a line
// every few seconds.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <sstream>
#include <string>

#include "train/progress.h"

namespace vit {

// A clock the test moves: time passes only where the test says, whatever the machine's load.
struct FakeClock {
  std::chrono::steady_clock::time_point t{std::chrono::hours(1)};
  void pass(int ms) { t += std::chrono::milliseconds(ms); }
  ProgressClock clock() {
    return [this] { return t; };
  }
};

TEST(ProgressLine, ARateBelowOneImageASecondCountsFromTheResumedStep) {
  std::ostringstream out;
  FakeClock time;
  ProgressLine line(out, /*terminal=*/false, /*every=*/1, time.clock());
  line.start(0, 1, 4, /*first_step=*/2, /*images_before=*/100);  // resumed after step 2 of 4
  time.pass(1100);
  line.update(2, 1.0, 0.5, 101, 1e-3);  // one image in 1.1 s
  const std::string s = out.str();
  ASSERT_EQ(s.rfind("epoch 1/1 step 3/4 loss 1.0000 top1 50.00% ", 0), 0u) << s;
  const double rate = std::stod(s.substr(s.find("% ") + 2));
  EXPECT_NEAR(rate, 1 / 1.1, 0.005) << s;  // printed with two digits
  EXPECT_NE(s.find(" img/s lr 0.001 ETA "), std::string::npos) << s;
}

// On a terminal each redraw fits its width (a wrapped line leaves a row behind at every
// redraw): the bar narrows, then the lr, the rate and the figures go, fullest first.
TEST(ProgressLine, TheBarFitsTheTerminalsWidth) {
  for (int columns : {200, 100, 80, 60, 40, 20}) {
    std::ostringstream out;
    FakeClock time;
    ProgressLine line(out, /*terminal=*/true, 50, time.clock());
    line.set_columns(columns);
    line.start(99, 100, 46875);  // the widest figures: epoch 100/100, 5-digit steps, H:MM:SS
    time.pass(200);
    line.update(1233, 123.4567, 0.9999, 1234 * 128, 1.234e-4);
    const std::string s = out.str();
    ASSERT_EQ(s.rfind("\r\033[2K", 0), 0u) << s;
    const std::string drawn = s.substr(5);
    EXPECT_LE(int(drawn.size()), columns - 1) << columns << ": " << drawn;
    EXPECT_EQ(drawn.rfind("epoch 100/100 ", 0), 0u) << drawn;
    if (columns >= 100) {
      EXPECT_NE(drawn.find(" [>"), std::string::npos) << drawn;
      EXPECT_NE(drawn.find(" lr 0.000123 ETA "), std::string::npos) << drawn;
    }
    if (columns == 80) {  // the figures rather than the bar
      EXPECT_EQ(drawn, "epoch 100/100 1234/46875 loss 123.4567 top1 99.99% 789760 img/s ETA 0:07");
    }
    if (columns <= 60) {
      const char* want = columns == 60   ? "1234/46875 loss 123.4567 top1 99.99% ETA 0:07"
                         : columns == 40 ? "1234/46875 ETA 0:07"
                                         : "1234/";  // cut at the edge
      EXPECT_NE(drawn.find(want), std::string::npos) << drawn;
    }
  }
}

// In a log: a line after the first step, every `every` steps and after the last, as timm's
// train.py (a slow model's first line came only after `every` steps).
TEST(ProgressLine, ALogHasTheFirstAndTheLastStep) {
  std::ostringstream out;
  FakeClock time;
  ProgressLine line(out, /*terminal=*/false, 50, time.clock());
  line.start(0, 1, 120);
  for (int64_t step = 0; step < 120; ++step) {
    time.pass(10);
    line.update(step, 1.0, 0.5, (step + 1) * 8, 1e-3);
  }
  std::istringstream lines(out.str());
  std::string l, steps;
  while (std::getline(lines, l))
    steps += l.substr(l.find(" step ") + 6, l.find(' ', l.find(" step ") + 6) - l.find(" step ") - 6) + " ";
  EXPECT_EQ(steps, "1/120 50/120 100/120 120/120 ") << out.str();
}

TEST(EvalProgress, ABarEndsAtTheTotalAndALogWritesOnlyWhenItIsTimeTo) {
  std::ostringstream bar;
  FakeClock time;
  EvalProgress p(bar, /*terminal=*/true, 0, "eval", time.clock());
  p.start(300);
  time.pass(99);
  p.update(100, 0.5);  // not drawn: under 0.1 s since the start
  time.pass(21);
  p.update(200, 0.5);
  p.update(300, 0.75);  // the last: drawn whatever the time
  p.finish();
  const std::string b = bar.str();
  EXPECT_EQ(b.find("100/300"), std::string::npos) << "redrawn at most every 0.1 s: " << b;
  EXPECT_NE(b.find("\r\033[2Keval [================>       ] 200/300 images top1 50.00% "), std::string::npos)
      << b;
  EXPECT_NE(b.find("\r\033[2Keval [========================] 300/300 images top1 75.00% "), std::string::npos)
      << b;
  EXPECT_EQ(b.substr(b.size() - 5), "\r\033[2K") << "cleared for the next line";

  std::ostringstream quiet, log;
  EvalProgress none(quiet, false, 0, "eval", time.clock()),
      lines(log, false, 0.05, "epoch 2/5 eval", time.clock());
  none.start(10);
  lines.start(10);
  for (int64_t i = 1; i <= 10; ++i) {
    time.pass(i == 5 ? 60 : 1);  // 0.05 s passed at the 5th (0.064 s); 0.005 s more by the 10th
    none.update(i, 1.0);
    lines.update(i, 1.0);
  }
  EXPECT_EQ(quiet.str(), "");
  const std::string l = log.str();
  ASSERT_EQ(l.rfind("epoch 2/5 eval 5/10 images top1 100.00% ", 0), 0u) << l;
  EXPECT_EQ(l.find('\n'), l.size() - 1) << "one line: the next comes 0.05 s later" << l;
  EXPECT_NE(l.find(" ETA 0:00\n"), std::string::npos) << l;
}

// A bar is drawn on a terminal that takes escape codes: not on a pipe, not with TERM=dumb
// (Emacs' shell printed "\r\033[2K" as text).
TEST(ProgressLine, ABarNeedsATerminalThatIsNotDumb) {
  const int pty = ::posix_openpt(O_RDWR | O_NOCTTY);
  ASSERT_GE(pty, 0);
  ASSERT_EQ(::grantpt(pty), 0);
  ASSERT_EQ(::unlockpt(pty), 0);
  const int tty = ::open(::ptsname(pty), O_RDWR | O_NOCTTY);
  ASSERT_GE(tty, 0);
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const char* was = std::getenv("TERM");
  const std::string saved = was ? was : "";
  ::setenv("TERM", "xterm-256color", 1);
  EXPECT_TRUE(redraws_on(tty));
  EXPECT_FALSE(redraws_on(pipe_fds[0]));
  ::setenv("TERM", "dumb", 1);
  EXPECT_FALSE(redraws_on(tty));
  ::unsetenv("TERM");
  EXPECT_TRUE(redraws_on(tty));
  if (was) ::setenv("TERM", saved.c_str(), 1);
  for (int fd : {tty, pty, pipe_fds[0], pipe_fds[1]}) ::close(fd);
}

}  // namespace vit
