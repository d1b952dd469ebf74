#include "serve/metrics.h"

#include <sys/resource.h>
#include <unistd.h>
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/utf8.h"

namespace vit::serve {

namespace {
// Seconds: 1 ms to 10 s. Images per pass: powers of two.
const std::vector<double> kLatencyBounds = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                            0.25,  0.5,    1,     2.5,  5,     10};
const std::vector<double> kBatchBounds = {1, 2, 4, 8, 16, 32, 64, 128};

// The shortest text that reads back as v (a stream's 6 digits would round a start time of
// 1796460123.45 to 1.79646e+09).
std::string number(double v) {
  char text[32];
  return std::string(text, std::to_chars(text, text + sizeof text, v).ptr);
}

// Triton's reason label of nv_inference_request_failure for an inference request's status:
// past its deadline in the queue (REJECTED), cancelled by the client, failed in the forward
// (BACKEND), or anything else, a bad request or a full queue among them (OTHER).
const char* fail_reason(int status) {
  switch (status) {
    case 504: return "REJECTED";
    case 499: return "CANCELED";
    case 500: return "BACKEND";
    default: return "OTHER";
  }
}

// A line of /proc/self/status ("VmRSS:    1234 kB") in bytes; 0 if absent.
int64_t status_kb(const std::string& status, const std::string& key) {
  std::string line(1, '\n');  // appended, not "\n" + key: GCC 12 sees a false -Wrestrict in that
  line.append(key).push_back(':');
  const size_t at = status.find(line);
  return at == std::string::npos ? 0 : std::strtoll(status.c_str() + at + key.size() + 2, nullptr, 10) * 1024;
}

// The whole of a /proc file (core's read_text_file reads as many bytes as the file's size,
// which /proc reports as 0).
std::string read_text(const char* path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The process collector of Prometheus' client libraries, from /proc: CPU seconds, memory,
// open and allowed file descriptors, and the start time.
std::string process_text() {
  std::ostringstream os;
  const double tick = double(::sysconf(_SC_CLK_TCK));
  // /proc/self/stat: the fields after the command's closing parenthesis, from state (3rd).
  const std::string stat = read_text("/proc/self/stat");
  std::istringstream fields(stat.substr(std::min(stat.rfind(')') + 2, stat.size())));
  std::vector<std::string> f{std::istream_iterator<std::string>(fields), {}};
  auto field = [&](size_t n) { return n - 3 < f.size() ? std::strtod(f[n - 3].c_str(), nullptr) : 0.0; };
  std::string status(1, '\n');  // so that every key follows a newline
  status += read_text("/proc/self/status");
  double boot = 0;
  std::istringstream proc_stat(read_text("/proc/stat"));
  for (std::string key; proc_stat >> key;)
    if (key == "btime") {
      proc_stat >> boot;
      break;
    }
  size_t fds = 0;
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end; it.increment(ec))
    ++fds;
  rlimit files{};
  ::getrlimit(RLIMIT_NOFILE, &files);
  auto metric = [&](const char* name, const char* type, const char* help, const std::string& value) {
    os << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n"
       << name << " " << value << "\n";
  };
  metric("process_cpu_seconds_total", "counter", "User and system CPU time spent in seconds.",
         number((field(14) + field(15)) / tick));
  metric("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.",
         std::to_string(status_kb(status, "VmRSS")));
  metric("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.",
         std::to_string(status_kb(status, "VmSize")));
  metric("process_start_time_seconds", "gauge", "Start time of the process since the Unix epoch in seconds.",
         number(boot + field(22) / tick));
  metric("process_open_fds", "gauge", "Number of open file descriptors.", std::to_string(fds));
  metric("process_max_fds", "gauge", "Maximum number of open file descriptors.",
         std::to_string(int64_t(files.rlim_cur)));
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
  if (status != 200) ++s.fail_reasons[fail_reason(status)];
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

void Metrics::instances(const std::string& model, int n) {
  std::lock_guard<std::mutex> lock(mu_);
  for (int i = 0; i < n; ++i) instances_.try_emplace({model, i});
}

void Metrics::set_version(const std::string& model, const std::string& version) {
  std::lock_guard<std::mutex> lock(mu_);
  versions_[model] = version;
}

std::string Metrics::version(const std::string& model) const {
  const auto v = versions_.find(model);
  return v == versions_.end() ? "1" : v->second;
}

int64_t Metrics::Duration::ns() const {
  return int64_t(std::llround(seconds * 1e9));
}

std::vector<Metrics::ModelStats> Metrics::stats(const std::vector<std::string>& models) const {
  std::lock_guard<std::mutex> lock(mu_);
  return collect(models);
}

std::vector<Metrics::ModelStats> Metrics::collect(const std::vector<std::string>& models) const {
  std::vector<ModelStats> out;
  for (const std::string& m : models) {
    const auto it = stats_.find(m);
    out.push_back(it == stats_.end() ? ModelStats{} : it->second);
    out.back().name = m;
    out.back().version = version(m);
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
                   {"version", s.version},
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
  return json_for_output(json{{"model_stats", all}});
}

namespace {
// A label's value as Prometheus' text format writes it: backslash, double quote and line feed
// escaped. A model named q"x otherwise made the whole page unreadable to Prometheus.
std::string label(std::string_view v) {
  std::string out;
  for (const char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}
}  // namespace

std::string Metrics::text(const std::vector<std::string>& models,
                          const std::function<int64_t(const std::string&)>& queue_depth) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::ostringstream os;
  os << "# HELP vit_requests_total Requests answered, by model (empty: none) and HTTP status.\n"
     << "# TYPE vit_requests_total counter\n";
  for (const auto& [key, n] : requests_)
    os << "vit_requests_total{model=\"" << label(key.first) << "\",status=\"" << key.second << "\"} " << n
       << "\n";
  os << "# HELP vit_request_duration_seconds Time from a request's arrival to its answer.\n"
     << "# TYPE vit_request_duration_seconds histogram\n";
  for (const auto& [model, h] : latency_)
    os << h.text("vit_request_duration_seconds", "model=\"" + label(model) + "\"");
  os << "# HELP vit_batch_size Images per forward pass (dynamic batching).\n"
     << "# TYPE vit_batch_size histogram\n";
  for (const auto& [model, h] : batches_) os << h.text("vit_batch_size", "model=\"" + label(model) + "\"");
  os << "# HELP vit_forward_passes_total Forward passes, by model and instance (--instances).\n"
     << "# TYPE vit_forward_passes_total counter\n";
  for (const auto& [key, v] : instances_)
    os << "vit_forward_passes_total{model=\"" << label(key.first) << "\",instance=\"" << key.second << "\"} "
       << v.first << "\n";
  os << "# HELP vit_forward_seconds_total Time spent in forward passes, by model and instance.\n"
     << "# TYPE vit_forward_seconds_total counter\n";
  for (const auto& [key, v] : instances_)
    os << "vit_forward_seconds_total{model=\"" << label(key.first) << "\",instance=\"" << key.second << "\"} "
       << number(v.second) << "\n";
  os << "# HELP vit_queue_depth Requests waiting for a forward pass.\n# TYPE vit_queue_depth gauge\n";
  std::vector<int64_t> depths;
  for (const std::string& m : models) {
    depths.push_back(queue_depth(m));
    os << "vit_queue_depth{model=\"" << label(m) << "\"} " << depths.back() << "\n";
  }
  // Triton's names (its counters have no _total), for the dashboards and alerts made for it:
  // the counts of its statistics extension, for the models served.
  struct Family {
    const char *name, *help;
    std::function<int64_t(const ModelStats&)> value;
  };
  const auto us = [](const Duration& d) { return d.ns() / 1000; };
  const Family families[] = {
      {"nv_inference_request_success", "Number of successful inference requests, all batch sizes",
       [](const ModelStats& s) { return s.success.count; }},
      {"nv_inference_count", "Number of inferences performed (a batch of n counts n)",
       [](const ModelStats& s) { return s.inference_count; }},
      {"nv_inference_exec_count", "Number of model executions performed (forward passes)",
       [](const ModelStats& s) { return s.execution_count; }},
      {"nv_inference_request_duration_us", "Cumulative inference request duration in microseconds",
       [us](const ModelStats& s) { return us(s.success); }},
      {"nv_inference_queue_duration_us", "Cumulative inference queuing duration in microseconds",
       [us](const ModelStats& s) { return us(s.queue); }},
      {"nv_inference_compute_input_duration_us", "Cumulative compute input duration in microseconds",
       [us](const ModelStats& s) { return us(s.input); }},
      {"nv_inference_compute_infer_duration_us", "Cumulative compute inference duration in microseconds",
       [us](const ModelStats& s) { return us(s.infer); }},
      {"nv_inference_compute_output_duration_us",
       "Cumulative inference compute output duration in microseconds",
       [us](const ModelStats& s) { return us(s.output); }},
  };
  const std::vector<ModelStats> stats = collect(models);
  const auto labels = [](const ModelStats& s) {
    return "{model=\"" + label(s.name) + "\",version=\"" + label(s.version) + "\"";
  };
  for (const Family& f : families) {
    os << "# HELP " << f.name << " " << f.help << "\n# TYPE " << f.name << " counter\n";
    for (const ModelStats& s : stats) os << f.name << labels(s) << "} " << f.value(s) << "\n";
  }
  os << "# HELP nv_inference_request_failure Number of failed inference requests, all batch sizes\n"
     << "# TYPE nv_inference_request_failure counter\n";
  for (size_t i = 0; i < models.size(); ++i)
    for (const char* reason : {"REJECTED", "CANCELED", "BACKEND", "OTHER"}) {
      const auto it = stats[i].fail_reasons.find(reason);
      os << "nv_inference_request_failure" << labels(stats[i]) << ",reason=\"" << reason << "\"} "
         << (it == stats[i].fail_reasons.end() ? 0 : it->second) << "\n";
    }
  os << "# HELP nv_inference_pending_request_count Instantaneous number of pending requests awaiting "
        "execution per-model.\n# TYPE nv_inference_pending_request_count gauge\n";
  for (size_t i = 0; i < models.size(); ++i)
    os << "nv_inference_pending_request_count" << labels(stats[i]) << "} " << depths[i] << "\n";
  return os.str() + process_text();
}

}  // namespace vit::serve
