// start_grpc in a build without gRPC (libgrpc++-dev not found, or VIT_GRPC=OFF).
#include "core/check.h"
#include "serve/grpc_server.h"

namespace vit::serve {

std::unique_ptr<GrpcServer> start_grpc(Host&) {
  throw Error(
      "--grpc-port: this build of vitcpp has no gRPC (install libgrpc++-dev and protobuf-compiler-grpc, then "
      "build again)");
}

}  // namespace vit::serve
