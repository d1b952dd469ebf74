// vit serve --grpc-port: the Open Inference Protocol's gRPC API (inference.proto) on the
// Host's models, beside the HTTP one: the same batchers, metrics, API keys, TLS and access
// log. On gRPC's synchronous server (Debian's libgrpc++-dev).
#pragma once
#include <memory>

#include "serve/host.h"

namespace vit::serve {

class GrpcServer {
 public:
  virtual ~GrpcServer() = default;
  virtual int port() const = 0;     // the port it listens on (the one chosen, with --grpc-port 0)
  virtual int threads() const = 0;  // calls it can answer at once (its thread cap)
  // No new calls (they get UNAVAILABLE); returns once those in flight are answered.
  virtual void shutdown() = 0;
};

// Listens on --host:--grpc-port, with --ssl-* as for HTTP. Throws vit::Error when it cannot,
// or when this build has no gRPC.
std::unique_ptr<GrpcServer> start_grpc(Host& host);

}  // namespace vit::serve
