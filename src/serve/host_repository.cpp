// Host's model repository (host.h): where the models come from (--model, --model-repository,
// Triton's layout), which load at start, and loading, unloading and polling while serving.
#include "serve/host.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <filesystem>
#include <map>
#include <set>
#include <system_error>
#include <thread>
#include <utility>

#include "core/check.h"

namespace vit::serve {

namespace {

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

std::vector<ServedModel> Host::at_start() const {
  // An empty repository is a mistake when nothing can join it later; polled or loaded by
  // request, models may come once the server runs (Triton starts so too).
  const std::vector<ServedModel> all = sources(o_.model_control == "none");
  std::map<std::string, std::string> names;  // name -> where it came from
  for (const ServedModel& s : all) {
    const std::string from = s.folder.empty() ? s.checkpoint : s.folder;

    const auto [it, fresh] = names.emplace(s.name, from);
    VIT_CHECK(fresh, "two models named ", s.name, ": ", it->second, " and ", from,
              " (each --model NAME and each entry of a --model-repository names one model)");
  }
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

void Host::stop_polling() {
  {
    std::lock_guard<std::mutex> lock(poll_mu_);
    polling_stopped_ = true;
  }
  poll_cv_.notify_all();
  if (poller_.joinable()) poller_.join();
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
      ModelPtr old;  // freed after the lock, as unload's: freeing joins the batcher, whose pass
                     // may wait for the metrics' lock while a scrape holds it and waits for this one
      {
        std::unique_lock lock(models_mu_);
        if (const auto it = models_.find(name); it != models_.end()) {
          old = std::move(it->second);
          models_.erase(it);
        }
      }
      old.reset();
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

}  // namespace vit::serve
