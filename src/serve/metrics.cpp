#include "serve/metrics.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

namespace vit::serve {

namespace {
// Seconds: 1 ms to 10 s. Images per pass: powers of two.
const std::vector<double> kLatencyBounds = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                            0.25,  0.5,    1,     2.5,  5,     10};
const std::vector<double> kBatchBounds = {1, 2, 4, 8, 16, 32, 64, 128};

std::string number(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}
}  // namespace

void Histogram::observe(double v) {
  const size_t i = size_t(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());
  ++counts_[i];
  sum_ += v;
  ++count_;
}

std::string Histogram::text(const std::string& name, const std::string& labels) const {
  std::ostringstream os;
  int64_t cumulative = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i];
    os << name << "_bucket{" << labels << ",le=\"" << (i < bounds_.size() ? number(bounds_[i]) : "+Inf")
       << "\"} " << cumulative << "\n";
  }
  os << name << "_sum{" << labels << "} " << number(sum_) << "\n"
     << name << "_count{" << labels << "} " << count_ << "\n";
  return os.str();
}

void Metrics::request(const std::string& model, int status, double seconds, bool inference) {
  std::lock_guard<std::mutex> lock(mu_);
  ++requests_[{model, status}];
  latency_.try_emplace(model, kLatencyBounds).first->second.observe(seconds);
  if (!inference || model.empty()) return;
  ModelStats& s = stats_[model];
  (status == 200 ? s.success : s.fail).add(1, seconds);
  s.last_inference_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
}

void Metrics::batch(const std::string& model, const PassInfo& p) {
  std::lock_guard<std::mutex> lock(mu_);
  batches_.try_emplace(model, kBatchBounds).first->second.observe(double(p.images));
  auto& [passes, busy] = instances_[{model, p.instance}];
  ++passes;
  busy += p.seconds;
  ModelStats& s = stats_[model];
  const int64_t r = p.requests;
  s.queue.add(r, p.queue_seconds);
  s.input.add(r, r * p.input_seconds);
  s.infer.add(r, r * p.seconds);
  s.output.add(r, r * p.output_seconds);
  if (!p.ok) return;  // Triton counts successful executions and inferences
  ++s.execution_count;
  s.inference_count += p.images;
  BatchStats& b = s.batches[p.images];
  b.input.add(1, p.input_seconds);
  b.infer.add(1, p.seconds);
  b.output.add(1, p.output_seconds);
}

int64_t Metrics::Duration::ns() const {
  return int64_t(std::llround(seconds * 1e9));
}

std::vector<Metrics::ModelStats> Metrics::stats(const std::vector<std::string>& models) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<ModelStats> out;
  for (const std::string& m : models) {
    const auto it = stats_.find(m);
    out.push_back(it == stats_.end() ? ModelStats{} : it->second);
    out.back().name = m;
  }
  return out;
}

std::string Metrics::stats_json(const std::vector<std::string>& models) const {
  using json = nlohmann::ordered_json;
  auto duration = [](const Duration& d) { return json{{"count", d.count}, {"ns", d.ns()}}; };
  json all = json::array();
  for (const ModelStats& s : stats(models)) {
    json batches = json::array();
    for (const auto& [size, b] : s.batches)
      batches.push_back({{"batch_size", size},
                         {"compute_input", duration(b.input)},
                         {"compute_infer", duration(b.infer)},
                         {"compute_output", duration(b.output)}});
    all.push_back({{"name", s.name},
                   {"version", "1"},
                   {"last_inference", s.last_inference_ms},
                   {"inference_count", s.inference_count},
                   {"execution_count", s.execution_count},
                   {"inference_stats",
                    {{"success", duration(s.success)},
                     {"fail", duration(s.fail)},
                     {"queue", duration(s.queue)},
                     {"compute_input", duration(s.input)},
                     {"compute_infer", duration(s.infer)},
                     {"compute_output", duration(s.output)},
                     {"cache_hit", duration({})}}},
                   {"batch_stats", batches}});
  }
  return json{{"model_stats", all}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string Metrics::text(const std::vector<std::string>& models,
                          const std::function<int64_t(const std::string&)>& queue_depth) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::ostringstream os;
  os << "# HELP vit_requests_total Requests answered, by model (empty: none) and HTTP status.\n"
     << "# TYPE vit_requests_total counter\n";
  for (const auto& [key, n] : requests_)
    os << "vit_requests_total{model=\"" << key.first << "\",status=\"" << key.second << "\"} " << n << "\n";
  os << "# HELP vit_request_duration_seconds Time from a request's arrival to its answer.\n"
     << "# TYPE vit_request_duration_seconds histogram\n";
  for (const auto& [model, h] : latency_)
    os << h.text("vit_request_duration_seconds", "model=\"" + model + "\"");
  os << "# HELP vit_batch_size Images per forward pass (dynamic batching).\n"
     << "# TYPE vit_batch_size histogram\n";
  for (const auto& [model, h] : batches_) os << h.text("vit_batch_size", "model=\"" + model + "\"");
  os << "# HELP vit_forward_passes_total Forward passes, by model and instance (--instances).\n"
     << "# TYPE vit_forward_passes_total counter\n";
  for (const auto& [key, v] : instances_)
    os << "vit_forward_passes_total{model=\"" << key.first << "\",instance=\"" << key.second << "\"} "
       << v.first << "\n";
  os << "# HELP vit_forward_seconds_total Time spent in forward passes, by model and instance.\n"
     << "# TYPE vit_forward_seconds_total counter\n";
  for (const auto& [key, v] : instances_)
    os << "vit_forward_seconds_total{model=\"" << key.first << "\",instance=\"" << key.second << "\"} "
       << number(v.second) << "\n";
  os << "# HELP vit_queue_depth Requests waiting for a forward pass.\n# TYPE vit_queue_depth gauge\n";
  for (const std::string& m : models)
    os << "vit_queue_depth{model=\"" << m << "\"} " << queue_depth(m) << "\n";
  return os.str();
}

}  // namespace vit::serve
