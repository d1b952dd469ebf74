// Dynamic batching for one served model: requests (each one or more preprocessed images)
// wait in a queue; one thread gathers them into a forward pass of up to max_batch images,
// waiting at most max_delay after the oldest arrived, and hands each request its own rows
// of the logits. A request's images are never split across passes (one larger than
// max_batch runs alone, cut into passes of max_batch by the Classifier).
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "vit/classifier.h"

namespace vit::serve {

using Clock = std::chrono::steady_clock;

// One request's work: its images in, its logits (or the engine's error) out.
struct InferJob {
  std::vector<float> x;  // [n, C, H, W]
  int64_t n = 0;
  std::vector<float> logits;           // [n, K], set when done
  std::string error;                   // set instead when the forward failed
  int64_t batch = 0;                   // images in the forward pass that ran it
  std::atomic<bool> abandoned{false};  // the caller stopped waiting (timeout): skipped if not started
  std::promise<void> done;
};

struct BatchOptions {
  int64_t max_batch = 16;
  std::chrono::microseconds max_delay{5000};
  int64_t max_queue = 256;  // requests waiting; more are refused (503)
};

class Batcher {
 public:
  // on_batch(images) after each forward pass (the metrics' batch-size histogram).
  Batcher(Classifier& model, BatchOptions o, std::function<void(int64_t)> on_batch = {});
  ~Batcher();  // stop()
  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;

  // Queues the job; false (the job untouched) when max_queue requests wait already.
  bool submit(const std::shared_ptr<InferJob>& job);
  int64_t queued() const;
  // Runs what is queued, then ends the thread. Later submits are refused.
  void stop();

 private:
  void run();
  std::vector<std::shared_ptr<InferJob>> next_batch(std::unique_lock<std::mutex>& lock);

  Classifier& model_;
  BatchOptions o_;
  std::function<void(int64_t)> on_batch_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<InferJob>> queue_;
  std::deque<Clock::time_point> arrived_;
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace vit::serve
