#include "serve/tls.h"

#include <openssl/err.h>
#include <openssl/pem.h>

namespace vit::serve {

namespace {

// OpenSSL's reason for the last failure ("no start line", "bad decrypt"), and its error
// queue emptied.
std::string openssl_reason() {
  std::string reason;
  while (const unsigned long e = ERR_get_error()) {
    const char* r = ERR_reason_error_string(e);
    reason = r ? r : "error " + std::to_string(e);  // the last is the nearest to the call
  }
  return reason.empty() ? "unknown error" : reason;
}

// A key's password: none. OpenSSL's default asks on the terminal, which a server may not have.
int no_password(char*, int, int, void*) {
  return 0;
}

}  // namespace

std::string setup_tls(SSL_CTX& ctx, const TlsOptions& o) {
  ERR_clear_error();
  SSL_CTX_set_min_proto_version(&ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(&ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
  if (SSL_CTX_use_certificate_chain_file(&ctx, o.certfile.c_str()) != 1)
    return "--ssl-certfile " + o.certfile + ": not a PEM certificate (" + openssl_reason() + ")";
  // The key read on its own first, so that a file that is no key and a key of another
  // certificate are told apart.
  EVP_PKEY* key = nullptr;
  if (BIO* in = BIO_new_file(o.keyfile.c_str(), "r")) {
    key = PEM_read_bio_PrivateKey(in, nullptr, no_password, nullptr);
    BIO_free(in);
  }
  if (!key)
    return "--ssl-keyfile " + o.keyfile + ": not a PEM private key, or one encrypted with a password (" +
           openssl_reason() + "; openssl pkey -in KEY -out PLAIN_KEY writes it unencrypted)";
  const bool matches = SSL_CTX_use_PrivateKey(&ctx, key) == 1 && SSL_CTX_check_private_key(&ctx) == 1;
  EVP_PKEY_free(key);  // the context holds its own reference
  if (!matches)
    return "--ssl-keyfile " + o.keyfile + " is not the key of --ssl-certfile " + o.certfile + " (" +
           openssl_reason() + ")";
  if (!o.ca_certs.empty()) {
    if (SSL_CTX_load_verify_locations(&ctx, o.ca_certs.c_str(), nullptr) != 1)
      return "--ssl-ca-certs " + o.ca_certs + ": not PEM certificates (" + openssl_reason() + ")";
    // The CAs' names go to the client, which picks a certificate they signed.
    if (STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(o.ca_certs.c_str()))
      SSL_CTX_set_client_CA_list(&ctx, names);
    SSL_CTX_set_verify(&ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  }
  return "";
}

}  // namespace vit::serve
