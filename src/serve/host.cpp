#include "serve/host.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <thread>
#include <utility>

#include "core/check.h"
#include "core/file.h"
#include "core/threads.h"
#include "core/utf8.h"
#include "ops/ops.h"

namespace vit::serve {

namespace {

std::vector<std::string> read_keys(const std::string& file) {
  VIT_CHECK(std::ifstream(file).good(), "--api-key-file ", file, ": cannot read");
  std::vector<std::string> keys;
  for (std::string line : read_lines(file, "keys are compared as text")) {
    while (!line.empty() && (line.back() == ' ' || line.back() == '\t')) line.pop_back();
    if (!line.empty()) keys.push_back(line);
  }
  VIT_CHECK(!keys.empty(), "--api-key-file ", file, ": no key in it (one per line)");
  return keys;
}

}  // namespace

Host::Host(const ServeOptions& o, std::ostream& log)
    : o_(o),
      max_body_(size_t(o.max_body_mb * 1024 * 1024)),
      log_(log, &log == &std::cout ? STDOUT_FILENO : -1) {
  VIT_CHECK(o.model_control == "none" || o.model_control == "explicit" || o.model_control == "poll",
            "--model-control-mode is none, explicit or poll, not '", o.model_control, "'");
  VIT_CHECK(o.repository_poll_s >= kMinRepositoryPollS, "--repository-poll-secs: at least ",
            kMinRepositoryPollS, " seconds, got ", o.repository_poll_s);
  if (!o.api_key_file.empty()) keys_ = read_keys(o.api_key_file);
  for (const ServedModel& s : at_start()) {
    models_[s.name] = make_model(s);
    metrics_.set_version(s.name, s.version);
  }
  if (o.model_control == "poll") poller_ = std::thread([this] { poll_loop(); });
}

ModelSettings Host::defaults() const {
  ModelSettings d;
  d.max_batch = o_.max_batch;
  d.dynamic = o_.max_batch > 1;
  d.max_delay_ms = o_.max_delay_ms;
  d.max_queue = o_.max_queue;
  d.instances = o_.instances;
  d.dtype = o_.dtype;
  return d;
}

ModelPtr Host::make_model(const ServedModel& s, const std::string& config) {
  // A name is a URL's path segment and a metrics label: one that is not UTF-8 made /metrics
  // unreadable to Prometheus for every model, and one with '/' could not be reached.
  VIT_CHECK(is_utf8(s.name) && s.name.find('/') == std::string::npos &&
                std::none_of(s.name.begin(), s.name.end(), [](char c) { return uint8_t(c) < 0x20; }),
            "the model name of ", s.folder.empty() ? s.checkpoint : s.folder,
            " must be UTF-8 text without '/' or control characters (URLs name it)");
  auto m = std::make_shared<Model>();
  ModelSettings& set = m->settings = defaults();
  m->fingerprint = fingerprint(s);  // before reading: a change while loading is seen by the next poll
  m->version = s.version;
  const std::string pbtxt =
      (std::filesystem::path(s.folder.empty() ? s.checkpoint : s.folder) / "config.pbtxt").string();
  std::error_code ec;
  std::vector<std::string> notes;
  std::string from;
  if (!config.empty()) {
    from = "the load request's config";
    set = apply_model_config(config, true, s.name, from, set, notes);
  } else if (std::filesystem::is_regular_file(pbtxt, ec)) {
    from = pbtxt;
    set = apply_model_config(read_text_file(pbtxt), false, s.name, from, set, notes);
  }
  for (const std::string& note : notes) say(detail::concat("model ", s.name, ": ", from, ": ", note));
  ClassifierOptions co;
  co.dtype = set.dtype;
  co.max_batch = set.max_batch;
  // The threads are shared out between the instances, the first ones taking what is left.
  const int threads = o_.threads > 0 ? o_.threads : num_threads(), n = set.instances;
  VIT_CHECK(n >= 1, "a model needs one instance at least, not ", n);
  VIT_CHECK(n <= threads,
            from.empty() ? detail::concat("--instances ", n, " is")
                         : detail::concat(n, " instances (", from, ") are"),
            " more than the ", threads, " threads (--threads): each instance needs one at least");
  std::vector<Classifier*> instances;
  // The instances after the first are its replicas: the weights are in memory once.
  for (int i = 0; i < n; ++i) {
    const int share = n == 1 ? o_.threads : threads / n + (i < threads % n ? 1 : 0);
    co.threads = share;
    try {
      m->instances.push_back(i == 0 ? std::make_unique<Classifier>(s.checkpoint, co)
                                    : std::make_unique<Classifier>(m->instances.front()->replica(share)));
    } catch (const Error& e) {  // which model ("dtype bf16: this CPU has no bf16 ..." named none)
      throw Error(detail::concat("model ", s.name, " (", s.checkpoint, from.empty() ? "" : ", " + from,
                                 "): ", e.what()));
    }
    instances.push_back(m->instances.back().get());
  }
  const Classifier& c = m->classifier();
  VIT_CHECK(c.num_classes() > 0, s.checkpoint, " has no classifier head: nothing to serve");
  BatchOptions bo;
  bo.max_batch = set.dynamic ? set.max_batch : 1;  // without dynamic batching, a request per pass
  bo.max_delay = std::chrono::microseconds(set.dynamic ? set.max_delay_us() : 0);
  bo.max_queue = set.max_queue;
  bo.warmup = o_.warmup;
  const Clock::time_point start = Clock::now();
  m->batcher = std::make_unique<Batcher>(
      instances, bo, [this, name = s.name](const PassInfo& p) { metrics_.batch(name, p); });
  metrics_.instances(s.name, n);
  char took[32];
  std::snprintf(took, sizeof took, "%.2f", std::chrono::duration<double>(Clock::now() - start).count());
  // One line: the checkpoint, and how it is served (from its configuration, or the flags).
  const std::string shared =
      n == 1 ? "" : detail::concat("; ", n, " instances sharing ", threads, " threads and the weights");
  const std::string batching =
      set.dynamic ? detail::concat("max batch ", set.max_batch, ", max delay ", set.max_delay_ms, " ms")
                  : detail::concat("no dynamic batching, up to ", set.max_batch, " images a request");
  say(detail::concat("model ", s.name, ": ", s.checkpoint, " (", c.format(), ", ", c.num_classes(),
                     " classes, input ", c.channels(), "x", c.height(), "x", c.width(), "; ", batching,
                     ", max queue ", set.max_queue, ", ", c.dtype(), shared,
                     from.empty() ? "" : "; as " + from + " says", ")"));
  if (c.dtype() == "bf16")
    if (const std::string why = ops::bf16_emulated(); !why.empty())
      say(detail::concat("model ", s.name, ": warning: bf16: ", why));
  if (o_.warmup)
    say(detail::concat("model ", s.name, ": warmed up in ", took, " s (a pass of ", bo.max_batch,
                       bo.max_batch > 1 ? " images and one of 1" : " image",
                       n > 1 ? " on each instance)" : ")"));
  return m;
}

int64_t Host::capacity() const {
  int64_t total = 0;
  const ModelSettings d = defaults();
  for (const IndexEntry& e : index()) {
    const ModelPtr m = e.ready ? find(e.name) : nullptr;
    total += (m ? m->settings : d).capacity();
  }
  return total;
}

Host::~Host() {
  stop_batchers();
}

void Host::stop_batchers() {
  stop_polling();  // no model loads once they stop
  std::shared_lock lock(models_mu_);
  for (auto& [name, m] : models_) m->batcher->stop();
}

void Host::say(const std::string& line) {
  log_.line(line);
}

std::vector<std::string> Host::names() const {
  std::shared_lock lock(models_mu_);
  std::vector<std::string> out;
  for (const auto& [name, m] : models_) out.push_back(name);
  return out;
}

ModelPtr Host::find(const std::string& name) const {
  std::shared_lock lock(models_mu_);
  const auto it = models_.find(name);
  return it == models_.end() ? nullptr : it->second;
}

std::string Host::unknown(const std::string& name) const {
  // With explicit model control, a model not served may be one to load (the repositories
  // are read for it only then: otherwise a 404 costs no directory scan).
  if (o_.model_control == "explicit")
    for (const ServedModel& s : sources())
      if (s.name == name)
        return "model '" + name + "' is not loaded: POST /v2/repository/models/" + name + "/load loads it";
  std::string served;
  for (const std::string& n : names()) served += (served.empty() ? "" : ", ") + n;
  return "unknown model '" + name + "'; this server has: " + (served.empty() ? "none" : served);
}

namespace {
// Whether a and b are equal, in a time that depends on their lengths alone: a client timing
// the answers learns nothing of a key's bytes.
bool same_bytes(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}
}  // namespace

bool Host::authorized(std::string_view authorization) const {
  if (keys_.empty()) return true;
  // "Bearer" in any case (RFC 9110 section 11.1: the scheme is case-insensitive), one space.
  constexpr std::string_view scheme = "bearer ";
  if (authorization.size() <= scheme.size()) return false;
  for (size_t i = 0; i < scheme.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(authorization[i])) != scheme[i]) return false;
  const std::string_view token = authorization.substr(scheme.size());
  bool ok = false;
  for (const std::string& k : keys_) ok = same_bytes(token, k) || ok;  // every key compared
  return ok;
}

Inference Host::infer(const Model& m, std::vector<float> x, int64_t n, Clock::time_point deadline,
                      const std::function<bool()>& cancelled, int64_t timeout_us) {
  Inference out;
  if (n > m.settings.max_batch) {  // Triton's rule: a request fits in one pass
    out.status = 400;
    out.error = detail::concat("the request holds ", n, " images, more than the model's max_batch_size of ",
                               m.settings.max_batch, ": send at most ", m.settings.max_batch,
                               " a request (--max-batch)");
    return out;
  }
  auto job = std::make_shared<InferJob>();
  job->x = std::move(x);
  job->n = n;
  std::future<void> done = job->done.get_future();
  if (!m.batcher->submit(job)) {
    out.status = 503;
    out.error = "the queue is full (" + std::to_string(m.settings.max_queue) + " requests); retry later";
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
      out.error = timeout_us > 0 && double(timeout_us) < o_.timeout_s * 1e6
                      ? detail::concat("no answer within the request's timeout of ", timeout_us, " us")
                      : detail::concat("no answer within --timeout-s ", o_.timeout_s, " s");
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

Clock::time_point Host::deadline(Clock::time_point start, int64_t timeout_us) const {
  int64_t us = int64_t(o_.timeout_s * 1e6);
  if (timeout_us > 0) us = std::min(us, timeout_us);
  return start + std::chrono::microseconds(us);
}

ModelSettings Host::serving_info(const Model& m) const {
  ModelSettings s = m.settings;
  s.dtype = m.classifier().dtype();  // "" (the checkpoint's) resolved
  return s;
}

std::string Host::metrics_text() const {
  // The queue depths before the metrics' lock: a model unloaded meanwhile is freed with its
  // last reference here, and freeing joins its batcher, whose pass may be waiting for that
  // lock (the scrape then waited for itself, and the server for the scrape).
  const std::vector<std::string> models = names();
  std::map<std::string, int64_t> depth;
  for (const std::string& n : models) {
    const ModelPtr m = find(n);
    depth[n] = m ? m->batcher->queued() : 0;  // unloaded since
  }
  return metrics_.text(models, [&](const std::string& n) { return depth[n]; });
}

}  // namespace vit::serve
