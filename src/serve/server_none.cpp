// vit serve in a build without cpp-httplib: a clear error.
#include "core/check.h"
#include "serve/server.h"

namespace vit::serve {

int serve(const ServeOptions&, std::ostream&) {
  throw Error(
      "this vit was built without cpp-httplib: install libcpp-httplib-dev (scripts/setup.sh), then "
      "reconfigure and rebuild");
}

}  // namespace vit::serve
