// The HTTP side of vit serve, on cpp-httplib (Debian's libcpp-httplib-dev; docs/design.md
// says why): routes, auth, error bodies, the access log, metrics and the stop on SIGTERM.
#include "vit/serve/server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <ostream>
#include <thread>

#include "vit/classifier.h"
#include "vit/core/error.h"
#include "vit/core/version.h"
#include "vit/serve/batcher.h"
#include "vit/serve/metrics.h"
#include "vit/serve/protocol.h"

namespace vit::serve {

namespace {

std::atomic<int> g_signal{0};
extern "C" void on_stop_signal(int sig) {
  g_signal.store(sig);
}

struct Model {
  std::unique_ptr<Classifier> classifier;
  std::unique_ptr<Batcher> batcher;
};

// What the access log and the metrics need of the request this thread is answering (each
// request is answered on one of the server's threads, start to end).
struct RequestInfo {
  Clock::time_point start;
  bool started = false;
  std::string model;
  int64_t batch = 0;
};
thread_local RequestInfo t_request;

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

void answer(httplib::Response& res, int status, const std::string& json) {
  res.status = status;
  res.set_content(json, "application/json");
}

void fail(httplib::Response& res, int status, const std::string& message) {
  answer(res, status, error_json(message));
}

// The request's body, read through httplib's content reader: its regular path would refuse
// bodies over 8 KB sent as application/x-www-form-urlencoded (what curl -d and urllib send
// without a Content-Type). A multipart form (curl -F, as TorchServe's clients send images)
// gives its first part. False when reading failed (res.status says why: 413 over the limit).
bool read_body(const httplib::Request& req, const httplib::ContentReader& reader, std::string& body) {
  auto append = [&](const char* data, size_t n) {
    body.append(data, n);
    return true;
  };
  if (!req.is_multipart_form_data()) return reader(append);
  int parts = 0;
  return reader([&](const httplib::MultipartFormData&) { return ++parts == 1; },
                [&](const char* data, size_t n) { return parts == 1 ? append(data, n) : true; });
}

// cpp-httplib 0.11 listens with a backlog of 5: under a burst of new connections (64 clients
// that each connect per request) the kernel drops SYNs and a few clients see resets. listen(2)
// again on the bound socket raises it.
class Server : public httplib::Server {
 public:
  void set_backlog(int n) { ::listen(svr_sock_, n); }
};

}  // namespace

bool available() {
  return true;
}

int serve(const ServeOptions& o, std::ostream& log) {
  VIT_CHECK(!o.models.empty(), "give at least one --model NAME=CHECKPOINT");
  VIT_CHECK(o.max_batch > 0 && o.max_queue > 0 && o.max_delay_ms >= 0 && o.timeout_s > 0 && o.max_body_mb > 0,
            "--max-batch, --max-queue, --timeout-s and --max-body-mb must be positive, --max-delay-ms >= 0");
  const std::vector<std::string> keys =
      o.api_key_file.empty() ? std::vector<std::string>{} : read_keys(o.api_key_file);
  Metrics metrics;
  std::map<std::string, Model> models;
  std::vector<std::string> names;
  for (const ServedModel& s : o.models) {
    VIT_CHECK(!models.count(s.name), "--model ", s.name, " given twice");
    ClassifierOptions co;
    co.dtype = o.dtype;
    co.threads = o.threads;
    co.max_batch = o.max_batch;
    Model& m = models[s.name];
    m.classifier = std::make_unique<Classifier>(s.checkpoint, co);
    VIT_CHECK(m.classifier->num_classes() > 0, s.checkpoint, " has no classifier head: nothing to serve");
    BatchOptions bo;
    bo.max_batch = o.max_batch;
    bo.max_delay = std::chrono::microseconds(int64_t(o.max_delay_ms * 1000));
    bo.max_queue = o.max_queue;
    m.batcher = std::make_unique<Batcher>(*m.classifier, bo,
                                          [&metrics, name = s.name](int64_t n) { metrics.batch(name, n); });
    names.push_back(s.name);
    log << "model " << s.name << ": " << s.checkpoint << " (" << m.classifier->format() << ", "
        << m.classifier->num_classes() << " classes, input " << m.classifier->channels() << "x"
        << m.classifier->height() << "x" << m.classifier->width() << ")" << std::endl;
  }
  auto find = [&](const std::string& name, httplib::Response& res) -> Model* {
    t_request.model = models.count(name) ? name : "";
    if (auto it = models.find(name); it != models.end()) return &it->second;
    std::string served;
    for (const std::string& n : names) served += (served.empty() ? "" : ", ") + n;
    fail(res, 404, "unknown model '" + name + "'; this server has: " + served);
    return nullptr;
  };
  // Queues a request's images and waits for its logits: false when it has answered res
  // with an error (503 queue full, 504 past --timeout-s, 500 the forward failed).
  const auto timeout = std::chrono::microseconds(int64_t(o.timeout_s * 1e6));
  auto run = [&](Model& m, std::vector<float> x, int64_t n, httplib::Response& res,
                 std::vector<float>& logits) {
    auto job = std::make_shared<InferJob>();
    job->x = std::move(x);
    job->n = n;
    std::future<void> done = job->done.get_future();
    if (!m.batcher->submit(job)) {
      res.set_header("Retry-After", "1");
      fail(res, 503, "the queue is full (" + std::to_string(o.max_queue) + " requests); retry later");
      return false;
    }
    if (done.wait_until(t_request.start + timeout) == std::future_status::timeout) {
      job->abandoned = true;
      fail(res, 504, "no answer within --timeout-s " + std::to_string(o.timeout_s) + " s");
      return false;
    }
    t_request.batch = job->batch;
    if (!job->error.empty()) {
      fail(res, 500, job->error);
      return false;
    }
    logits = std::move(job->logits);
    return true;
  };

  Server svr;
  const int http_threads = o.http_threads;
  svr.new_task_queue = [http_threads] { return new httplib::ThreadPool(size_t(http_threads)); };
  const size_t max_body = size_t(o.max_body_mb * 1024 * 1024);
  svr.set_payload_max_length(max_body);
  svr.set_keep_alive_max_count(1000);
  svr.set_tcp_nodelay(true);  // an answer goes out at once, not after the client's delayed ACK (40 ms)
  std::atomic<bool> stopping{false};
  svr.set_pre_routing_handler([&](const httplib::Request& req, httplib::Response& res) {
    t_request = RequestInfo{Clock::now(), true, "", 0};
    const bool open = req.path.rfind("/v2/health/", 0) == 0 || req.path == "/ping";
    if (keys.empty() || open) return httplib::Server::HandlerResponse::Unhandled;
    const std::string auth = req.get_header_value("Authorization");
    for (const std::string& k : keys)
      if (auth == "Bearer " + k) return httplib::Server::HandlerResponse::Unhandled;
    res.set_header("WWW-Authenticate", "Bearer");
    fail(res, 401,
         auth.empty() ? "this server wants an API key: Authorization: Bearer KEY"
                      : "the API key is not valid");
    return httplib::Server::HandlerResponse::Handled;
  });
  svr.set_error_handler([max_body](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    // cpp-httplib caps a body sent as a form (curl -d, urllib without a Content-Type) at 8 KB.
    const bool form = req.get_header_value("Content-Type").rfind("application/x-www-form-urlencoded", 0) == 0;
    if (res.status == 413 && form &&
        std::strtoull(req.get_header_value("Content-Length").c_str(), nullptr, 10) <= max_body)
      fail(res, 413,
           "a body over 8 KB must not be sent as a form (Content-Type: application/x-www-form-urlencoded, "
           "what curl "
           "-d sends): send Content-Type: application/json, or an image with curl --data-binary @FILE -H "
           "'Content-Type: image/png' or curl -T FILE");
    else if (res.status == 413)
      fail(res, 413, "the body is larger than --max-body-mb");
    else if (res.status == 404)
      fail(res, 404, "no endpoint " + req.method + " " + req.path);
    else
      fail(res, res.status, "HTTP " + std::to_string(res.status));
  });
  svr.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    try {
      std::rethrow_exception(ep);
    } catch (const RequestError& e) {
      fail(res, e.status, e.what());
    } catch (const std::exception& e) {
      fail(res, 500, e.what());
    }
  });
  std::mutex log_mu;
  svr.set_logger([&](const httplib::Request& req, const httplib::Response& res) {
    const double s =
        t_request.started ? std::chrono::duration<double>(Clock::now() - t_request.start).count() : 0;
    metrics.request(t_request.model, res.status, s);
    {
      std::lock_guard<std::mutex> lock(log_mu);
      char ms[32];
      std::snprintf(ms, sizeof ms, "%.1f", s * 1e3);
      log << req.method << " " << req.path << " " << res.status << " " << ms << " ms batch "
          << t_request.batch << std::endl;
    }
    t_request = RequestInfo{};
  });

  svr.Get("/v2/health/live",
          [](const httplib::Request&, httplib::Response& res) { answer(res, 200, R"({"live":true})"); });
  svr.Get("/v2/health/ready", [&](const httplib::Request&, httplib::Response& res) {
    answer(res, stopping ? 503 : 200, stopping ? R"({"ready":false})" : R"({"ready":true})");
  });
  svr.Get("/ping", [&](const httplib::Request&, httplib::Response& res) {
    answer(res, 200, R"({"status":"Healthy"})");
  });
  svr.Get("/v2", [&](const httplib::Request&, httplib::Response& res) {
    answer(res, 200,
           nlohmann::json{{"name", "vitcpp"}, {"version", version()}, {"extensions", {"classification"}}}
               .dump());
  });
  svr.Get(R"(/v2/models/([^/]+)(?:/versions/1)?)", [&](const httplib::Request& req, httplib::Response& res) {
    if (Model* m = find(req.matches[1], res))
      answer(res, 200, model_metadata(req.matches[1], *m->classifier));
  });
  svr.Get(R"(/v2/models/([^/]+)(?:/versions/1)?/ready)",
          [&](const httplib::Request& req, httplib::Response& res) {
            if (find(req.matches[1], res))
              answer(res, 200, nlohmann::json{{"name", req.matches[1]}, {"ready", true}}.dump());
          });
  svr.Post(R"(/v2/models/([^/]+)(?:/versions/1)?/infer)", [&](const httplib::Request& req,
                                                              httplib::Response& res) {
    const std::string name = req.matches[1];
    Model* m = find(name, res);
    if (!m) return;
    InferRequest r = parse_infer(req.body, *m->classifier);  // RequestError: 400 (the exception handler)
    std::vector<float> logits;
    if (run(*m, std::move(r.x), r.n, res, logits))
      answer(res, 200, infer_response(name, r, logits, *m->classifier));
  });
  // TorchServe's image endpoint: curl --data-binary @FILE, -F data=@FILE (POST) or -T FILE (PUT).
  const auto predictions = [&](const httplib::Request& req, httplib::Response& res,
                               const httplib::ContentReader& reader) {
    std::string body;
    if (!read_body(req, reader, body)) return;
    Model* m = find(req.matches[1], res);
    if (!m) return;
    const Classifier& c = *m->classifier;
    if (body.empty()) throw RequestError(400, "the body must be one PNG or JPEG image");
    std::vector<float> x(size_t(c.channels() * c.height() * c.width())), logits;
    try {
      c.preprocess(ImageInput::encoded(body.data(), body.size()), x.data());
    } catch (const Error& e) {
      throw RequestError(400, e.what());
    }
    if (run(*m, std::move(x), 1, res, logits)) answer(res, 200, top5_json(logits.data(), c));
  };
  svr.Post(R"(/predictions/([^/]+))", predictions);
  svr.Put(R"(/predictions/([^/]+))", predictions);
  svr.Get("/metrics", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics.text(names, [&](const std::string& n) { return models.at(n).batcher->queued(); }),
                    "text/plain; version=0.0.4");
  });

  int port = o.port;
  if (port == 0) {
    port = svr.bind_to_any_port(o.host);
    VIT_CHECK(port > 0, "cannot listen on ", o.host, " (any port)");
  } else {
    VIT_CHECK(svr.bind_to_port(o.host, port), "cannot listen on ", o.host, ":", port,
              " (in use, or not an address of this machine)");
  }
  svr.set_backlog(SOMAXCONN);
  // SIGTERM and SIGINT: stop accepting, answer what is in flight, exit 0.
  g_signal = 0;
  auto old_term = std::signal(SIGTERM, on_stop_signal), old_int = std::signal(SIGINT, on_stop_signal);
  std::atomic<bool> done{false};
  std::thread watcher([&] {
    while (!done && g_signal == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (g_signal != 0) {
      stopping = true;
      {
        std::lock_guard<std::mutex> lock(log_mu);
        log << "vit serve: " << (g_signal == SIGINT ? "SIGINT" : "SIGTERM")
            << ": no new requests; answering those in flight" << std::endl;
      }
      svr.stop();
    }
  });
  log << "vit serve: listening on http://" << o.host << ":" << port << " (" << names.size() << " model"
      << (names.size() > 1 ? "s" : "") << ", max batch " << o.max_batch << ", max delay " << o.max_delay_ms
      << " ms)" << std::endl;
  const bool ok = svr.listen_after_bind();
  done = true;
  watcher.join();
  for (auto& [name, m] : models) m.batcher->stop();
  log << "vit serve: stopped" << std::endl;
  std::signal(SIGTERM, old_term);  // (a signal until here changes nothing: the server is stopping)
  std::signal(SIGINT, old_int);
  return ok || g_signal != 0 ? 0 : 1;
}

}  // namespace vit::serve
