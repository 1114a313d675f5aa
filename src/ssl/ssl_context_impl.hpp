// What an SslContext holds: the OpenSSL SSL_CTX and what the engines made from it share.
//
// Keys.  An engine learns its TLS 1.3 traffic secrets only through OpenSSL's key-log callback,
// which first formats every secret of the handshake as hex text (about 15 us a handshake, a
// twentieth of a full one). The secrets pay for that only on a connection that carries enough
// to seal (SslEngine's records). So a context has a twin SSL_CTX, set up the same way but
// without the callback, and a new engine starts from it while few of the context's recent
// engines wanted their keys: fewer than one in eight, in an average over about the last
// sixteen. An engine that wanted keys it does not have writes through SSL_write, and counts,
// so a context whose connections start carrying more turns its keys back on. A context that
// may hand keys to the kernel (kTLS) has no twin. Both share their ticket keys, so a session
// either gave out resumes on either.
#pragma once

#include <niox/ssl/ssl_context.hpp>

#include <openssl/ssl.h>

#include <atomic>
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

  // The SSL_CTX with the key-log callback.
  SSL_CTX* ctx() const noexcept { return ctx_; }
  bool is_client() const noexcept { return client_; }
  // Takes the twin without it (SslContextBuilder::build).
  void set_quiet(SSL_CTX* quiet) noexcept { quiet_ = quiet; }
  // Where a new engine starts (see Keys above).
  SSL_CTX* ctx_for_new_engine() const noexcept {
    return quiet_ != nullptr && keys_wanted_.load(std::memory_order_relaxed) < keys_threshold
               ? quiet_
               : ctx_;
  }
  // SNI: this context's SSL_CTX of the same kind (with keys or without) as `current`.
  SSL_CTX* like(const SSL_CTX* current) const noexcept {
    return quiet_ != nullptr && SSL_CTX_get_keylog_callback(current) == nullptr ? quiet_ : ctx_;
  }
  // An engine made from this context ends; `wanted_keys`: it sealed, or would have with keys.
  void engine_ended(bool wanted_keys) noexcept {
    if (quiet_ == nullptr) return;
    int was = keys_wanted_.load(std::memory_order_relaxed);
    // An average over about the last sixteen engines, in 1/256ths.
    while (!keys_wanted_.compare_exchange_weak(was, was - was / 16 + (wanted_keys ? 16 : 0),
                                               std::memory_order_relaxed)) {
    }
  }

  // Client session cache, keyed by "host:port": the newest session the peer gave us.
  void store_session(const std::string& key, SSL_SESSION* session);  // takes the reference
  SSL_SESSION* find_session(const std::string& key);                 // caller owns the result

  std::vector<std::string> alpn_;
  std::vector<unsigned char> alpn_wire_;
  std::vector<std::pair<std::string, SslContext>> sni_;
  // SslContextBuilder::export_traffic_keys: engines may hand their keys to the kernel.
  bool exports_traffic_keys_ = false;

 private:
  static constexpr int keys_threshold = 32;  // one engine in eight

  SSL_CTX* ctx_;
  SSL_CTX* quiet_ = nullptr;
  bool client_;
  std::atomic<int> keys_wanted_{256};  // start with keys, as if every engine wanted them
  std::mutex sessions_mutex_;
  std::map<std::string, SSL_SESSION*> sessions_;
};

}  // namespace niox
