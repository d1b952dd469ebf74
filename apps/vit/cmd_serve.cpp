// vit serve: classifiers behind HTTP (KServe v2 and TorchServe's endpoints) and gRPC (KServe v2;
// docs/serving.md).
// Flags named as Triton's and TorchServe's users would look for them.
#include <iostream>
#include <memory>

#include "commands.h"
#include "core/check.h"
#include "serve/server.h"
#include "validators.h"

namespace vit::app {

Run add_serve(CLI::App& cmd) {
  struct Flags {
    serve::ServeOptions o;
    std::vector<std::string> models;
  };
  auto f = std::make_shared<Flags>();
  serve::ServeOptions& o = f->o;
  cmd.add_option("-m,--model", f->models,
                 "NAME=CHECKPOINT, repeatable: a model to serve under NAME (vitcpp, timm, Hugging Face or "
                 "vit-pytorch; file or directory, as vit predict --checkpoint)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd.add_option("--model-repository", o.model_repositories,
                 "DIR, repeatable: serve each folder and .safetensors file in DIR as a model named after it "
                 "(as Triton's flag; hidden entries and other files are left out)")
      ->check(CLI::ExistingDirectory)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd.add_option("--model-control-mode", o.model_control,
                 "explicit: models can be loaded (again) and unloaded while serving, with POST "
                 "/v2/repository/models/NAME/load and unload (Triton's flag); poll: the repositories are "
                 "read every --repository-poll-secs, new and changed models loaded, removed ones unloaded; "
                 "none: models are loaded at start and kept")
      ->check(CLI::IsMember({"none", "explicit", "poll"}))
      ->capture_default_str();
  cmd.add_option("--repository-poll-secs", o.repository_poll_s,
                 "with --model-control-mode poll: seconds between reads of the repositories, 0.1 or more "
                 "(Triton's flag)")
      ->check(at_least(serve::kMinRepositoryPollS))
      ->capture_default_str();
  cmd.add_option(
         "--load-model", o.load_models,
         "NAME, repeatable, with --model-control-mode explicit: a --model-repository model to load at "
         "start ('*': all; Triton's flag). Without it, explicit control loads --model's models only")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd.add_option("--host", o.host, "address to listen on (0.0.0.0: every interface)")->capture_default_str();
  cmd.add_option("--port", o.port, "port (0: any free one, printed)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  cmd.add_option("--grpc-port", o.grpc_port,
                 "also serve the Open Inference Protocol's gRPC API (Triton's and KServe's gRPC clients) on "
                 "this port (0: any free one, printed); the same models, keys and TLS as HTTP")
      ->check(CLI::Range(0, 65535));
  cmd.add_option("--threads", o.threads, "threads of the forward passes (default: every core)")
      ->check(thread_count());
  cmd.add_option("--instances", o.instances,
                 "copies of each model (as Triton's instance_group count), each running its own forward "
                 "passes on its share of --threads; they share one copy of the weights")
      ->check(positive())
      ->capture_default_str();
  cmd.add_option(
         "--dtype", o.dtype,
         "fp32, bf16 (AVX-512 bf16 or AMX) or int8 for the blocks' products (default: fp32, or int8 for "
         "a vit quantize checkpoint)")
      ->transform(dtype_of({"fp32", "bf16", "int8"}));
  cmd.add_option("--max-batch", o.max_batch, "images per forward pass (dynamic batching; 1: none)")
      ->check(positive())
      ->capture_default_str();
  cmd.add_option("--max-delay-ms", o.max_delay_ms,
                 "how long the oldest request waits for others to batch with")
      ->check(non_negative())
      ->capture_default_str();
  cmd.add_option("--max-queue", o.max_queue, "requests waiting per model; more get 503 with Retry-After")
      ->check(positive())
      ->capture_default_str();
  cmd.add_option("--max-body-mb", o.max_body_mb, "largest request body; larger gets 413")
      ->check(positive())
      ->capture_default_str();
  cmd.add_option("--timeout-s", o.timeout_s, "a request not answered in this time gets 504")
      ->check(positive())
      ->capture_default_str();
  cmd.add_option("--api-key-file", o.api_key_file,
                 "bearer tokens, one per line: every endpoint but /v2/health/* and /ping then needs "
                 "'Authorization: Bearer KEY' (401 without)")
      ->check(CLI::ExistingFile);
  cmd.add_option("--http-threads", o.http_threads,
                 "connections served at once, each on a thread started when needed; while more wait, each "
                 "answer closes its connection so that they take turns")
      ->check(positive())
      ->capture_default_str();
  cmd.add_option(
         "--timeout-keep-alive", o.keep_alive_s,
         "seconds an idle keep-alive connection stays open (it holds one of --http-threads meanwhile)")
      ->check(positive())
      ->capture_default_str();
  cmd.add_flag_callback(
      "--no-warmup", [&o] { o.warmup = false; },
      "listen at once: without it, each instance first runs a pass of --max-batch images and one of 1 "
      "(Triton's model_warmup), so that the first requests do not make the buffers and kernels");
  cmd.add_flag_callback(
      "--no-access-log", [&o] { o.access_log = false; },
      "no log line per request (uvicorn's flag); the metrics count them still. The log is written on a "
      "thread of its own: lines a stdout nobody reads cannot take are dropped and counted");
  cmd.add_option("--ssl-certfile", o.tls.certfile,
                 "HTTPS: the server's certificate (PEM, then any intermediate ones); with --ssl-keyfile")
      ->check(CLI::ExistingFile);
  cmd.add_option("--ssl-keyfile", o.tls.keyfile, "HTTPS: the certificate's private key (PEM, not encrypted)")
      ->check(CLI::ExistingFile);
  cmd.add_option("--ssl-ca-certs", o.tls.ca_certs,
                 "HTTPS with client certificates (mutual TLS): clients must show one these CAs (PEM) signed")
      ->check(CLI::ExistingFile);
  return [f] {
    note_thread_limit(f->o.threads);  // the server holds its passes to the limit (as use_threads)
    for (const std::string& m : f->models) {
      const size_t eq = m.find('=');
      VIT_USAGE_CHECK(eq != std::string::npos && eq > 0 && eq + 1 < m.size(),
                      "--model wants NAME=CHECKPOINT, got '", m, "'");
      f->o.models.push_back({m.substr(0, eq), m.substr(eq + 1), "1", ""});
    }
    return serve::serve(f->o, std::cout);
  };
}

}  // namespace vit::app
