#include "serve/host.h"

#include <chrono>
#include <cstdio>
#include <fstream>

#include "core/threads.h"
#include "vit/core/error.h"

namespace vit::serve {

namespace {

std::vector<std::string> read_keys(const std::string& file) {
  std::ifstream in(file);
  VIT_CHECK(in, "--api-key-file ", file, ": cannot read");
  std::vector<std::string> keys;
  for (std::string line; std::getline(in, line);) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t'))
      line.pop_back();
    if (!line.empty()) keys.push_back(line);
  }
  VIT_CHECK(!keys.empty(), "--api-key-file ", file, ": no key in it (one per line)");
  return keys;
}

}  // namespace

Host::Host(const ServeOptions& o, std::ostream& log)
    : o_(o), max_body_(size_t(o.max_body_mb * 1024 * 1024)), log_(log) {
  if (!o.api_key_file.empty()) keys_ = read_keys(o.api_key_file);
  for (const ServedModel& s : o_.models) {
    VIT_CHECK(!models_.count(s.name), "two models named ", s.name, " (--model, --model-repository)");
    ClassifierOptions co;
    co.dtype = o_.dtype;
    co.max_batch = o_.max_batch;
    Model& m = models_[s.name];
    // The threads are shared out between the instances, the first ones taking what is left.
    const int threads = o_.threads > 0 ? o_.threads : num_threads(), n = o_.instances;
    VIT_CHECK(n <= threads, "--instances ", n, " is more than the ", threads,
              " threads (--threads): each instance needs one at least");
    std::vector<Classifier*> instances;
    // The instances after the first are its replicas: the weights are in memory once.
    for (int i = 0; i < n; ++i) {
      const int share = n == 1 ? o_.threads : threads / n + (i < threads % n ? 1 : 0);
      co.threads = share;
      m.instances.push_back(i == 0 ? std::make_unique<Classifier>(s.checkpoint, co)
                                   : std::make_unique<Classifier>(m.instances.front()->replica(share)));
      instances.push_back(m.instances.back().get());
    }
    const Classifier& c = m.classifier();
    VIT_CHECK(c.num_classes() > 0, s.checkpoint, " has no classifier head: nothing to serve");
    BatchOptions bo;
    bo.max_batch = o_.max_batch;
    bo.max_delay = std::chrono::microseconds(int64_t(o_.max_delay_ms * 1000));
    bo.max_queue = o_.max_queue;
    bo.warmup = o_.warmup;
    const Clock::time_point start = Clock::now();
    m.batcher = std::make_unique<Batcher>(
        instances, bo, [this, name = s.name](const PassInfo& p) { metrics_.batch(name, p); });
    char took[32];
    std::snprintf(took, sizeof took, "%.2f", std::chrono::duration<double>(Clock::now() - start).count());
    names_.push_back(s.name);
    const std::string shared =
        n == 1 ? "" : detail::concat(", ", n, " instances sharing ", threads, " threads and the weights");
    say(detail::concat("model ", s.name, ": ", s.checkpoint, " (", c.format(), ", ", c.num_classes(),
                       " classes, input ", c.channels(), "x", c.height(), "x", c.width(), shared, ")"));
    if (o_.warmup)
      say(detail::concat("model ", s.name, ": warmed up in ", took, " s (a pass of ", o_.max_batch,
                         o_.max_batch > 1 ? " images and one of 1" : " image",
                         n > 1 ? " on each instance)" : ")"));
  }
}

Host::~Host() {
  stop_batchers();
}

void Host::stop_batchers() {
  for (auto& [name, m] : models_) m.batcher->stop();
}

void Host::say(const std::string& line) {
  std::lock_guard<std::mutex> lock(log_mu_);
  log_ << line << std::endl;
}

Model* Host::find(const std::string& name) {
  const auto it = models_.find(name);
  return it == models_.end() ? nullptr : &it->second;
}

std::string Host::unknown(const std::string& name) const {
  std::string served;
  for (const std::string& n : names_) served += (served.empty() ? "" : ", ") + n;
  return "unknown model '" + name + "'; this server has: " + served;
}

bool Host::authorized(std::string_view authorization) const {
  if (keys_.empty()) return true;
  for (const std::string& k : keys_)
    if (authorization.size() == 7 + k.size() && authorization.substr(0, 7) == "Bearer " &&
        authorization.substr(7) == k)
      return true;
  return false;
}

Inference Host::infer(Model& m, std::vector<float> x, int64_t n, Clock::time_point deadline,
                      const std::function<bool()>& cancelled) {
  auto job = std::make_shared<InferJob>();
  job->x = std::move(x);
  job->n = n;
  std::future<void> done = job->done.get_future();
  Inference out;
  if (!m.batcher->submit(job)) {
    out.status = 503;
    out.error = "the queue is full (" + std::to_string(o_.max_queue) + " requests); retry later";
    return out;
  }
  // With cancelled(), wake every 20 ms to ask it; a job given up is skipped if not started.
  constexpr auto kPoll = std::chrono::milliseconds(20);
  for (;;) {
    const Clock::time_point until = cancelled ? std::min(deadline, Clock::now() + kPoll) : deadline;
    if (done.wait_until(until) == std::future_status::ready) break;
    if (Clock::now() >= deadline) {
      job->abandoned = true;
      out.status = 504;
      out.error = "no answer within --timeout-s " + std::to_string(o_.timeout_s) + " s";
      return out;
    }
    if (cancelled && cancelled()) {
      job->abandoned = true;
      out.status = 499;  // nginx's "client closed request": nobody reads it but the log
      out.error = "the client cancelled the request";
      return out;
    }
  }
  out.batch = job->batch;
  if (!job->error.empty()) {
    out.status = 500;
    out.error = job->error;
    return out;
  }
  out.logits = std::move(job->logits);
  return out;
}

ServingInfo Host::serving_info(const Model& m) const {
  ServingInfo s;
  s.max_batch = o_.max_batch;
  s.max_delay_us = int64_t(o_.max_delay_ms * 1000);
  s.max_queue = o_.max_queue;
  s.instances = int(m.instances.size());
  s.dtype = m.classifier().dtype();
  return s;
}

std::string Host::metrics_text() const {
  return metrics_.text(names_, [this](const std::string& n) { return models_.at(n).batcher->queued(); });
}

}  // namespace vit::serve
