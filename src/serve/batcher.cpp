#include "serve/batcher.h"

#include <algorithm>
#include <new>

#include "core/check.h"

namespace vit::serve {

Batcher::Batcher(std::vector<Classifier*> instances, BatchOptions o,
                 std::function<void(const PassInfo&)> on_batch)
    : instances_(std::move(instances)), o_(o), on_batch_(std::move(on_batch)) {
  VIT_CHECK(!instances_.empty(), "Batcher: no model instance given");
  for (int i = 0; i < int(instances_.size()); ++i) workers_.emplace_back([this, i] { run(i); });
  if (!o_.warmup) return;
  std::string error;
  {
    std::unique_lock<std::mutex> lock(mu_);
    // (and each instance waits for work: the first passes find them all in line)
    cv_.wait(lock, [&] { return warmed_ == int(instances_.size()) && idle_.size() == instances_.size(); });
    error = warmup_error_;
  }
  if (error.empty()) return;
  stop();  // the threads end before the error leaves (a joinable thread must not be destroyed)
  throw Error("the warm-up passes: " + error);
}

void Batcher::warm_up(Classifier& model, std::vector<float>& x, std::vector<float>& logits) {
  std::string error;
  try {
    // The pass's own buffers, at their largest: the passes after reuse them.
    x.assign(size_t(o_.max_batch * model.channels() * model.height() * model.width()), 0.0f);
    logits.resize(size_t(o_.max_batch * model.num_classes()));
    model.logits(x.data(), o_.max_batch, logits.data());
    if (o_.max_batch > 1) model.logits(x.data(), 1, logits.data());
  } catch (const std::bad_alloc&) {
    error = "out of memory for " + std::to_string(o_.max_batch) + " images (a smaller --max-batch)";
  } catch (const std::exception& e) {
    error = e.what();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++warmed_;
    if (warmup_error_.empty()) warmup_error_ = error;
  }
  cv_.notify_all();
}

Batcher::~Batcher() {
  stop();
}

bool Batcher::submit(const std::shared_ptr<InferJob>& job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || int64_t(queue_.size()) >= o_.max_queue) return false;
    job->arrived = Clock::now();
    queue_.push_back(job);
  }
  cv_.notify_all();
  return true;
}

int64_t Batcher::queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return int64_t(queue_.size());
}

int Batcher::idle() const {
  std::lock_guard<std::mutex> lock(mu_);
  return int(idle_.size());
}

void Batcher::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& w : workers_)
    if (w.joinable()) w.join();
}

// The requests of the next pass: the oldest, then those behind it while their images fit in
// max_batch, once max_batch images wait or max_delay has passed since the oldest arrived.
// One instance gathers at a time, so two never split the requests of one pass between them,
// and of the idle ones the one idle longest (idle_).
std::vector<std::shared_ptr<InferJob>> Batcher::next_batch(int instance, std::unique_lock<std::mutex>& lock) {
  idle_.push_back(instance);
  cv_.notify_all();  // (the constructor waits for every instance here)
  cv_.wait(lock, [&] {
    return (stopping_ && queue_.empty()) ||
           (!gathering_ && idle_.front() == instance && (stopping_ || !queue_.empty()));
  });
  idle_.erase(std::find(idle_.begin(), idle_.end(), instance));
  if (queue_.empty()) {
    cv_.notify_all();  // (stopping) the next in line looks again
    return {};
  }
  gathering_ = true;
  const Clock::time_point deadline = queue_.front()->arrived + o_.max_delay;
  auto waiting = [&] {
    int64_t n = 0;
    for (const auto& j : queue_) n += j->n;
    return n;
  };
  while (!stopping_ && waiting() < o_.max_batch && Clock::now() < deadline) cv_.wait_until(lock, deadline);
  std::vector<std::shared_ptr<InferJob>> batch;
  int64_t images = 0;
  while (!queue_.empty() && (batch.empty() || images + queue_.front()->n <= o_.max_batch)) {
    images += queue_.front()->n;
    batch.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  gathering_ = false;
  cv_.notify_all();  // the next instance may gather
  return batch;
}

void Batcher::run(int instance) {
  Classifier& model = *instances_[size_t(instance)];
  std::vector<float> x, logits;
  const int64_t per = model.channels() * model.height() * model.width(), K = model.num_classes();
  if (o_.warmup) warm_up(model, x, logits);  // on this thread: the one that runs the passes
  for (;;) {
    std::vector<std::shared_ptr<InferJob>> batch;
    {
      std::unique_lock<std::mutex> lock(mu_);
      batch = next_batch(instance, lock);
    }
    if (batch.empty()) return;  // stopping, nothing queued
    // Requests whose caller gave up are answered by nobody: left out of the pass.
    std::erase_if(batch, [](const std::shared_ptr<InferJob>& j) {
      if (!j->abandoned.load()) return false;
      j->done.set_value();
      return true;
    });
    if (batch.empty()) continue;
    auto seconds = [](Clock::time_point a, Clock::time_point b) {
      return std::chrono::duration<double>(b - a).count();
    };
    PassInfo pass;
    pass.instance = instance;
    pass.requests = int64_t(batch.size());
    const Clock::time_point start = Clock::now();
    for (const auto& j : batch) {
      pass.images += j->n;
      pass.queue_seconds += seconds(j->arrived, start);
    }
    const int64_t n = pass.images;
    x.resize(size_t(n * per));
    logits.resize(size_t(n * K));
    int64_t at = 0;
    for (const auto& j : batch) {
      std::copy(j->x.begin(), j->x.end(), x.begin() + at * per);
      at += j->n;
    }
    std::string error;
    const Clock::time_point forward = Clock::now();
    try {
      model.logits(x.data(), n, logits.data());
    } catch (const std::exception& e) {
      error = e.what();
    }
    const Clock::time_point output = Clock::now();
    at = 0;
    for (const auto& j : batch) {
      j->batch = n;
      if (error.empty())
        j->logits.assign(logits.begin() + at * K, logits.begin() + (at + j->n) * K);
      else
        j->error = error;
      at += j->n;
    }
    pass.input_seconds = seconds(start, forward);
    pass.seconds = seconds(forward, output);
    pass.output_seconds = seconds(output, Clock::now());
    pass.ok = error.empty();
    // Reported before the answers go out: a client that reads the statistics after its answer
    // finds its request counted.
    if (on_batch_) on_batch_(pass);
    for (const auto& j : batch) j->done.set_value();
  }
}

}  // namespace vit::serve
