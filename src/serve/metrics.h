// The server's counters in Prometheus' text format (GET /metrics): requests by model and
// status, a latency histogram and a batch-size histogram per model, each model instance's
// forward passes and busy seconds, and each model's queue depth (read when the page is asked
// for); the same counts under Triton's metric names (nv_inference_*), and the process's CPU
// time, memory and files as Prometheus' client libraries name them (process_*). Triton's
// statistics extension (GET /v2/models/stats) gives the same counts in JSON.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace vit::serve {

// What the batcher reports after each forward pass: for the metrics' batch-size histogram, each
// instance's passes and busy time, and Triton's statistics (the requests' time in the queue,
// and the pass's in copying the inputs together, the forward and copying the logits out).
struct PassInfo {
  int instance = 0;
  int64_t images = 0, requests = 0;
  double seconds = 0;        // the forward
  double queue_seconds = 0;  // summed over the requests: from submit to the pass's start
  double input_seconds = 0, output_seconds = 0;
  bool ok = true;  // false: the forward threw (each request got its error)
};

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
  // A request answered: its model ("" for none), status and seconds; inference: it asked a
  // model for an answer (infer, predictions), for Triton's success and fail counts.
  void request(const std::string& model, int status, double seconds, bool inference = false);
  // A forward pass of the model.
  void batch(const std::string& model, const PassInfo& pass);
  // The model's instances, 0 to n - 1: their pass counters are listed from 0 before their first
  // pass, as Prometheus asks of labels known in advance (an absent series is not a zero).
  void instances(const std::string& model, int n);
  // The page; queue_depth(model) for each model named in `models`.
  std::string text(const std::vector<std::string>& models,
                   const std::function<int64_t(const std::string&)>& queue_depth) const;
  // Triton's statistics extension: {"model_stats": [...]} for each model named, version "1".
  // success and fail count the inference requests answered 200 and those answered with an
  // error (a bad request included), with their whole time in the server; queue, compute_input,
  // compute_infer and compute_output count the requests that reached a forward pass, each
  // charged its pass's time, as Triton charges a batch's requests; batch_stats count passes.
  std::string stats_json(const std::vector<std::string>& models) const;

  // Those counts, for the gRPC API's ModelStatistics (grpc_request.h) and stats_json.
  struct Duration {
    int64_t count = 0;
    double seconds = 0;
    void add(int64_t n, double s) { count += n, seconds += s; }
    int64_t ns() const;
  };
  struct BatchStats {
    Duration input, infer, output;
  };
  struct ModelStats {
    std::string name, version = "1";
    int64_t last_inference_ms = 0, inference_count = 0, execution_count = 0;
    Duration success, fail, queue, input, infer, output;
    std::map<int64_t, BatchStats> batches;        // by batch size
    std::map<std::string, int64_t> fail_reasons;  // fail's count by Triton's reason (REJECTED, ...)
  };
  // Each model named, in that order (zeros for one without requests yet).
  std::vector<ModelStats> stats(const std::vector<std::string>& models) const;
  // The version a model is served as (Triton's layout), for the statistics and Triton's
  // metrics' label; "1" until set.
  void set_version(const std::string& model, const std::string& version);

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, int64_t> requests_;
  std::map<std::string, Histogram> latency_, batches_;
  std::map<std::pair<std::string, int>, std::pair<int64_t, double>> instances_;  // passes, seconds
  std::map<std::string, ModelStats> stats_;
  std::map<std::string, std::string> versions_;
  std::string version(const std::string& model) const;                            // under mu_
  std::vector<ModelStats> collect(const std::vector<std::string>& models) const;  // stats(), under mu_
};

}  // namespace vit::serve
