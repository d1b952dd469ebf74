// The HTTP side of vit serve, on cpp-httplib (Debian's libcpp-httplib-dev; docs/design.md
// says why): routes, auth, error bodies, the access log, metrics and the stop on SIGTERM.
#include "serve/server.h"

#include <httplib.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <ostream>
#include <regex>
#include <set>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/utf8.h"
#include "serve/batcher.h"
#include "serve/connection_pool.h"
#include "serve/grpc_server.h"
#include "serve/host.h"
#include "serve/metrics.h"
#include "serve/protocol.h"
#include "serve/protocol_v1.h"
#include "serve/tls.h"
#include "vit/classifier.h"
#include "vit/core/version.h"

namespace vit::serve {

namespace {

// SIGTERM and SIGINT, blocked in every thread of the server (serve() blocks them before the
// models' threads start) and taken by the watcher with sigtimedwait: a handler that runs
// while oneDNN's AVX-512 code computes can corrupt the heap (docs/reliability.md, finding 5).
sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

// What the access log and the metrics need of the request this thread is answering (each
// request is answered on one of the server's threads, start to end).
struct RequestInfo {
  Clock::time_point start;
  bool started = false;
  std::string model;
  int64_t batch = 0;
  bool inference = false;  // it asked the model for an answer (Triton's success and fail counts)
  bool unread = false;     // the answer leaves the request's body (or part of it) unread: see linger
};
thread_local RequestInfo t_request;

void answer(httplib::Response& res, int status, const std::string& json) {
  res.status = status;
  res.set_content(json, "application/json");
}

void fail(httplib::Response& res, int status, const std::string& message) {
  answer(res, status, error_json(message));
}

// A path for the access log: bytes other than printable ASCII as \xHH (as nginx logs them),
// so a log line is one line of text whatever the request held.
std::string printable(std::string_view path) {
  std::string out;
  for (const char c : path) {
    if (c > ' ' && c < 127 && c != '\\') {
      out += c;
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02X", unsigned(uint8_t(c)));
      out += hex;
    }
  }
  return out;
}

// Whether a request says it has a body (RFC 9112 section 6.3: Content-Length or
// Transfer-Encoding; without either, it has none).
bool has_body(const httplib::Request& req) {
  return req.has_header("Transfer-Encoding") ||
         (req.has_header("Content-Length") && req.get_header_value("Content-Length") != "0");
}

// The answer closes its connection, and the request's body is not (all) read: see linger.
void close_unread(httplib::Response& res) {
  res.set_header("Connection", "close");
  t_request.unread = true;
}

// The connection's socket (httplib 0.11 gives a handler none): the one whose two ends are
// the request's addresses.
int socket_of(const httplib::Request& req) {
  auto ends_at = [](const sockaddr_storage& a, socklen_t n, const std::string& ip, int port) {
    char host[NI_MAXHOST], serv[NI_MAXSERV];
    return ::getnameinfo(reinterpret_cast<const sockaddr*>(&a), n, host, sizeof host, serv, sizeof serv,
                         NI_NUMERICHOST | NI_NUMERICSERV) == 0 &&
           ip == host && port == std::atoi(serv);
  };
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    const int fd = std::atoi(e.path().filename().c_str());
    sockaddr_storage local{}, peer{};
    socklen_t ln = sizeof local, pn = sizeof peer;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &ln) == 0 &&
        ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &pn) == 0 &&
        ends_at(local, ln, req.local_addr, req.local_port) &&
        ends_at(peer, pn, req.remote_addr, req.remote_port))
      return fd;
  }
  return -1;
}

// A lingering close, as nginx's: the answer is out, so the connection's sending side is shut
// (the client reads the answer and its end), then what the client still sends of its body
// is read and dropped, for at most 2 s or --max-body-mb. Closing at once with the body
// unread made the kernel reset the connection, and a client still sending (Python's
// http.client posting 4 MB without an API key) saw a broken pipe instead of its 401.
void linger(const httplib::Request& req, size_t max_bytes) {
  const int fd = socket_of(req);
  if (fd < 0) return;
  ::shutdown(fd, SHUT_WR);
  const auto end = Clock::now() + std::chrono::seconds(2);
  std::vector<char> buf(65536);
  for (size_t got = 0; got <= max_bytes;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count();
    pollfd p{fd, POLLIN, 0};
    if (left <= 0 || ::poll(&p, 1, int(left)) <= 0) return;
    const ssize_t n = ::recv(fd, buf.data(), buf.size(), 0);
    if (n <= 0) return;
    got += size_t(n);
  }
}

// httplib 0.11 closes a connection for its own reasons alone (the request's "Connection:
// close", a failed write): an answer's "Connection: close" was only sent, and the body the
// server had not read (a 401's, a 413's) was then read as the next request. An answer whose
// body comes from a provider that reports failure after writing it all is sent whole, then
// httplib closes the connection (write_response_core returns false). The provider has no
// length (httplib's "without length" kind, which ignores Range headers; Content-Length is
// already set). Not for HEAD, whose answer httplib sends without its body.
// linger_bytes > 0: the body was left unread, linger() after the answer.
// done: called once the answer is gone (httplib's resource releaser), whatever happened.
bool close_after(const httplib::Request& req, httplib::Response& res, size_t linger_bytes,
                 std::function<void()> done) {
  if (res.body.empty() || req.method == "HEAD") return false;
  res.headers.erase("Keep-Alive");  // (httplib adds it when it keeps the connection)
  if (!res.has_header("Content-Length")) res.set_header("Content-Length", std::to_string(res.body.size()));
  const std::string type = res.get_header_value("Content-Type");
  res.headers.erase("Content-Type");  // set_content_provider adds it again
  auto body = std::make_shared<std::string>(std::move(res.body));
  res.body.clear();
  res.set_content_provider(
      type,
      [body, &req, linger_bytes](size_t, httplib::DataSink& sink) {
        if (sink.write(body->data(), body->size()) && linger_bytes > 0) linger(req, linger_bytes);
        return false;
      },
      [done = std::move(done)](bool) { done(); });
  return true;
}

// A Content-Length that is a number (framing_error passed it), or 0.
// The Date header every answer carries (RFC 9110 section 6.6.1: an origin server with a
// clock sends it; caches and clients read the answer's age from it), in IMF-fixdate, written
// without the C library's locale: "Mon, 07 Dec 2026 12:38:29 GMT".
std::string http_date() {
  static const char* const kDays[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
  static const char* const kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                        "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  const time_t now = time(nullptr);
  struct tm t {};
  gmtime_r(&now, &t);
  char out[40];
  std::snprintf(out, sizeof out, "%s, %02d %s %04d %02d:%02d:%02d GMT", kDays[t.tm_wday % 7], t.tm_mday,
                kMonths[t.tm_mon % 12], t.tm_year + 1900, t.tm_hour, t.tm_min, t.tm_sec);
  return out;
}

// What is wrong with the request's Host header, or "". A value is RFC 3986's host [":" port]:
// a name or IPv4 address of unreserved, percent-encoded and sub-delimiter characters, or an
// IP literal in brackets; no user info, path or space.
std::string host_error(const httplib::Request& req) {
  const size_t n = req.get_header_value_count("Host");
  // httplib drops a header without a value: "Host:" reads as none.
  if (n == 0) return req.version == "HTTP/1.1" ? "an HTTP/1.1 request needs a Host header with a value" : "";
  if (n > 1) return "the request has " + std::to_string(n) + " Host headers";
  const std::string host = req.get_header_value("Host");
  static const std::regex valid(R"(^([A-Za-z0-9._~!$&'()*+,;=%-]*|\[[0-9A-Fa-f:.vV]+\])(:[0-9]*)?$)");
  if (!std::regex_match(host, valid))
    return "the Host header '" + printable(host) + "' is not a host and port";
  return "";
}

uint64_t content_length(const httplib::Request& req) {
  return std::strtoull(req.get_header_value("Content-Length").c_str(), nullptr, 10);
}

// What is wrong with a request's framing, or "": RFC 9112 section 6.3 has a server
// answer 400 and close the connection for one that is not a number or that differs between
// two headers, since where the body ends is then unknown. cpp-httplib took "abc" for 0 and
// read the body as a second request.
std::string framing_error(const httplib::Request& req) {
  const size_t n = req.get_header_value_count("Content-Length");
  std::string first;
  for (size_t i = 0; i < n; ++i) {
    const std::string v = req.get_header_value("Content-Length", i);
    if (v.empty() || v.size() > 19 ||
        !std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return "Content-Length '" + printable(v) + "' is not a number of bytes";
    if (i == 0) first = v;
    if (v != first) return "two Content-Length headers disagree (" + first + ", " + v + ")";
  }
  // Both (the request-smuggling shape CL.TE): which one ends the body is the server's guess;
  // RFC 9112 has the connection closed. A coding httplib does not read was ignored for the
  // Content-Length.
  if (req.has_header("Transfer-Encoding")) {
    if (n > 0) return "Content-Length and Transfer-Encoding together: send one of them";
    std::string te = req.get_header_value("Transfer-Encoding");
    std::transform(te.begin(), te.end(), te.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    if (te != "chunked")
      return "Transfer-Encoding '" + printable(req.get_header_value("Transfer-Encoding")) +
             "': vit serve reads chunked bodies alone";
  }
  return "";
}

// An error httplib answered itself, while reading the request (its status, no body): what
// can be told from the headers it read, and the connection closed, since where the next
// request would start is unknown. (It was "HTTP 400".)
// routed: the request's headers were read (the pre-routing handler ran).
void fail_transport(const httplib::Request& req, httplib::Response& res, bool routed) {
  const std::string coding = req.get_header_value("Content-Encoding");
  // The methods httplib's request line takes; another (FOO) is refused while it is read.
  static const std::set<std::string> kParsed = {"GET",     "HEAD",    "POST",  "PUT",   "DELETE",
                                                "CONNECT", "OPTIONS", "TRACE", "PATCH", "PRI"};
  std::string why;
  int status = res.status;
  if (!routed && res.status == 400 && !req.method.empty() && !kParsed.count(req.method)) {
    status =
        501;  // RFC 9110 section 9.1: a method the server does not know (it was 400, "could not be read")
    why = "the method " + printable(req.method) + " is not one vit serve answers (GET, HEAD, POST and PUT)";
  } else if (res.status == 414) {
    why = "the request line is longer than 8 KB";
  } else if (res.status != 400) {
    why = detail::concat("HTTP ", res.status);
  } else if (!routed) {
    why = "the request line or a header could not be read (a header line is at most 8 KB)";
  } else if (!coding.empty() && coding != "identity") {
    why = "the body could not be decompressed (" + printable(coding) + "): not valid, or cut short";
  } else if (req.is_multipart_form_data()) {
    why = "the multipart form could not be read (its boundary, or a part cut short)";
  } else if (req.has_header("Transfer-Encoding")) {
    why = "the chunked body could not be read (a bad chunk size, or cut short)";
  } else {
    why = "the body ended before its Content-Length";
  }
  close_unread(res);
  fail(res, status, why);
}

// The request's body, read through httplib's content reader: its regular path would refuse
// bodies over 8 KB sent as application/x-www-form-urlencoded (what curl -d and urllib send
// without a Content-Type). A multipart form (curl -F, as TorchServe's clients send images)
// gives its "data" or "body" field, as TorchServe, else its first part. httplib undoes a Content-Encoding
// (gzip, deflate) as it reads and bounds only the bytes sent, so the body as decoded is held to max_bytes
// here: 200 KB of gzip made 200 MB. False when reading failed (res.status says why: 413 over the limit).
// form_images, when given: how many images the form holds by TorchServe's reading (its "data"
// fields, else its "body" fields, else its files; 0 for a body that is no form).
bool read_body(const httplib::Request& req, const httplib::ContentReader& reader, size_t max_bytes,
               httplib::Response& res, std::string& body, size_t* form_images = nullptr) {
  // No Content-Length and no Transfer-Encoding: an empty body (RFC 9112 section 6.3), not a
  // read until the client closes or httplib's 5 s read timeout.
  if (!req.has_header("Content-Length") && !req.has_header("Transfer-Encoding")) return true;
  bool too_big = false;
  auto append = [&](const char* data, size_t n) {
    too_big = n > max_bytes - body.size();
    if (!too_big) body.append(data, n);
    return !too_big;
  };
  // Room for the whole body at once (Content-Length; httplib refused one over the limit), not
  // grown by doubling: 8 clients sending ViT-S/16 JSON of 12 MB held 470 MiB, now 390.
  if (!req.is_multipart_form_data()) body.reserve(std::min<size_t>(content_length(req), max_bytes));
  // A multipart form (curl -F data=@image.png): TorchServe's field "data" or "body", else the
  // first part. Each part is kept until the end, within max_bytes together.
  std::vector<std::pair<std::string, std::string>> parts;
  size_t kept = 0, files = 0, data_fields = 0, body_fields = 0;  // parts: with a file name, named data, body
  const bool ok = !req.is_multipart_form_data() ? reader(append)
                                                : reader(
                                                      [&](const httplib::MultipartFormData& f) {
                                                        parts.emplace_back(f.name, "");
                                                        files += !f.filename.empty();
                                                        data_fields += f.name == "data";
                                                        body_fields += f.name == "body";
                                                        return true;
                                                      },
                                                      [&](const char* data, size_t n) {
                                                        too_big = n > max_bytes - kept;
                                                        if (too_big) return false;
                                                        kept += n;
                                                        parts.back().second.append(data, n);
                                                        return true;
                                                      });
  if (form_images) *form_images = data_fields > 0 ? data_fields : body_fields > 0 ? body_fields : files;
  if (ok && !parts.empty()) {
    auto named = [&](const char* name) {
      return std::find_if(parts.begin(), parts.end(), [&](const auto& p) { return p.first == name; });
    };
    auto it = named("data");
    if (it == parts.end()) it = named("body");
    if (it == parts.end()) it = parts.begin();
    body = std::move(it->second);
  }
  if (too_big) {  // the rest of the body is still on the connection: close it after the answer
    close_unread(res);
    fail(res, 413, "the body, decompressed, is larger than --max-body-mb");
  }
  return ok && !too_big;
}

// The client's address and port for the access log (IPv6 in brackets), "-" where httplib did
// not get that far (a request line that did not parse).
std::string client(const httplib::Request& req) {
  if (req.remote_addr.empty()) return "-";
  const bool v6 = req.remote_addr.find(':') != std::string::npos;
  return detail::concat(v6 ? "[" : "", req.remote_addr, v6 ? "]:" : ":", req.remote_port);
}

// The binary tensor data extension's header: the length of the JSON that starts the body.
constexpr const char* kJsonLength = "Inference-Header-Content-Length";

// The request's kJsonLength, 0 without it; 400 when it is not a number.
size_t json_length(const httplib::Request& req) {
  if (!req.has_header(kJsonLength)) return 0;
  const std::string v = req.get_header_value(kJsonLength);
  size_t n = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc() || end != v.data() + v.size() || n == 0)
    throw RequestError(400,
                       std::string(kJsonLength) + " must be the JSON's length in bytes, got '" + v + "'");
  return n;
}

// httplib::Server's listening socket (svr_sock_, protected), for two things httplib lacks:
// - its backlog: cpp-httplib 0.11 listens with a backlog of 5; under a burst of new connections
//   (64 clients that each connect per request) the kernel drops SYNs and a few clients see
//   resets. listen(2) again on the bound socket raises it.
// - its accept queue: connections the kernel has completed whose requests the server has not
//   accept()ed yet. Their clients have connected and sent; closing the socket at a stop would
//   reset them, so the stop waits for them. Linux gives a listening socket's queue length in
//   TCP_INFO's tcpi_unacked (ss -lt's Recv-Q); 0 where it cannot be read.
class ListenSocket {
 public:
  virtual ~ListenSocket() = default;
  virtual void set_backlog(int n) = 0;
  virtual int accept_queue() const = 0;
};

// Base: httplib::Server, or SSLServer for TLS.
template <class Base>
class Listener : public Base, public ListenSocket {
 public:
  using Base::Base;
  void set_backlog(int n) override { ::listen(this->svr_sock_, n); }
  int accept_queue() const override {
    const int fd = this->svr_sock_;
    tcp_info info{};
    socklen_t size = sizeof info;
    if (fd < 0 || ::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &size) != 0) return 0;
    return static_cast<int>(info.tcpi_unacked);
  }
};

// The HTTP server: plain, or TLS with --ssl-certfile (tls.h), and its socket (above). Throws
// vit::Error when the certificate or a key does not load.
std::unique_ptr<httplib::Server> make_server(const ServeOptions& o, ListenSocket*& socket) {
  VIT_CHECK(o.tls.on() || (o.tls.keyfile.empty() && o.tls.ca_certs.empty()),
            "--ssl-keyfile and --ssl-ca-certs need --ssl-certfile (the server's certificate)");
  auto made = [&](auto s) -> std::unique_ptr<httplib::Server> {
    socket = s.get();
    return s;
  };
  if (!o.tls.on()) return made(std::make_unique<Listener<httplib::Server>>());
  VIT_CHECK(!o.tls.keyfile.empty(), "--ssl-certfile needs --ssl-keyfile (its private key)");
  std::string error;
  auto s = std::make_unique<Listener<httplib::SSLServer>>([&](SSL_CTX& ctx) {
    error = setup_tls(ctx, o.tls);
    return error.empty();
  });
  VIT_CHECK(s->is_valid(), error.empty() ? "TLS: cannot make OpenSSL's context" : error);
  return made(std::move(s));
}

}  // namespace

namespace {
// Each connection holds a file descriptor. The soft limit (1024 in many shells) goes up to the
// hard one, as Go's runtime and nginx's worker_rlimit_nofile raise it; where that still holds
// fewer than --http-threads connections and the server's own, one line says so: past it,
// accept() fails and new connections wait in the kernel's queue.
void raise_descriptor_limit(int http_threads, Host& host) {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0) return;
  if (r.rlim_cur < r.rlim_max) {
    rlimit up = r;
    up.rlim_cur = r.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &up) == 0) r = up;
  }
  constexpr rlim_t kOwn = 64;  // models' files, logs, gRPC, the listening sockets
  if (r.rlim_cur == RLIM_INFINITY || r.rlim_cur >= rlim_t(http_threads) + kOwn) return;
  host.say(detail::concat("vit serve: note: ulimit -n ", r.rlim_cur, " (the hard limit ", r.rlim_max,
                          "): fewer file descriptors than --http-threads ", http_threads,
                          " connections and the server's own; connections past it wait to be accepted"));
}
}  // namespace

namespace {

// The HTTP front end: its handlers, on the Host's models. serve() makes one and runs it.
class Service {
 public:
  Service(const ServeOptions& o, std::ostream& log);
  int run();  // listens until SIGTERM or SIGINT; 0 when stopped by one

 private:
  void install_hooks();  // auth before routing; error bodies; the access log and metrics
  // The answer to a request refused before its body is read (its framing, its API key), in
  // res: false when it may go on.
  bool refused_before_body(const httplib::Request& req, httplib::Response& res) const;
  void install_routes();  // the endpoints
  ModelPtr find(const std::string& name, httplib::Response& res, const std::string& version = "");
  bool infer(const Model& m, std::vector<float> x, int64_t n, httplib::Response& res,
             std::vector<float>& logits, int64_t timeout_us = 0);
  std::string http_metrics() const;  // /metrics' gauges of the connections' threads
  // An endpoint, registered with httplib and kept in routes_ so that a path with another
  // method is answered 405 with the methods it has (Allow), as KServe's and Triton's servers do.
  template <typename H>
  void get(const std::string& pattern, H&& h) {
    routes_.emplace_back(std::regex(pattern), "GET");
    svr_->Get(pattern, std::forward<H>(h));
  }
  template <typename H>
  void post(const std::string& pattern, H&& h) {
    routes_.emplace_back(std::regex(pattern), "POST");
    svr_->Post(pattern, std::forward<H>(h));
  }
  template <typename H>
  void put(const std::string& pattern, H&& h) {
    routes_.emplace_back(std::regex(pattern), "PUT");
    svr_->Put(pattern, std::forward<H>(h));
  }
  std::string allowed(const std::string& path) const;  // "GET, POST" for a path, "" for none
  bool has_endpoint(const std::string& method, const std::string& path) const;
  void no_endpoint(const httplib::Request& req, httplib::Response& res) const;  // 405 with Allow, or 404

  const ServeOptions& o_;
  std::vector<std::pair<std::regex, std::string>> routes_;  // each endpoint's path and method
  ListenSocket* socket_ = nullptr;                          // svr_'s (the same object)
  std::unique_ptr<httplib::Server> svr_;
  std::unique_ptr<Host> host_;
  std::unique_ptr<GrpcServer> grpc_;            // --grpc-port
  std::atomic<ConnectionPool*> pool_{nullptr};  // svr_'s, while it listens
  // Answers close_after is sending, and whether the listener is about to stop: httplib does
  // not call a provider once stopped (the answer went out without its body), so the stop
  // waits for these, and answers made after it keep their body (httplib closes anyway).
  std::atomic<int> closing_answers_{0};
  std::atomic<bool> stopping_http_{false};
};

Service::Service(const ServeOptions& o, std::ostream& log) : o_(o) {
  VIT_CHECK(!o.models.empty() || !o.model_repositories.empty(),
            "give --model NAME=CHECKPOINT or --model-repository DIR");
  VIT_VALUE_CHECK(
      o.max_batch > 0 && o.max_queue > 0 && o.max_delay_ms >= 0 && o.timeout_s > 0 && o.max_body_mb > 0 &&
          o.keep_alive_s > 0 && o.http_threads > 0,
      "--max-batch, --max-queue, --timeout-s, --max-body-mb, --timeout-keep-alive and --http-threads must be "
      "positive, --max-delay-ms >= 0");
  // Past these, a time point or a byte count overflows (1e10 s made every answer a 504, 1e14
  // MB every body a 413): far beyond any use, so refused.
  VIT_VALUE_CHECK(o.timeout_s <= 1e6 && o.keep_alive_s <= 1e6,
                  "--timeout-s and --timeout-keep-alive: at most 1e6 s");
  VIT_VALUE_CHECK(o.max_body_mb <= 1e6, "--max-body-mb: at most 1e6 (a terabyte)");
  VIT_VALUE_CHECK(o.max_delay_ms <= 1e6, "--max-delay-ms: at most 1e6 (1,000 s)");
  svr_ = make_server(o, socket_);  // before the models: a bad certificate is said at once
  host_ = std::make_unique<Host>(o, log);
  // A request waits up to --max-delay-ms for others to batch with: past --timeout-s, every
  // request that does not fill a batch gets 504 (said in silence before).
  if (o.max_delay_ms >= 1000 * o.timeout_s)
    host_->say(detail::concat("vit serve: note: --max-delay-ms ", o.max_delay_ms,
                              " is not shorter than --timeout-s ", o.timeout_s,
                              " s: requests that do not fill a batch time out waiting for it"));
  svr_->new_task_queue = [this] { return pool_ = new ConnectionPool(size_t(o_.http_threads)); };
  svr_->set_payload_max_length(host_->max_body());
  svr_->set_keep_alive_max_count(1000);
  svr_->set_keep_alive_timeout(o.keep_alive_s);
  svr_->set_tcp_nodelay(true);  // an answer goes out at once, not after the client's delayed ACK (40 ms)
  install_hooks();
  install_routes();
}

ModelPtr Service::find(const std::string& name, httplib::Response& res, const std::string& version) {
  ModelPtr m = host_->find(name);
  t_request.model = m ? name : "";
  if (!m) fail(res, 404, host_->unknown(name));
  if (m && !version.empty() && version != m->version) {
    fail(res, 404, "model '" + name + "' has version " + m->version + " only, not '" + version + "'");
    return nullptr;
  }
  return m;
}

// Queues a request's images and waits for its logits: false when it has answered res with an
// error (503 queue full, 504 past --timeout-s or the request's timeout, 500 the forward failed).
bool Service::infer(const Model& m, std::vector<float> x, int64_t n, httplib::Response& res,
                    std::vector<float>& logits, int64_t timeout_us) {
  Inference r =
      host_->infer(m, std::move(x), n, host_->deadline(t_request.start, timeout_us), {}, timeout_us);
  t_request.batch = r.batch;
  if (r.status != 200) {
    if (r.status == 503) res.set_header("Retry-After", "1");
    fail(res, r.status, r.error);
    return false;
  }
  logits = std::move(r.logits);
  return true;
}

bool Service::has_endpoint(const std::string& method, const std::string& path) const {
  return std::any_of(routes_.begin(), routes_.end(),
                     [&](const auto& r) { return r.second == method && std::regex_match(path, r.first); });
}

void Service::no_endpoint(const httplib::Request& req, httplib::Response& res) const {
  if (const std::string allow = allowed(req.path); !allow.empty()) {
    res.set_header("Allow", allow);
    fail(res, 405, req.method + " is not an endpoint's method for " + req.path + ": " + allow);
  } else {
    fail(res, 404, "no endpoint " + req.method + " " + req.path);
  }
}

std::string Service::allowed(const std::string& path) const {
  std::string methods;
  for (const auto& [pattern, method] : routes_)
    if (std::regex_match(path, pattern) && methods.find(method) == std::string::npos)
      methods += (methods.empty() ? "" : ", ") + method;
  return methods;
}

std::string Service::http_metrics() const {
  const ConnectionPool* pool = pool_;
  return detail::concat(
      "# HELP vit_http_threads Threads serving connections (started as needed, up to --http-threads).\n"
      "# TYPE vit_http_threads gauge\nvit_http_threads ",
      pool ? pool->threads() : 0,
      "\n# HELP vit_http_connections_waiting Connections accepted and waiting for a thread.\n"
      "# TYPE vit_http_connections_waiting gauge\nvit_http_connections_waiting ",
      pool ? pool->waiting() : 0, "\n");
}

bool Service::refused_before_body(const httplib::Request& req, httplib::Response& res) const {
  // A request answered here leaves its body unread on the connection: the connection is
  // closed after the answer, or the body's bytes would be read as the next request.
  if (const std::string bad = framing_error(req); !bad.empty()) {
    close_unread(res);
    fail(res, 400, bad);
    return true;
  }
  // RFC 9112 section 3.2: 400 for an HTTP/1.1 request without Host, and for any request with
  // two or with one whose value is not a host and port (they were answered).
  if (const std::string bad = host_error(req); !bad.empty()) {
    if (has_body(req)) close_unread(res);
    fail(res, 400, bad + " (RFC 9112 section 3.2)");
    return true;
  }
  // httplib (Debian's build) decodes gzip, deflate and br; another coding reached the
  // endpoints as it was sent ("the body is not valid JSON" for a zstd body).
  if (const std::string coding = req.get_header_value("Content-Encoding");
      !coding.empty() && coding != "gzip" && coding != "deflate" && coding != "br" && coding != "identity") {
    close_unread(res);
    res.set_header("Accept-Encoding", "gzip, deflate, br");
    fail(res, 415, "Content-Encoding '" + printable(coding) + "': vit serve reads gzip, deflate and br");
    return true;
  }
  const bool open = req.path.rfind("/v2/health/", 0) == 0 || req.path == "/ping" || req.path == "/";
  const std::string auth = req.get_header_value("Authorization");
  if (!open && !host_->authorized(auth)) {
    res.set_header("WWW-Authenticate", "Bearer");
    if (has_body(req)) close_unread(res);
    fail(res, 401,
         auth.empty() ? "this server wants an API key: Authorization: Bearer KEY"
                      : "the API key is not valid");
    return true;
  }
  // A request no endpoint takes is answered here, before httplib reads a body for it:
  // - a POST or PUT with neither Content-Length nor Transfer-Encoding has no body (RFC 9112
  //   section 6.3), and httplib read one until its 5 s timeout, then it got 400 "the body
  //   ended before its Content-Length" (curl -X POST to a wrong path);
  // - the methods no endpoint has (DELETE, PATCH, OPTIONS, TRACE, CONNECT, PRI) got that 400
  //   too, or the same wait. A body sent with one is left unread: the connection closes.
  // The endpoints read bodies themselves (read_body) and know the first.
  const std::string& m = req.method;
  const bool bodyless_post = (m == "POST" || m == "PUT") && !req.has_header("Content-Length") &&
                             !req.has_header("Transfer-Encoding");
  if ((bodyless_post || (m != "GET" && m != "HEAD" && m != "POST" && m != "PUT")) &&
      !has_endpoint(req.method, req.path)) {
    if (has_body(req)) close_unread(res);
    no_endpoint(req, res);
    return true;
  }
  return false;
}

void Service::install_hooks() {
  svr_->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!t_request.started) t_request = RequestInfo{Clock::now(), true, "", 0, false};
    ConnectionPool::request_started();
    return refused_before_body(req, res) ? httplib::Server::HandlerResponse::Handled
                                         : httplib::Server::HandlerResponse::Unhandled;
  });
  // "Expect: 100-continue" (curl sends it above 1 MB): what would refuse the request is said
  // before the client sends the body, not after (httplib answered 100 to every request).
  svr_->set_expect_100_continue_handler([this](const httplib::Request& req, httplib::Response& res) {
    t_request = RequestInfo{Clock::now(), true, "", 0, false};
    ConnectionPool::request_started();
    if (refused_before_body(req, res)) return res.status;
    if (content_length(req) > host_->max_body()) {
      close_unread(res);
      fail(res, 413,
           detail::concat("the body of ", content_length(req), " bytes is larger than --max-body-mb (",
                          host_->max_body(), " bytes)"));
      return 413;
    }
    return 100;
  });
  svr_->set_error_handler([this, max_body = host_->max_body()](const httplib::Request& req,
                                                               httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 413) close_unread(res);  // the body is not read
    // cpp-httplib caps a body sent as a form (curl -d, urllib without a Content-Type) at 8 KB
    // where it reads the body itself: an unknown POST path (the endpoints use read_body).
    const bool form = req.get_header_value("Content-Type").rfind("application/x-www-form-urlencoded", 0) == 0;
    if (res.status == 413 && form && content_length(req) <= max_body)
      fail(
          res, 413,
          "a body over 8 KB must not be sent as a form (Content-Type: application/x-www-form-urlencoded, "
          "what "
          "curl -d sends): send Content-Type: application/json, or an image with curl --data-binary @FILE -H "
          "'Content-Type: image/png' or curl -T FILE");
    else if (res.status == 413)
      fail(res, 413, "the body is larger than --max-body-mb");
    else if (res.status == 404)
      no_endpoint(req, res);
    else
      fail_transport(req, res, t_request.started);
  });
  svr_->set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    try {
      std::rethrow_exception(ep);
    } catch (const RequestError& e) {
      fail(res, e.status, e.what());
    } catch (const std::exception& e) {
      fail(res, 500, e.what());
    }
  });
  // While connections wait for a thread (more clients than --http-threads), each answer
  // closes its connection, so that the waiting ones take their turn (connection_pool.h).
  svr_->set_post_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    res.set_header("Date", http_date());
    if (const ConnectionPool* pool = pool_; pool && pool->waiting() > 0 && !res.has_header("Connection"))
      res.set_header("Connection", "close");
    if (res.get_header_value("Connection") == "close") {
      ++closing_answers_;  // before the look at stopping_http_: the stop sees one or the other
      const size_t linger_bytes = t_request.unread ? host_->max_body() : 0;
      if (stopping_http_ || !close_after(req, res, linger_bytes, [this] { --closing_answers_; }))
        --closing_answers_;
    }
  });
  svr_->set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    const double s =
        t_request.started ? std::chrono::duration<double>(Clock::now() - t_request.start).count() : 0;
    host_->metrics().request(t_request.model, res.status, s, t_request.inference);
    char ms[32];
    std::snprintf(ms, sizeof ms, "%.1f", s * 1e3);
    // "-" for what a request line that did not parse lacks (as after a body cut off at 413).
    if (o_.access_log)
      host_->say(detail::concat(client(req), " ", req.method.empty() ? "-" : printable(req.method), " ",
                                req.path.empty() ? "-" : printable(req.path), " ", res.status, " ", ms,
                                " ms batch ", t_request.batch));
    t_request = RequestInfo{};
  });
}

void Service::install_routes() {
  using Req = httplib::Request;
  using Res = httplib::Response;
  get("/v2/health/live", [](const Req&, Res& res) { answer(res, 200, R"({"live":true})"); });
  get("/v2/health/ready", [this](const Req&, Res& res) {
    answer(res, host_->stopping ? 503 : 200, host_->stopping ? R"({"ready":false})" : R"({"ready":true})");
  });
  get("/ping", [](const Req&, Res& res) { answer(res, 200, R"({"status":"Healthy"})"); });
  // KServe's V1 protocol's liveness (its SDK's is_server_live with protocol v1 asks GET /).
  get("/", [](const Req&, Res& res) { answer(res, 200, R"({"status":"alive"})"); });
  get("/v2", [](const Req&, Res& res) {
    answer(res, 200,
           nlohmann::json{{"name", "vitcpp"}, {"version", version()}, {"extensions", server_extensions()}}
               .dump());
  });
  // Triton's model repository extension: the index (the models served, READY, and those
  // load would find, UNAVAILABLE); with --model-control-mode explicit, loading and unloading.
  post("/v2/repository/index", [this](const Req& req, Res& res, const httplib::ContentReader& reader) {
    std::string body;
    if (!read_body(req, reader, host_->max_body(), res, body)) return;
    const nlohmann::json j =
        body.empty() ? nlohmann::json::object() : nlohmann::json::parse(body, nullptr, false);
    if (!j.is_object() || (j.contains("ready") && !j["ready"].is_boolean()))
      throw RequestError(400, "the body must be empty or a JSON object, with \"ready\" true or false");
    const bool only_ready = j.value("ready", false);
    nlohmann::json index = nlohmann::json::array();
    for (const Host::IndexEntry& e : host_->index()) {
      if (only_ready && !e.ready) continue;
      nlohmann::json m = {
          {"name", e.name}, {"version", e.version}, {"state", e.ready ? "READY" : "UNAVAILABLE"}};
      if (!e.ready) m["reason"] = "unloaded";
      index.push_back(std::move(m));
    }
    answer(res, 200, json_for_output(index));
  });
  post(R"(/v2/repository/models/([^/]+)/(load|unload))",
       [this](const Req& req, Res& res, const httplib::ContentReader& reader) {
         std::string body;
         if (!read_body(req, reader, host_->max_body(), res, body)) return;
         const bool load = req.matches[2] == "load";
         const std::string config = repository_parameters(body, load);  // RequestError(400)
         host_->control(req.matches[1], load, config);
         answer(res, 200, "{}");
       });
  // Triton's statistics extension, for every model (before the metadata route, which would
  // take "stats" for a model's name) or one.
  get("/v2/models/stats",
      [this](const Req&, Res& res) { answer(res, 200, host_->metrics().stats_json(host_->names())); });
  get(R"(/v2/models/([^/]+)(?:/versions/([^/]+))?/stats)", [this](const Req& req, Res& res) {
    if (find(req.matches[1], res, req.matches[2]))
      answer(res, 200, host_->metrics().stats_json({req.matches[1]}));
  });
  get(R"(/v2/models/([^/]+)(?:/versions/([^/]+))?)", [this](const Req& req, Res& res) {
    if (const ModelPtr m = find(req.matches[1], res, req.matches[2]))
      answer(res, 200, model_metadata(req.matches[1], m->classifier(), m->version));
  });
  get(R"(/v2/models/([^/]+)(?:/versions/([^/]+))?/config)", [this](const Req& req, Res& res) {
    if (const ModelPtr m = find(req.matches[1], res, req.matches[2]))
      answer(res, 200, model_config(req.matches[1], m->classifier(), host_->serving_info(*m)));
  });
  get(R"(/v2/models/([^/]+)(?:/versions/([^/]+))?/ready)", [this](const Req& req, Res& res) {
    if (find(req.matches[1], res, req.matches[2]))
      answer(res, 200, json_for_output(nlohmann::json{{"name", req.matches[1]}, {"ready", true}}));
  });
  post(R"(/v2/models/([^/]+)(?:/versions/([^/]+))?/infer)",
       [this](const Req& req, Res& res, const httplib::ContentReader& reader) {
         std::string body;
         if (!read_body(req, reader, host_->max_body(), res, body)) return;
         const std::string name = req.matches[1];
         const ModelPtr m = find(name, res, req.matches[2]);
         if (!m) return;
         t_request.inference = true;
         // RequestError: 400 (the exception handler)
         InferRequest r = parse_infer(body, m->classifier(), json_length(req), host_->max_body());
         std::vector<float> logits;
         if (!infer(*m, std::move(r.x), r.n, res, logits, r.timeout_us)) return;
         const InferResponse out = infer_response(name, r, logits, m->classifier(), m->version);
         if (out.json_length == 0) return answer(res, 200, out.body);
         res.status = 200;
         res.set_header(kJsonLength, std::to_string(out.json_length));
         res.set_content(out.body, "application/octet-stream");
       });
  // KServe's V1 protocol (TensorFlow Serving's REST API): the models, one's readiness, predict.
  get("/v1/models", [this](const Req&, Res& res) { answer(res, 200, v1_models(host_->names())); });
  get(R"(/v1/models/([^/:]+))", [this](const Req& req, Res& res) {
    if (find(req.matches[1], res)) answer(res, 200, v1_model_ready(req.matches[1]));
  });
  post(R"(/v1/models/([^/:]+):predict)",
       [this](const Req& req, Res& res, const httplib::ContentReader& reader) {
         std::string body;
         if (!read_body(req, reader, host_->max_body(), res, body)) return;
         const ModelPtr m = find(req.matches[1], res);
         if (!m) return;
         t_request.inference = true;
         InferRequest r = parse_v1_predict(body, m->classifier(), host_->max_body());  // RequestError
         std::vector<float> logits;
         if (infer(*m, std::move(r.x), r.n, res, logits))
           answer(res, 200, v1_predict_response(logits, m->classifier()));
       });
  // TorchServe's image endpoint: curl --data-binary @FILE, -F data=@FILE (POST) or -T FILE (PUT).
  const auto predictions = [this](const Req& req, Res& res, const httplib::ContentReader& reader) {
    std::string body;
    size_t images = 0;
    if (!read_body(req, reader, host_->max_body(), res, body, &images)) return;
    // Several images (curl -F data=@a.png -F data=@b.png, or files under other names and no
    // data field): one was answered and the others dropped without a word.
    if (images > 1)
      throw RequestError(400,
                         detail::concat("a form of ", images,
                                        " images: one per request here; a batch goes to "
                                        "/v2/models/{m}/infer (BYTES input 'image', one element per image)"));
    // TorchServe's /{m}/{version} too; its packager's versions are "1.0" where Triton's are "1".
    auto number = [](std::string v) {
      while (v.ends_with(".0") && v.size() > 2) v.resize(v.size() - 2);
      return v;
    };
    const ModelPtr named = find(req.matches[1], res);
    if (!named) return;
    const std::string asked = req.matches[2];
    const ModelPtr m =
        asked.empty() || number(asked) == number(named->version) ? named : find(req.matches[1], res, asked);
    if (!m) return;
    t_request.inference = true;
    const Classifier& c = m->classifier();
    if (body.empty()) throw RequestError(400, "the body must be one PNG or JPEG image");
    std::vector<float> x(size_t(c.channels() * c.height() * c.width())), logits;
    try {
      preprocess_file(c, body, x.data());
    } catch (const Error& e) {
      throw RequestError(400, e.what());
    }
    if (infer(*m, std::move(x), 1, res, logits)) answer(res, 200, top5_json(logits.data(), c));
  };
  post(R"(/predictions/([^/]+)(?:/([^/]+))?)", predictions);
  put(R"(/predictions/([^/]+)(?:/([^/]+))?)", predictions);
  get("/metrics", [this](const Req&, Res& res) {
    res.set_content(host_->metrics_text() + http_metrics(), "text/plain; version=0.0.4");
  });
}

int Service::run() {
  // cpp-httplib binds with SO_REUSEPORT: a second server on a port in use started, and the
  // kernel shared the requests between the two (a leftover server answering with its old
  // model). SO_REUSEADDR alone lets a restart take a port its predecessor's connections
  // still hold (TIME_WAIT), as gRPC's listener (GRPC_ARG_ALLOW_REUSEPORT 0) and Triton do.
  svr_->set_socket_options([](socket_t sock) {
    const int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  raise_descriptor_limit(o_.http_threads, *host_);
  int port = o_.port;
  if (port == 0) {
    port = svr_->bind_to_any_port(o_.host);
    VIT_CHECK(port > 0, "cannot listen on ", o_.host, " (any port)");
  } else {
    VIT_CHECK(svr_->bind_to_port(o_.host, port), "cannot listen on ", o_.host, ":", port,
              " (in use, or not an address of this machine)");
  }
  socket_->set_backlog(SOMAXCONN);
  // gRPC before the watcher, which stops it; said first: the HTTP line says all is ready.
  if (o_.grpc_port >= 0) {
    grpc_ = start_grpc(*host_);
    host_->say(detail::concat("vit serve: gRPC listening on ", o_.host, ":", grpc_->port(),
                              o_.tls.on() ? " (TLS)" : "", ", up to ", grpc_->threads(), " calls at once"));
  }
  // SIGTERM and SIGINT: stop accepting, answer what is in flight, exit 0.
  std::atomic<bool> done{false};
  int sig = 0;
  std::thread watcher([&] {
    const sigset_t set = stop_signals();
    const timespec tick{0, 20'000'000};  // 20 ms: also notices that the server ended
    while (!done && sig <= 0) sig = ::sigtimedwait(&set, nullptr, &tick);
    if (sig <= 0) return;
    host_->stopping = true;
    host_->say(std::string("vit serve: ") + (sig == SIGINT ? "SIGINT" : "SIGTERM") +
               ": no new requests; answering those in flight");
    // httplib's stop() does nothing before its listen loop has begun, which would then run
    // on: a signal right after "listening on" (said just before) hung the server.
    while (!svr_->is_running() && !done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    // Connections in the kernel's accept queue, and those accepted but not yet begun
    // (waiting for a thread, with more clients than --http-threads), hold requests their
    // clients sent: stopping the listener would close them unanswered. So they begin first,
    // for at most --timeout-keep-alive (a client that connected and sent nothing holds its
    // thread that long anyway). Both empty three looks in a row, 2 ms apart: httplib's accept
    // thread, between its accept() and handing the connection on, shows in neither.
    const Clock::time_point until = Clock::now() + std::chrono::seconds(o_.keep_alive_s);
    for (int empty = 0; empty < 3 && Clock::now() < until;) {
      const ConnectionPool* pool = pool_;
      empty = (pool && pool->pending() > 0) || socket_->accept_queue() > 0 ? 0 : empty + 1;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    stopping_http_ = true;
    // (bounded: an answer blocked on a client that does not read is given up at the stop)
    for (const auto end = Clock::now() + std::chrono::seconds(o_.keep_alive_s);
         closing_answers_ > 0 && Clock::now() < end;)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    svr_->stop();
    if (grpc_) grpc_->shutdown();
  });
  host_->say(detail::concat("vit serve: listening on ", o_.tls.on() ? "https" : "http", "://", o_.host, ":",
                            port, " (", host_->names().size(), " model",
                            host_->names().size() == 1 ? "" : "s", ")"));
  const bool ok = svr_->listen_after_bind();
  pool_ = nullptr;  // httplib has deleted it
  done = true;
  watcher.join();
  if (grpc_) grpc_->shutdown();
  host_->stop_batchers();
  host_->say("vit serve: stopped");
  return ok || sig > 0 ? 0 : 1;
}

}  // namespace

int serve(const ServeOptions& o, std::ostream& log) {
  // Blocked before the models' and the HTTP server's threads start, which inherit the mask;
  // the caller's mask comes back at the end (a signal until then changes nothing: the server
  // is stopping, or stopped).
  const sigset_t set = stop_signals();
  sigset_t old;
  ::pthread_sigmask(SIG_BLOCK, &set, &old);
  struct Restore {
    const sigset_t &set, &mask;
    ~Restore() {
      const timespec now{0, 0};
      while (::sigtimedwait(&set, nullptr, &now) > 0) {  // one more while stopping: taken, as the first
      }
      ::pthread_sigmask(SIG_SETMASK, &mask, nullptr);
    }
  } restore{set, old};
  Service service(o, log);
  return service.run();
}

}  // namespace vit::serve
