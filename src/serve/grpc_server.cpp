#include "serve/grpc_server.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "core/check.h"
#include "inference.grpc.pb.h"
#include "serve/grpc_request.h"
#include "vit/core/version.h"

namespace vit::serve {

namespace {

namespace pb = inference;

// The HTTP status that a Host or the protocol's parsing answers, as gRPC's code (as Triton
// maps them) and the code's name for the access log; the metrics count gRPC calls under the
// HTTP status. Any other status is INTERNAL.
struct Code {
  int status;
  grpc::StatusCode code;
  const char* name;
};
constexpr Code kCodes[] = {
    {200, grpc::StatusCode::OK, "OK"},
    {400, grpc::StatusCode::INVALID_ARGUMENT, "INVALID_ARGUMENT"},
    {401, grpc::StatusCode::UNAUTHENTICATED, "UNAUTHENTICATED"},
    {404, grpc::StatusCode::NOT_FOUND, "NOT_FOUND"},
    {413, grpc::StatusCode::RESOURCE_EXHAUSTED, "RESOURCE_EXHAUSTED"},
    {499, grpc::StatusCode::CANCELLED, "CANCELLED"},  // nginx's "client closed request"
    {503, grpc::StatusCode::UNAVAILABLE, "UNAVAILABLE"},
    {504, grpc::StatusCode::DEADLINE_EXCEEDED, "DEADLINE_EXCEEDED"},
};

Code code_of(int status) {
  for (const Code& c : kCodes)
    if (c.status == status) return c;
  return {status, grpc::StatusCode::INTERNAL, "INTERNAL"};
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  VIT_CHECK(in, path, ": cannot read");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// "ipv4:127.0.0.1:5000" and "ipv6:[::1]:5000" as the HTTP log writes addresses.
std::string peer_address(const std::string& peer) {
  const size_t colon = peer.find(':');
  return colon == std::string::npos ? peer : peer.substr(colon + 1);
}

// What one call did, for the access log and the metrics.
struct Call {
  Clock::time_point start = Clock::now();
  std::string model;
  ModelPtr held;  // the model, kept while the call uses it (it may be unloaded meanwhile)
  int64_t batch = 0;
  bool inference = false;
};

class Service final : public pb::GRPCInferenceService::Service {
 public:
  explicit Service(Host& host) : host_(host) {}

  grpc::Status ServerLive(grpc::ServerContext* ctx, const pb::ServerLiveRequest*,
                          pb::ServerLiveResponse* res) override {
    return call(ctx, "ServerLive", true, [&](Call&) { res->set_live(true); });
  }
  grpc::Status ServerReady(grpc::ServerContext* ctx, const pb::ServerReadyRequest*,
                           pb::ServerReadyResponse* res) override {
    return call(ctx, "ServerReady", true, [&](Call&) { res->set_ready(!host_.stopping); });
  }
  grpc::Status ModelReady(grpc::ServerContext* ctx, const pb::ModelReadyRequest* req,
                          pb::ModelReadyResponse* res) override {
    // A model or version the server does not have is not ready, not an error, as Triton
    // answers: tritonclient.grpc's is_model_ready then gives False (NOT_FOUND made a loop
    // waiting for a model to load raise).
    return call(ctx, "ModelReady", false, [&](Call& c) {
      const ModelPtr m = host_.find(req->name());
      const bool ready = m && (req->version().empty() || req->version() == m->version);
      if (m) c.model = req->name();
      res->set_ready(ready);
    });
  }
  grpc::Status ServerMetadata(grpc::ServerContext* ctx, const pb::ServerMetadataRequest*,
                              pb::ServerMetadataResponse* res) override {
    return call(ctx, "ServerMetadata", false, [&](Call&) {
      res->set_name("vitcpp");
      res->set_version(version());
      for (const std::string& e : server_extensions()) res->add_extensions(e);
    });
  }
  grpc::Status ModelMetadata(grpc::ServerContext* ctx, const pb::ModelMetadataRequest* req,
                             pb::ModelMetadataResponse* res) override {
    return call(ctx, "ModelMetadata", false, [&](Call& c) {
      const Classifier& m = model(req->name(), req->version(), c).classifier();
      res->set_name(req->name());
      res->add_versions(c.held->version);
      res->set_platform("vitcpp");
      auto tensor = [](auto* t, const char* name, const char* type, std::vector<int64_t> shape) {
        t->set_name(name);
        t->set_datatype(type);
        for (const int64_t d : shape) t->add_shape(d);
      };
      tensor(res->add_inputs(), "pixel_values", "FP32", {-1, m.channels(), m.height(), m.width()});
      tensor(res->add_inputs(), "image", "BYTES", {-1});
      tensor(res->add_outputs(), "logits", "FP32", {-1, m.num_classes()});
    });
  }
  grpc::Status ModelInfer(grpc::ServerContext* ctx, const pb::ModelInferRequest* req,
                          pb::ModelInferResponse* res) override {
    return call(ctx, "ModelInfer", false, [&](Call& c) { infer(ctx, *req, *res, c); });
  }
  // One stream request's answer (with `error` as its error_message, when not empty) written,
  // and its place among the stream's requests in flight given back.
  template <class S, class W>
  static void stream_answer(S& s, W* stream, const pb::ModelInferRequest& req,
                            pb::ModelStreamInferResponse& answer, const std::string& error) {
    if (!error.empty()) {
      answer.set_error_message(error);
      answer.mutable_infer_response()->set_model_name(req.model_name());
      answer.mutable_infer_response()->set_id(req.id());
    }
    std::lock_guard<std::mutex> lock(s.mu);
    stream->Write(answer);  // false once the client is gone: nothing more to do
    --s.in_flight;
    s.done.notify_all();
  }
  // Each request read is answered as ModelInfer answers it, on a thread of its own, so that
  // a stream's requests are batched together; the answers go out as they are ready (the
  // request's id tells them apart, as with Triton). A request that fails gets its error in
  // error_message, and the stream goes on. At most a model's capacity of one stream's
  // requests are in flight; reading waits meanwhile.
  grpc::Status ModelStreamInfer(
      grpc::ServerContext* ctx,
      grpc::ServerReaderWriter<pb::ModelStreamInferResponse, pb::ModelInferRequest>* stream) override {
    Stream s(ctx);
    if (!open(&s)) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the server is stopping");
    const int64_t most = std::max<int64_t>(1, host_.defaults().capacity());
    for (auto req = std::make_shared<pb::ModelInferRequest>(); stream->Read(req.get());
         req = std::make_shared<pb::ModelInferRequest>()) {
      {
        std::unique_lock<std::mutex> lock(s.mu);
        s.done.wait(lock, [&] { return s.in_flight < most; });
        ++s.in_flight;
      }
      // A thread that cannot start (out of threads) answers its request here: the exception
      // would leave this frame while the other requests' threads still use it.
      try {
        std::thread([this, &s, stream, req] {
          pb::ModelStreamInferResponse answer;
          const grpc::Status status = call(s.ctx, "ModelStreamInfer", false, [&](Call& c) {
            if (host_.stopping) throw RequestError(503, "the server is stopping");
            infer(s.ctx, *req, *answer.mutable_infer_response(), c);
          });
          stream_answer(s, stream, *req, answer, status.ok() ? "" : status.error_message());
        }).detach();
      } catch (const std::exception& e) {  // std::system_error, std::bad_alloc
        pb::ModelStreamInferResponse answer;
        stream_answer(s, stream, *req, answer, std::string("no thread for the request: ") + e.what());
      }
    }
    {
      std::unique_lock<std::mutex> lock(s.mu);
      s.done.wait(lock, [&] { return s.in_flight == 0; });  // the threads use this frame
    }
    close(&s);
    return grpc::Status::OK;
  }

  // At shutdown: each open stream's requests in flight are answered (within --timeout-s),
  // then the stream is cancelled, which ends its wait for the client's next request.
  void close_streams() {
    std::lock_guard<std::mutex> lock(streams_mu_);  // each stream stays until it is cancelled
    streams_closing_ = true;
    for (Stream* s : streams_) {
      std::unique_lock<std::mutex> wait(s->mu);
      s->done.wait_for(wait, std::chrono::microseconds(int64_t(host_.options().timeout_s * 1e6)),
                       [&] { return s->in_flight == 0; });
      s->ctx->TryCancel();
    }
  }
  grpc::Status ModelConfig(grpc::ServerContext* ctx, const pb::ModelConfigRequest* req,
                           pb::ModelConfigResponse* res) override {
    return call(ctx, "ModelConfig", false, [&](Call& c) {
      const Model& m = model(req->name(), req->version(), c);
      grpc_model_config(req->name(), m.classifier(), host_.serving_info(m), *res->mutable_config());
    });
  }
  grpc::Status ModelStatistics(grpc::ServerContext* ctx, const pb::ModelStatisticsRequest* req,
                               pb::ModelStatisticsResponse* res) override {
    return call(ctx, "ModelStatistics", false, [&](Call& c) {
      // "": every model served (as GET /v2/models/stats).
      if (req->name().empty() && !req->version().empty())
        throw RequestError(400, "a version needs a model name");
      const std::vector<std::string> names =
          req->name().empty() ? host_.names() : std::vector<std::string>{req->name()};
      if (!req->name().empty()) model(req->name(), req->version(), c);
      grpc_statistics(host_.metrics().stats(names), *res);
    });
  }
  grpc::Status RepositoryIndex(grpc::ServerContext* ctx, const pb::RepositoryIndexRequest* req,
                               pb::RepositoryIndexResponse* res) override {
    return call(ctx, "RepositoryIndex", false, [&](Call&) {
      repository(req->repository_name());
      for (const Host::IndexEntry& e : host_.index()) {
        if (req->ready() && !e.ready) continue;
        pb::RepositoryIndexResponse::ModelIndex* m = res->add_models();
        m->set_name(e.name);
        m->set_version(e.version);
        m->set_state(std::string(e.ready ? "READY" : "UNAVAILABLE"));
        if (!e.ready) m->set_reason(std::string("unloaded"));
      }
    });
  }
  grpc::Status RepositoryModelLoad(grpc::ServerContext* ctx, const pb::RepositoryModelLoadRequest* req,
                                   pb::RepositoryModelLoadResponse*) override {
    return call(ctx, "RepositoryModelLoad", false, [&](Call& c) { control(*req, true, c); });
  }
  grpc::Status RepositoryModelUnload(grpc::ServerContext* ctx, const pb::RepositoryModelUnloadRequest* req,
                                     pb::RepositoryModelUnloadResponse*) override {
    return call(ctx, "RepositoryModelUnload", false, [&](Call& c) { control(*req, false, c); });
  }

 private:
  // The model served as name, version "" or its own; 404 otherwise.
  const Model& model(const std::string& name, const std::string& version, Call& c) {
    ModelPtr m = host_.find(name);
    if (!m) throw RequestError(404, host_.unknown(name));
    if (!version.empty() && version != m->version)
      throw RequestError(404,
                         "model '" + name + "' has version " + m->version + " only, not '" + version + "'");
    c.model = name;
    c.held = std::move(m);
    return *c.held;
  }

  // One ModelStreamInfer call: its requests in flight, each on a thread of its own.
  struct Stream {
    explicit Stream(grpc::ServerContext* c) : ctx(c) {}
    grpc::ServerContext* ctx;
    std::mutex mu;  // the stream's writes, and the count
    std::condition_variable done;
    int64_t in_flight = 0;
  };
  bool open(Stream* s) {
    std::lock_guard<std::mutex> lock(streams_mu_);
    if (streams_closing_) return false;
    streams_.insert(s);
    return true;
  }
  void close(Stream* s) {
    std::lock_guard<std::mutex> lock(streams_mu_);  // close_streams holds it while it uses s
    streams_.erase(s);
  }

  // ModelInfer's work, for one call or one request of a stream.
  void infer(grpc::ServerContext* ctx, const pb::ModelInferRequest& req, pb::ModelInferResponse& res,
             Call& c) {
    const Model& m = model(req.model_name(), req.model_version(), c);
    c.inference = true;
    const Classifier& cl = m.classifier();
    InferRequest r = parse_grpc_infer(req, cl, host_.max_body());
    // --timeout-s, the request's timeout parameter or the client's deadline: the first.
    Clock::time_point deadline = host_.deadline(c.start, r.timeout_us);
    const auto left = ctx->deadline() - std::chrono::system_clock::now();
    if (left < deadline - Clock::now())
      deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(left);
    Inference out = host_.infer(
        m, std::move(r.x), r.n, deadline, [ctx] { return ctx->IsCancelled(); }, r.timeout_us);
    c.batch = out.batch;
    if (out.status != 200) throw RequestError(out.status, out.error);
    grpc_infer_response(req.model_name(), r, out.logits, cl, res, m.version);
  }

  // vit serve's repositories make one index, as Triton's HTTP API has it: no name but "".
  static void repository(const std::string& name) {
    if (!name.empty())
      throw RequestError(400, "repository_name '" + name +
                                  "': vit serve's --model-repository folders make one index; give \"\"");
  }

  // A load (load) or an unload request: RepositoryModelLoadRequest or RepositoryModelUnloadRequest.
  template <class Request>
  void control(const Request& req, bool load, Call& c) {
    repository(req.repository_name());
    std::string config;
    for (const auto& [key, value] : req.parameters()) {
      using P = pb::ModelRepositoryParameter;
      repository_parameter(key, value.parameter_choice_case() == P::kBoolParam,
                           value.parameter_choice_case() == P::kStringParam, load);
      if (key == "config") config = value.string_param();
    }
    c.model = req.model_name();
    host_.control(req.model_name(), load, config);
  }

  // Runs body with the API key checked (unless open), and turns what it throws into the
  // call's status; logs the call and counts it, as the HTTP side does each request.
  template <class Body>
  grpc::Status call(grpc::ServerContext* ctx, const char* method, bool open, Body&& body) {
    Call c;
    int status = 200;
    std::string error;
    try {
      if (!open && host_.needs_key()) {
        const auto& md = ctx->client_metadata();
        const auto it = md.find("authorization");
        const std::string_view auth =
            it == md.end() ? std::string_view() : std::string_view(it->second.data(), it->second.size());
        if (!host_.authorized(auth))
          throw RequestError(401, auth.empty()
                                      ? "this server wants an API key: metadata authorization: Bearer KEY"
                                      : "the API key is not valid");
      }
      body(c);
    } catch (const RequestError& e) {
      status = e.status, error = e.what();
    } catch (const std::exception& e) {
      status = 500, error = e.what();
    }
    const double s = std::chrono::duration<double>(Clock::now() - c.start).count();
    host_.metrics().request(c.model, status, s, c.inference);
    char ms[32];
    std::snprintf(ms, sizeof ms, "%.1f", s * 1e3);
    const Code code = code_of(status);
    host_.say(detail::concat(peer_address(ctx->peer()), " gRPC ", method, " ", code.name, " ", ms,
                             " ms batch ", c.batch));
    return status == 200 ? grpc::Status::OK : grpc::Status(code.code, error);
  }

  Host& host_;
  std::mutex streams_mu_;
  std::set<Stream*> streams_;
  bool streams_closing_ = false;
};

class Server final : public GrpcServer {
 public:
  explicit Server(Host& host) : service_(host) {
    const ServeOptions& o = host.options();
    std::shared_ptr<grpc::ServerCredentials> creds = grpc::InsecureServerCredentials();
    if (o.tls.on()) {  // the files were checked when the HTTP side loaded them
      grpc::SslServerCredentialsOptions ssl(o.tls.ca_certs.empty()
                                                ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                                                : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
      ssl.pem_key_cert_pairs.push_back({read_file(o.tls.keyfile), read_file(o.tls.certfile)});
      if (!o.tls.ca_certs.empty()) ssl.pem_root_certs = read_file(o.tls.ca_certs);
      creds = grpc::SslServerCredentials(ssl);
    }
    const bool v6 = o.host.find(':') != std::string::npos;
    const std::string address = detail::concat(v6 ? "[" : "", o.host, v6 ? "]:" : ":", o.grpc_port);
    grpc::ServerBuilder b;
    b.AddListeningPort(address, creds, &port_);
    b.RegisterService(&service_);
    // gRPC binds with SO_REUSEPORT by default: a second server on a port in use would start
    // and take a share of the calls. Off, it says the port is taken, as the HTTP side does.
    b.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    // --max-body-mb bounds a message as it bounds an HTTP body (gRPC answers RESOURCE_EXHAUSTED).
    b.SetMaxReceiveMessageSize(int(std::min<size_t>(host.max_body(), size_t(INT32_MAX))));
    quota_.SetMaxThreads(threads(host));
    b.SetResourceQuota(quota_);
    // gRPC's standard health service (grpc.health.v1.Health), what Kubernetes' gRPC probes
    // and grpc_health_probe ask: SERVING for "" and the service; once stopping, no call at all
    // is answered.
    grpc::EnableDefaultHealthCheckService(true);
    server_ = b.BuildAndStart();
    VIT_CHECK(server_ && port_ > 0, "--grpc-port: cannot listen on ", address,
              " (in use, or not an address of this machine)");
    server_->GetHealthCheckService()->SetServingStatus("inference.GRPCInferenceService", true);
    // A model loaded later that was not in the index (a folder added since) adds threads.
    host.set_on_load([this, &host] {
      const int before = threads_;
      if (threads(host) == before) return;
      quota_.SetMaxThreads(threads_);
      host.say(detail::concat("gRPC: up to ", threads_.load(), " calls at once"));
    });
    host_ = &host;
  }
  ~Server() override {
    shutdown();
    host_->set_on_load(nullptr);
  }
  int port() const override { return port_; }
  int threads() const override { return threads_; }
  void shutdown() override {
    std::call_once(done_, [this] {
      service_.close_streams();
      server_->Shutdown();  // waits for the calls in flight; each ends within --timeout-s
      server_->Wait();
    });
  }

 private:
  // Threads for the calls in flight. gRPC's synchronous server answers a call it has no
  // thread for with RESOURCE_EXHAUSTED ("Server Threadpool Exhausted") before the service
  // sees it: unlogged and uncounted. So there are threads enough for every model's queue
  // and passes to be full twice over: a call beyond them gets the queue's own answer
  // (UNAVAILABLE, logged) and gives its thread back at once. --http-threads at least. Every
  // model of the index counts, loaded or not.
  int threads(const Host& host) {
    threads_ = int(
        std::min<int64_t>(std::max<int64_t>(2 * host.capacity(), host.options().http_threads), INT32_MAX));
    return threads_;
  }

  Service service_;
  Host* host_ = nullptr;
  grpc::ResourceQuota quota_{"vit-serve"};
  std::atomic<int> threads_{0};
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::once_flag done_;
};

}  // namespace

std::unique_ptr<GrpcServer> start_grpc(Host& host) {
  return std::make_unique<Server>(host);
}

}  // namespace vit::serve
