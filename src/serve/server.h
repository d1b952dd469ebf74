// vit serve: classifiers behind HTTP, on the Open Inference Protocol's REST API (KServe v2,
// as Triton, Seldon and OpenVINO Model Server speak it) and TorchServe's image endpoint,
// with dynamic batching (batcher.h) and Prometheus metrics (metrics.h). docs/serving.md.
#pragma once
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace vit::serve {

// HTTPS (uvicorn's flag names; tls.h).
struct TlsOptions {
  std::string certfile;  // --ssl-certfile, PEM: the server's certificate, then any intermediate ones
  std::string keyfile;   // --ssl-keyfile, PEM: its private key, not encrypted
  std::string ca_certs;  // --ssl-ca-certs, PEM: when given, clients must show a certificate these CAs signed
  bool on() const { return !certfile.empty(); }
};

struct ServedModel {
  std::string name, checkpoint;  // --model NAME=CHECKPOINT
  // Triton's layout, a folder of version folders (NAME/3/): the highest is served, as that
  // version; its config.pbtxt is in `folder`. Otherwise version "1" and folder "".
  std::string version = "1", folder;
};

// The shortest --repository-poll-secs: each poll reads every repository entry's files and
// dates, and polls without a pause kept a third of a core busy (1e-9 s was taken).
inline constexpr double kMinRepositoryPollS = 0.1;

struct ServeOptions {
  std::vector<ServedModel> models;
  // --model-repository: each folder and .safetensors file in each of these is a model too.
  std::vector<std::string> model_repositories;
  // --model-control-mode (Triton's): "none"; "explicit" to load and unload models while
  // serving (POST /v2/repository/models/{m}/load, unload); "poll" to follow the repositories.
  std::string model_control = "none";
  // --load-model (Triton's), with explicit control: the repository models to load at start
  // ("*": all). --model's are loaded at start in any mode; without explicit control, all are.
  std::vector<std::string> load_models;
  double repository_poll_s = 15;  // --repository-poll-secs: with --model-control-mode poll
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port (the first log line says which)
  int threads = 0;  // OpenMP threads of the forward passes (0: every core)
  // Copies of each model, each running its own forward passes on its share of the threads
  // (Triton's instance_group count): one gathers the next batch while the others compute.
  int instances = 1;
  std::string dtype;  // "": the checkpoint's (ClassifierOptions::dtype)
  int64_t max_batch = 16;
  double max_delay_ms = 5;
  int64_t max_queue = 256;
  double max_body_mb = 32;
  double timeout_s = 30;
  std::string api_key_file;  // bearer tokens, one per line; empty: no auth
  TlsOptions tls;            // --ssl-*: HTTPS when tls.on()
  bool warmup = true;    // passes of max_batch and 1 images on each instance before listening (BatchOptions)
  int keep_alive_s = 5;  // an idle keep-alive connection is closed after this (it holds a thread)
  int http_threads = 256;  // connections served at once (threads start as they are needed)
  int grpc_port = -1;      // >= 0: the gRPC API too, on this port (0: any free one); grpc_server.h
  bool access_log = true;  // --no-access-log (uvicorn's): no line per request
};

// Loads the models, listens, and answers until SIGTERM or SIGINT: then it stops accepting,
// answers the requests in flight and returns 0. Writes the access log to `log`, one line per
// request (from a thread of its own: a stream that is not read drops lines, it does not stop
// the server). Throws vit::Error when a model does not load or the port cannot be bound.
int serve(const ServeOptions& o, std::ostream& log);

}  // namespace vit::serve
