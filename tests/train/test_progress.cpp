// Progress log lines: the rate and ETA count the steps this process ran (an epoch resumed
// after step 2 does not count the images before it), and a slow rate (a large model on a
// few cores) reads as two digits, not "0 img/s".
#include <gtest/gtest.h>

#include <chrono>
#include <sstream>
#include <string>
#include <thread>

#include "vit/train/progress.h"

namespace vit {

TEST(ProgressLine, ARateBelowOneImageASecondCountsFromTheResumedStep) {
  std::ostringstream out;
  ProgressLine line(out, /*terminal=*/false, /*every=*/1);
  line.start(0, 1, 4, /*first_step=*/2, /*images_before=*/100);  // resumed after step 2 of 4
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  line.update(2, 1.0, 0.5, 101, 1e-3);  // one image in 1.1 s or more
  const std::string s = out.str();
  ASSERT_EQ(s.rfind("epoch 1/1 step 3/4 loss 1.0000 top1 50.00% ", 0), 0u) << s;
  const double rate = std::stod(s.substr(s.find("% ") + 2));
  EXPECT_GT(rate, 0.0) << s;
  EXPECT_LT(rate, 0.95) << s;
  EXPECT_NE(s.find(" img/s lr 0.001 ETA "), std::string::npos) << s;
}

}  // namespace vit
