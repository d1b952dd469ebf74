// Dynamic batching for one served model: requests (each one or more preprocessed images)
// wait in a queue; a thread per model instance gathers them into a forward pass of up to
// max_batch images, waiting at most max_delay after the oldest arrived, and hands each
// request its own rows of the logits. With several instances (Triton's instance_group
// count), one gathers while the others run their passes, each on its own share of the
// threads. A request's images are never split across passes (Host refuses one larger than
// max_batch, as Triton does).
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

#include "serve/metrics.h"
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
  Clock::time_point arrived;           // when it was queued (submit)
  std::atomic<bool> abandoned{false};  // the caller stopped waiting (timeout): skipped if not started
  std::promise<void> done;
};

struct BatchOptions {
  int64_t max_batch = 16;
  std::chrono::microseconds max_delay{5000};
  int64_t max_queue = 256;  // requests waiting; more are refused (503)
  // Before the first request, each instance runs a pass of max_batch images and one of 1 on
  // its own thread (Triton's model_warmup): its buffers, threads and oneDNN's kernels are
  // made then, not during the first requests. The constructor returns once all are done.
  bool warmup = false;
};

class Batcher {
 public:
  // One worker thread per instance (copies of one model, each with its own threads), at
  // least one. With o.warmup, returns after the warm-up passes; throws the first one's error.
  Batcher(std::vector<Classifier*> instances, BatchOptions o,
          std::function<void(const PassInfo&)> on_batch = {});
  ~Batcher();  // stop()
  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;

  // Queues the job; false (the job untouched) when max_queue requests wait already.
  bool submit(const std::shared_ptr<InferJob>& job);
  int64_t queued() const;
  int idle() const;  // instances waiting for work
  // Runs what is queued, then ends the threads. Later submits are refused.
  void stop();

 private:
  void run(int instance);
  void warm_up(Classifier& model, std::vector<float>& x, std::vector<float>& logits);
  std::vector<std::shared_ptr<InferJob>> next_batch(int instance, std::unique_lock<std::mutex>& lock);

  std::vector<Classifier*> instances_;
  BatchOptions o_;
  std::function<void(const PassInfo&)> on_batch_;
  mutable std::mutex mu_;
  std::condition_variable cv_;  // notified of every change (a submit, a gatherer done, stop)
  std::deque<std::shared_ptr<InferJob>> queue_;
  bool stopping_ = false;
  bool gathering_ = false;  // an instance is gathering the next pass: the others wait their turn
  // Idle instances in the order they became idle: the front gathers next, so work spreads
  // over them (with a free-for-all, one quick instance could take every pass while another
  // sat idle with its threads and buffers warm for nothing).
  std::deque<int> idle_;
  int warmed_ = 0;  // instances done with their warm-up passes
  std::string warmup_error_;
  std::vector<std::thread> workers_;
};

}  // namespace vit::serve
