// What an SslContext holds: the OpenSSL SSL_CTX and what the engines made from it share.
#pragma once

#include <niox/ssl/ssl_context.hpp>

#include <openssl/ssl.h>

#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace niox {

class SslContext::Impl {
 public:
  Impl(SSL_CTX* ctx, bool client) noexcept : ctx_(ctx), client_(client) {}
  ~Impl();
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  SSL_CTX* ctx() const noexcept { return ctx_; }
  bool is_client() const noexcept { return client_; }

  // Client session cache, keyed by "host:port": the newest session the peer gave us.
  void store_session(const std::string& key, SSL_SESSION* session);  // takes the reference
  SSL_SESSION* find_session(const std::string& key);                 // caller owns the result

  std::vector<std::string> alpn_;
  std::vector<unsigned char> alpn_wire_;
  std::vector<std::pair<std::string, SslContext>> sni_;
  // SslContextBuilder::export_traffic_keys: engines may hand their keys to the kernel.
  bool exports_traffic_keys_ = false;

 private:
  SSL_CTX* ctx_;
  bool client_;
  std::mutex sessions_mutex_;
  std::map<std::string, SSL_SESSION*> sessions_;
};

}  // namespace niox
