#include "serve/host.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>
#include <utility>

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

// A model's folder in Triton's layout, with version folders (1/, 2/, ...): the highest
// version is served from its folder. Any other path is the checkpoint itself.
ServedModel resolve(const std::string& name, const std::string& path) {
  namespace fs = std::filesystem;
  ServedModel s{name, path, "1", ""};
  std::error_code ec;
  int64_t best = -1;
  for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string v = it->path().filename().string();
    int64_t n = -1;
    const auto r = std::from_chars(v.data(), v.data() + v.size(), n);
    if (r.ec == std::errc() && r.ptr == v.data() + v.size() && n > best && v == std::to_string(n) &&
        it->is_directory(ec))
      best = n;
  }
  if (best >= 0) {
    s.version = std::to_string(best);
    s.folder = path;
    s.checkpoint = (fs::path(path) / s.version).string();
  }
  return s;
}

// Each folder and .safetensors file in dir, named after it, in name order; hidden entries
// and other files (a README, a checkpoint's sidecar) are not models.
std::vector<ServedModel> repository_models(const std::string& dir) {
  namespace fs = std::filesystem;
  std::vector<ServedModel> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    const std::string name = p.filename().string();
    if (name.empty() || name[0] == '.') continue;
    if (it->is_directory(ec))
      out.push_back(resolve(name, p.string()));
    else if (p.extension() == ".safetensors" && it->is_regular_file(ec))
      out.push_back({p.stem().string(), p.string(), "1", ""});
  }
  VIT_CHECK(!ec, "--model-repository ", dir, ": cannot read (", ec.message(), ")");
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return out;
}

}  // namespace

Host::Host(const ServeOptions& o, std::ostream& log)
    : o_(o), max_body_(size_t(o.max_body_mb * 1024 * 1024)), log_(log) {
  VIT_CHECK(o.model_control == "none" || o.model_control == "explicit" || o.model_control == "poll",
            "--model-control-mode is none, explicit or poll, not '", o.model_control, "'");
  VIT_CHECK(o.repository_poll_s > 0, "--repository-poll-secs must be positive");
  if (!o.api_key_file.empty()) keys_ = read_keys(o.api_key_file);
  for (const ServedModel& s : at_start()) {
    models_[s.name] = make_model(s);
    metrics_.set_version(s.name, s.version);
  }
  if (o.model_control == "poll") poller_ = std::thread([this] { poll_loop(); });
}

std::vector<ServedModel> Host::at_start() const {
  const std::vector<ServedModel> all = sources(true);
  std::set<std::string> names;
  for (const ServedModel& s : all)
    VIT_CHECK(names.insert(s.name).second, "two models named ", s.name, " (--model, --model-repository)");
  VIT_CHECK(o_.load_models.empty() || o_.model_control == "explicit",
            "--load-model picks the models to load at start with --model-control-mode explicit; without it, "
            "every model is loaded");
  if (o_.model_control != "explicit") return all;
  const bool every = std::find(o_.load_models.begin(), o_.load_models.end(), "*") != o_.load_models.end();
  for (const std::string& n : o_.load_models)
    VIT_CHECK(n == "*" || names.count(n), "--load-model ", n, ": no --model-repository entry has that name");
  std::vector<ServedModel> out(all.begin(), all.begin() + std::ptrdiff_t(o_.models.size()));
  for (size_t i = o_.models.size(); i < all.size(); ++i)
    if (every || std::find(o_.load_models.begin(), o_.load_models.end(), all[i].name) != o_.load_models.end())
      out.push_back(all[i]);
  return out;
}

std::vector<ServedModel> Host::sources(bool each_repository_has_one) const {
  std::vector<ServedModel> all;
  for (const ServedModel& m : o_.models) all.push_back(resolve(m.name, m.checkpoint));
  for (const std::string& dir : o_.model_repositories) {
    std::vector<ServedModel> found = repository_models(dir);
    VIT_CHECK(!each_repository_has_one || !found.empty(), "--model-repository ", dir,
              ": no model in it (a folder or a .safetensors file per model)");
    for (ServedModel& m : found) all.push_back(std::move(m));
  }
  return all;
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
    std::ifstream in(pbtxt);
    std::ostringstream text;
    text << in.rdbuf();
    VIT_CHECK(in, pbtxt, ": cannot read");
    from = pbtxt;
    set = apply_model_config(text.str(), false, s.name, from, set, notes);
  }
  for (const std::string& note : notes) say(detail::concat("model ", s.name, ": ", from, ": ", note));
  ClassifierOptions co;
  co.dtype = set.dtype;
  co.max_batch = set.max_batch;
  // The threads are shared out between the instances, the first ones taking what is left.
  const int threads = o_.threads > 0 ? o_.threads : num_threads(), n = set.instances;
  VIT_CHECK(n <= threads,
            from.empty() ? detail::concat("--instances ", n, " is")
                         : detail::concat(n, " instances (", from, ") are"),
            " more than the ", threads, " threads (--threads): each instance needs one at least");
  std::vector<Classifier*> instances;
  // The instances after the first are its replicas: the weights are in memory once.
  for (int i = 0; i < n; ++i) {
    const int share = n == 1 ? o_.threads : threads / n + (i < threads % n ? 1 : 0);
    co.threads = share;
    m->instances.push_back(i == 0 ? std::make_unique<Classifier>(s.checkpoint, co)
                                  : std::make_unique<Classifier>(m->instances.front()->replica(share)));
    instances.push_back(m->instances.back().get());
  }
  const Classifier& c = m->classifier();
  VIT_CHECK(c.num_classes() > 0, s.checkpoint, " has no classifier head: nothing to serve");
  BatchOptions bo;
  bo.max_batch = set.dynamic ? set.max_batch : 1;  // without dynamic batching, a request per pass
  bo.max_delay = std::chrono::microseconds(set.dynamic ? int64_t(set.max_delay_ms * 1000) : 0);
  bo.max_queue = set.max_queue;
  bo.warmup = o_.warmup;
  const Clock::time_point start = Clock::now();
  m->batcher = std::make_unique<Batcher>(
      instances, bo, [this, name = s.name](const PassInfo& p) { metrics_.batch(name, p); });
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

void Host::stop_polling() {
  {
    std::lock_guard<std::mutex> lock(poll_mu_);
    polling_stopped_ = true;
  }
  poll_cv_.notify_all();
  if (poller_.joinable()) poller_.join();
}

void Host::stop_batchers() {
  stop_polling();  // no model loads once they stop
  std::shared_lock lock(models_mu_);
  for (auto& [name, m] : models_) m->batcher->stop();
}

void Host::say(const std::string& line) {
  std::lock_guard<std::mutex> lock(log_mu_);
  log_ << line << std::endl;
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

std::vector<Host::IndexEntry> Host::index() const {
  std::map<std::string, IndexEntry> all;
  for (const ServedModel& s : sources()) all[s.name] = {s.name, false, s.version};
  {
    std::shared_lock lock(models_mu_);
    for (const auto& [name, m] : models_) all[name] = {name, true, m->version};
  }
  std::vector<IndexEntry> out;
  for (auto& [name, e] : all) out.push_back(std::move(e));
  return out;
}

void Host::load(const std::string& name, const std::string& config) {
  std::lock_guard<std::mutex> one(load_mu_);
  const std::vector<ServedModel> all = sources();
  const auto source =
      std::find_if(all.begin(), all.end(), [&](const ServedModel& s) { return s.name == name; });
  if (source == all.end())
    throw RequestError(404, "no --model or --model-repository entry named '" + name + "' to load");
  swap_in(*source, config);
}

void Host::swap_in(const ServedModel& source, const std::string& config) {
  ModelPtr m = make_model(source, config);  // seconds, while the old copy (if any) goes on serving
  ModelPtr old;
  {
    std::unique_lock lock(models_mu_);
    old = std::exchange(models_[source.name], std::move(m));
  }
  metrics_.set_version(source.name, source.version);
  say(detail::concat("model ", source.name, old ? ": loaded again" : ": loaded"));
  if (on_load_) on_load_();
  // The old copy is freed when its last request ends; its batcher answers what it holds.
}

// What a model's files are now: each one's name, size and time of change (a folder's files,
// not its subfolders'), so that a poll sees a checkpoint or config.pbtxt written since.
std::string Host::fingerprint(const ServedModel& s) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<std::string> files;
  auto add = [&](const fs::path& p) {
    const auto size = fs::file_size(p, ec);
    const auto when = fs::last_write_time(p, ec).time_since_epoch().count();
    files.push_back(detail::concat(p.filename().string(), ":", size, ":", when));
  };
  for (const std::string& dir : {s.folder, s.checkpoint}) {
    if (dir.empty()) continue;
    if (fs::is_directory(dir, ec)) {
      for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
        if (it->is_regular_file(ec)) add(it->path());
    } else {
      add(dir);
    }
  }
  std::sort(files.begin(), files.end());
  std::string out = s.checkpoint + "\n";  // a new version folder is a change too
  for (const std::string& f : files) out += f + "\n";
  return out;
}

void Host::set_on_load(std::function<void()> f) {
  std::lock_guard<std::mutex> one(load_mu_);  // loads call it under this lock
  on_load_ = std::move(f);
}

void Host::poll() {
  std::lock_guard<std::mutex> one(load_mu_);
  std::vector<ServedModel> all;
  try {
    all = sources();
  } catch (const Error& e) {  // a repository gone or unreadable: nothing changes until it is back
    say(std::string("poll: ") + e.what());
    return;
  }
  std::set<std::string> found;
  for (const ServedModel& s : all) {
    found.insert(s.name);
    const std::string now = fingerprint(s);
    const ModelPtr m = find(s.name);
    const auto failed = failed_.find(s.name);
    if ((m && m->fingerprint == now) || (failed != failed_.end() && failed->second == now)) continue;
    try {
      swap_in(s, "");
      failed_.erase(s.name);
    } catch (const std::exception& e) {  // tried again once its files change; a served copy serves on
      failed_[s.name] = now;
      say(detail::concat("model ", s.name, ": did not load", m ? " again (the old copy serves on)" : "", ": ",
                         e.what()));
    }
  }
  for (const std::string& name : names())
    if (!found.count(name)) {
      {
        std::unique_lock lock(models_mu_);
        models_.erase(name);
      }
      say("model " + name + ": unloaded (gone from its repository)");
    }
}

void Host::poll_loop() {
  const auto every = std::chrono::microseconds(int64_t(o_.repository_poll_s * 1e6));
  std::unique_lock<std::mutex> lock(poll_mu_);
  while (!poll_cv_.wait_for(lock, every, [this] { return polling_stopped_; })) {
    lock.unlock();
    try {
      poll();
    } catch (const std::exception& e) {  // out of memory, say: the next poll tries again
      say(std::string("poll: ") + e.what());
    }
    lock.lock();
  }
}

void Host::unload(const std::string& name) {
  std::lock_guard<std::mutex> one(load_mu_);
  ModelPtr old;
  {
    std::unique_lock lock(models_mu_);
    if (const auto it = models_.find(name); it != models_.end()) {
      old = std::move(it->second);
      models_.erase(it);
    }
  }
  if (!old) throw RequestError(404, unknown(name));
  say("model " + name + ": unloaded");
}

void Host::control(const std::string& name, bool load, const std::string& config) {
  const char* what = load ? "load" : "unload";
  if (o_.model_control != "explicit")
    throw RequestError(400, detail::concat(o_.model_control == "poll"
                                               ? "models are loaded and unloaded as their repository changes"
                                               : "models are loaded at start and kept",
                                           ": start vit serve with --model-control-mode explicit to ", what,
                                           " them by request"));
  if (!load) return unload(name);  // RequestError(404) when not served
  try {
    this->load(name, config);  // RequestError(404) when no checkpoint has that name
  } catch (const RequestError&) {
    throw;
  } catch (const Error& e) {
    throw RequestError(400, "model '" + name + "' did not load: " + e.what());
  }
}

bool Host::authorized(std::string_view authorization) const {
  if (keys_.empty()) return true;
  for (const std::string& k : keys_)
    if (authorization.size() == 7 + k.size() && authorization.substr(0, 7) == "Bearer " &&
        authorization.substr(7) == k)
      return true;
  return false;
}

Inference Host::infer(const Model& m, std::vector<float> x, int64_t n, Clock::time_point deadline,
                      const std::function<bool()>& cancelled) {
  auto job = std::make_shared<InferJob>();
  job->x = std::move(x);
  job->n = n;
  std::future<void> done = job->done.get_future();
  Inference out;
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
  s.max_batch = m.settings.max_batch;
  s.dynamic = m.settings.dynamic;
  s.max_delay_us = int64_t(m.settings.max_delay_ms * 1000);
  s.max_queue = m.settings.max_queue;
  s.instances = int(m.instances.size());
  s.dtype = m.classifier().dtype();
  return s;
}

std::string Host::metrics_text() const {
  return metrics_.text(names(), [this](const std::string& n) {
    const ModelPtr m = find(n);
    return m ? m->batcher->queued() : int64_t(0);  // unloaded since
  });
}

}  // namespace vit::serve
