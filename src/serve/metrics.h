// The server's counters in Prometheus' text format (GET /metrics): requests by model and
// status, a latency histogram and a batch-size histogram per model, each model instance's
// forward passes and busy seconds, and each model's queue depth (read when the page is asked
// for).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace vit::serve {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1) {}
  void observe(double v);
  // NAME_bucket{LABELS,le="..."} (cumulative), NAME_sum and NAME_count lines.
  std::string text(const std::string& name, const std::string& labels) const;

 private:
  std::vector<double> bounds_;
  std::vector<int64_t> counts_;  // per bucket, the last for +Inf
  double sum_ = 0;
  int64_t count_ = 0;
};

class Metrics {
 public:
  // A request answered: its model ("" for none), status and seconds.
  void request(const std::string& model, int status, double seconds);
  // A forward pass of `images` images that took `seconds` on instance `instance` of the model.
  void batch(const std::string& model, int instance, int64_t images, double seconds);
  // The page; queue_depth(model) for each model named in `models`.
  std::string text(const std::vector<std::string>& models,
                   const std::function<int64_t(const std::string&)>& queue_depth) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, int64_t> requests_;
  std::map<std::string, Histogram> latency_, batches_;
  std::map<std::pair<std::string, int>, std::pair<int64_t, double>> instances_;  // passes, seconds
};

}  // namespace vit::serve
