// vit serve's TLS (--ssl-certfile, --ssl-keyfile, --ssl-ca-certs) on
// OpenSSL, through cpp-httplib's SSLServer.
#pragma once
#include <openssl/ssl.h>

#include <string>

#include "serve/server.h"

namespace vit::serve {

// Sets up ctx: TLS 1.2 or later, the certificate chain and its key, and with ca_certs the
// clients' certificates required and checked. Returns "" when done, else what went wrong,
// naming the file and OpenSSL's reason.
std::string setup_tls(SSL_CTX& ctx, const TlsOptions& o);

}  // namespace vit::serve
