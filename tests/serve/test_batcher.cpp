// The dynamic batcher (src/serve/batcher.h) without the HTTP layer: requests gathered into
// passes of up to max_batch images, each request's logits the model's own, and with several
// instances the passes taken in turn by the instance idle longest.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "serve/batcher.h"
#include "vit/classifier.h"

namespace vit::serve {
namespace {

const std::string kModel = std::string(VIT_FIXTURE_DIR) + "/pretrained/timm_a";  // 5 classes, 3 x 32 x 32

std::shared_ptr<InferJob> job(const Classifier& m, float value) {
  auto j = std::make_shared<InferJob>();
  j->n = 1;
  j->x.assign(size_t(m.channels() * m.height() * m.width()), value);
  return j;
}

// One request at a time, each sent once both instances wait for work: the one idle longest
// takes it, so they alternate. (Before, whichever thread woke first took it: in CI one
// instance ran all 4 passes of a test that expected both to run.)
TEST(Batcher, IdleInstancesTakePassesInTurn) {
  ClassifierOptions one;
  one.threads = 1;
  Classifier first(kModel, one);
  Classifier second = first.replica(1);
  std::mutex mu;
  std::vector<int> order;
  BatchOptions o;
  o.max_batch = 4;
  o.max_delay = std::chrono::microseconds(0);
  o.warmup = true;
  Batcher b({&first, &second}, o, [&](const PassInfo& p) {
    std::lock_guard<std::mutex> lock(mu);
    order.push_back(p.instance);
  });
  std::vector<float> want(5);
  for (int i = 0; i < 8; ++i) {
    while (b.idle() < 2) std::this_thread::yield();  // the last pass's instance is back
    auto j = job(first, 0.1f * float(i));
    std::future<void> done = j->done.get_future();
    ASSERT_TRUE(b.submit(j));
    done.get();
    ASSERT_TRUE(j->error.empty()) << j->error;
    first.logits(j->x.data(), 1, want.data());
    EXPECT_EQ(j->logits, want) << "request " << i;
  }
  b.stop();
  ASSERT_EQ(order.size(), 8u);
  for (size_t i = 1; i < order.size(); ++i)
    EXPECT_NE(order[i], order[i - 1]) << "pass " << i << " went to the instance that ran the one before it";
}

}  // namespace
}  // namespace vit::serve
