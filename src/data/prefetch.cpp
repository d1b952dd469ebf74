#include "vit/data/prefetch.h"

#include <algorithm>
#include <exception>

namespace vit {

Prefetcher::Prefetcher(const Dataset& data, std::vector<int64_t> order, int64_t batch)
    : data_(data), order_(std::move(order)), batch_(batch) {
  steps_ = (int64_t(order_.size()) + batch_ - 1) / batch_;
  sample_ = data_.channels() * data_.height() * data_.width();
  for (int i = 0; i < 2; ++i) {
    images_[i].resize(batch_ * sample_);
    labels_[i].resize(batch_);
  }
  worker_ = std::thread([this] { work(); });
}

Prefetcher::~Prefetcher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

void Prefetcher::work() {
  for (int64_t s = 0; s < steps_; ++s) {
    {
      // Buffer s % 2 is free once the caller has moved past batch s - 2.
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || consumed_ >= s - 1; });
      if (stop_) return;
    }
    const int64_t first = s * batch_, n = std::min(batch_, int64_t(order_.size()) - first);
    float* images = images_[s % 2].data();
    int64_t* labels = labels_[s % 2].data();
    try {
      // One thread: the compute threads keep the cores; decoding overlaps with them.
      for (int64_t b = 0; b < n; ++b) labels[b] = data_.get(order_[first + b], images + b * sample_);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      error_ = std::current_exception();
      ready_ = s;
      cv_.notify_all();
      return;
    }
    std::lock_guard<std::mutex> lock(mu_);
    ready_ = s;
    cv_.notify_all();
  }
}

int64_t Prefetcher::next(int64_t s, float** images, const int64_t** labels) {
  std::unique_lock<std::mutex> lock(mu_);
  consumed_ = s;
  cv_.notify_all();
  cv_.wait(lock, [&] { return ready_ >= s; });
  if (error_) std::rethrow_exception(error_);
  *images = images_[s % 2].data();
  *labels = labels_[s % 2].data();
  return std::min(batch_, int64_t(order_.size()) - s * batch_);
}

}  // namespace vit
