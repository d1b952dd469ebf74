#include "data/prefetch.h"

#include <algorithm>
#include <exception>
#include <system_error>
#include <thread>
#include <vector>

#include "core/threads.h"

namespace vit {

namespace {
std::vector<int64_t> even_ends(int64_t n, int64_t batch) {
  std::vector<int64_t> ends;
  for (int64_t e = batch; e < n + batch; e += batch) ends.push_back(std::min(e, n));
  return ends;
}
}  // namespace

Prefetcher::Prefetcher(const Dataset& data, std::vector<int64_t> order, int64_t batch, int64_t first_step,
                       int workers)
    : Prefetcher(data, order, even_ends(int64_t(order.size()), batch), first_step, workers) {}

Prefetcher::Prefetcher(const Dataset& data, std::vector<int64_t> order, std::vector<int64_t> ends,
                       int64_t first_step, int workers)
    : data_(data),
      order_(std::move(order)),
      ends_(std::move(ends)),
      first_step_(first_step),
      workers_(std::max(1, workers)),
      ready_(first_step - 1),
      consumed_(first_step - 1) {
  steps_ = int64_t(ends_.size());
  sample_ = data_.channels() * data_.height() * data_.width();
  int64_t most = 0;
  for (int64_t s = 0; s < steps_; ++s) most = std::max(most, ends_[s] - first(s));
  for (int i = 0; i < 2; ++i) {
    images_[i].resize(most * sample_);
    labels_[i].resize(most);
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
  unbind_this_thread();  // every CPU, not the one of the compute thread that started it
  for (int64_t s = first_step_; s < steps_; ++s) {
    {
      // Buffer s % 2 is free once the caller has moved past batch s - 2.
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || consumed_ >= s - 1; });
      if (stop_) return;
    }
    const int64_t begin = first(s), n = ends_[s] - begin;
    float* images = images_[s % 2].data();
    int64_t* labels = labels_[s % 2].data();
    try {
      // One thread by default: the compute threads keep the cores; decoding overlaps with
      // them. With more, contiguous parts at once; the first part's error is the first
      // failing sample's, as on one thread.
      const int64_t parts = std::min<int64_t>(workers_, n);
      if (parts <= 1) {
        load(begin, n, images, labels);
      } else {
        std::vector<std::exception_ptr> errors(static_cast<size_t>(parts));
        auto part = [&](int64_t w) {
          const int64_t lo = n * w / parts, hi = n * (w + 1) / parts;
          try {
            load(begin + lo, hi - lo, images + lo * sample_, labels + lo);
          } catch (...) {
            errors[size_t(w)] = std::current_exception();
          }
        };
        // A helper that cannot start (a process or address-space limit) leaves its part to
        // this thread: the batch is the same whoever loads it. (The vector of started
        // threads ended the program when the next one's start threw.)
        std::vector<std::thread> helpers;
        std::vector<int64_t> mine{0};
        for (int64_t w = 1; w < parts; ++w) try {
            helpers.emplace_back(part, w);
          } catch (const std::system_error&) {
            mine.push_back(w);
          }
        for (int64_t w : mine) part(w);
        for (auto& h : helpers) h.join();
        for (auto& e : errors)
          if (e) std::rethrow_exception(e);
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      error_ = std::current_exception();
      error_step_ = s;
      cv_.notify_all();
      return;
    }
    std::lock_guard<std::mutex> lock(mu_);
    ready_ = s;
    cv_.notify_all();
  }
}

void Prefetcher::load(int64_t begin, int64_t n, float* images, int64_t* labels) const {
  for (int64_t b = 0; b < n; ++b) labels[b] = data_.get(order_[begin + b], images + b * sample_);
}

int64_t Prefetcher::next(int64_t s, float** images, const int64_t** labels) {
  std::unique_lock<std::mutex> lock(mu_);
  consumed_ = s;
  cv_.notify_all();
  // A failure while loading a later batch belongs to that batch: batch s is still good.
  cv_.wait(lock, [&] { return ready_ >= s || error_step_ <= s; });
  if (error_step_ <= s) std::rethrow_exception(error_);
  *images = images_[s % 2].data();
  *labels = labels_[s % 2].data();
  return ends_[s] - first(s);
}

}  // namespace vit
