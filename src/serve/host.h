// What vit serve's two front ends share: HTTP (server.cpp) and gRPC (grpc_server.cpp) answer
// from one Host, which holds the models with their batchers, the metrics, the API keys and
// the access log.
#pragma once
#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <ostream>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "serve/batcher.h"
#include "serve/log_writer.h"
#include "serve/metrics.h"
#include "serve/model_config.h"
#include "serve/protocol.h"
#include "serve/server.h"
#include "vit/classifier.h"

namespace vit::serve {

struct Model {
  // --instances: the first loaded, the others its replicas (the same weights), each with its own threads.
  std::vector<std::unique_ptr<Classifier>> instances;
  std::unique_ptr<Batcher> batcher;
  ModelSettings settings;     // the flags', or its configuration's (model_config.h)
  std::string fingerprint;    // its files when it was loaded (Host::fingerprint)
  std::string version = "1";  // its version folder's name in Triton's layout (ServedModel)
  const Classifier& classifier() const { return *instances.front(); }  // metadata and preprocessing
};
// Held by each request that uses the model: an unloaded model is freed when the last one ends.
using ModelPtr = std::shared_ptr<const Model>;

// A request's answer from the batcher: the logits, or the status to answer and why.
struct Inference {
  int status = 200;  // 503 the queue is full, 504 past the deadline, 500 the forward failed
  std::string error;
  std::vector<float> logits;  // [n, K] when status is 200
  int64_t batch = 0;          // images in the forward pass that ran it
};

class Host {
 public:
  // Loads every model of --model and --model-repository (throws vit::Error when one does
  // not), with its batcher's warm-up.
  Host(const ServeOptions& o, std::ostream& log);
  ~Host();  // stops the batchers: what they hold is answered first

  const ServeOptions& options() const { return o_; }
  size_t max_body() const { return max_body_; }
  Metrics& metrics() { return metrics_; }
  std::vector<std::string> names() const;  // the models served now, in name order
  // The model served as name, or null.
  ModelPtr find(const std::string& name) const;
  // "unknown model 'x'; this server has: a, b"
  std::string unknown(const std::string& name) const;
  // Whether an Authorization value ("Bearer KEY") opens the endpoints that need a key; with
  // no --api-key-file, always.
  bool authorized(std::string_view authorization) const;
  bool needs_key() const { return !keys_.empty(); }
  // Queues x (n images) and waits for its logits until deadline, or until cancelled() (the
  // client went away; polled) says to stop waiting.
  // timeout_us: the request's own timeout (InferRequest), for the 504's message.
  Inference infer(const Model& m, std::vector<float> x, int64_t n, Clock::time_point deadline,
                  const std::function<bool()>& cancelled = {}, int64_t timeout_us = 0);
  // A request's deadline: --timeout-s after its start, or its own timeout when sooner.
  Clock::time_point deadline(Clock::time_point start, int64_t timeout_us) const;
  // GET /v2/models/{m}/config's facts.
  ModelSettings serving_info(const Model& m) const;  // its settings, with the dtype it runs in
  // The flags' settings of a model (model_config.h).
  ModelSettings defaults() const;
  // The most requests that the models of the index hold at once (ModelSettings::capacity;
  // the flags' for a model not loaded).
  int64_t capacity() const;
  // /metrics: the models' counters and queue depths.
  std::string metrics_text() const;
  void say(const std::string& line);  // one log line, whole, queued for the log's thread (log_writer.h)
  std::atomic<bool> stopping{false};  // SIGTERM or SIGINT came: not ready, no new requests
  void stop_batchers();               // stops polling; answers what is queued, then ends their threads

  // Triton's model repository extension. index: every model served, and every other that
  // load() would find (ready false), in name order.
  struct IndexEntry {
    std::string name;
    bool ready = false;
    std::string version = "1";
  };
  std::vector<IndexEntry> index() const;
  // Loads the model `name` from its --model checkpoint or its --model-repository entry (the
  // folders read again now, so a model added since is found); a model served already is
  // loaded again and replaces the old copy once ready, which answers what it holds. config:
  // Triton's model configuration in JSON, in place of the folder's config.pbtxt ("": none).
  // RequestError(404) when no checkpoint has that name; vit::Error when it does not load.
  void load(const std::string& name, const std::string& config = "");
  // Stops serving `name`; the requests it holds are answered. RequestError(404) when not served.
  void unload(const std::string& name);
  // What the front ends' load and unload requests do: load or unload as above, with
  // --model-control-mode explicit (RequestError(400) without it); a model that does not load
  // is RequestError(400) with why.
  void control(const std::string& name, bool load, const std::string& config = "");
  // --model-control-mode poll (Triton's), every --repository-poll-secs on a thread of its
  // own: loads each model that is new, or whose files changed (swapped in once ready), and
  // unloads each one gone from its repository. One that does not load is logged, and tried
  // again once its files change; its old copy, if any, serves on.
  void poll();
  // Called after each load (the gRPC side sizes its threads by the models).
  void set_on_load(std::function<void()> f);

 private:
  // config: as load's; otherwise a folder's config.pbtxt is read.
  ModelPtr make_model(const ServedModel& s, const std::string& config = "");
  // Makes the model and serves it in place of the old copy (under load_mu_).
  void swap_in(const ServedModel& source, const std::string& config);
  static std::string fingerprint(const ServedModel& s);
  void poll_loop();
  void stop_polling();
  // --model's entries, then each --model-repository's (read now); with the flag, a
  // repository without a model is an error (at start).
  std::vector<ServedModel> sources(bool each_repository_has_one = false) const;
  // The models to load at start: all of them, or with explicit control, --model's and those
  // --load-model names (each of which must exist).
  std::vector<ServedModel> at_start() const;

  const ServeOptions& o_;
  const size_t max_body_;  // --max-body-mb in bytes: as sent, as decoded, and of decoded images
  LogWriter log_;
  std::vector<std::string> keys_;
  Metrics metrics_;  // before the models: their batchers report to it until they stop
  mutable std::shared_mutex models_mu_;
  std::map<std::string, ModelPtr> models_;
  std::mutex load_mu_;                         // one load, unload or poll at a time
  std::function<void()> on_load_;              // under load_mu_
  std::map<std::string, std::string> failed_;  // poll: a model that did not load, by its files then
  std::mutex poll_mu_;
  std::condition_variable poll_cv_;
  bool polling_stopped_ = false;
  std::thread poller_;  // last: it starts once the rest is made
};

}  // namespace vit::serve
