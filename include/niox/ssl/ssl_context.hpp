// niox::SslContext — the shared configuration of TLS connections (Netty's SslContext), built
// by SslContextBuilder the way Netty's SslContextBuilder is:
//
//   auto server = niox::SslContextBuilder::for_server(niox::Pem::file("cert.pem"),
//                                                     niox::Pem::file("key.pem"))
//                     .application_protocols({"http/1.1"})
//                     .build();
//   auto client = niox::SslContextBuilder::for_client()
//                     .trust_manager(niox::Pem::file("ca.pem"))   // default: the system store
//                     .build();
//   niox::SslEngine engine = client.new_engine("example.com", 443);
//
// What a context always does, because a server facing the internet must: TLS 1.2 and 1.3
// only (protocols() can narrow, never widen, that), OpenSSL's default cipher list and
// security level, renegotiation refused, compression off. Clients verify the peer's chain
// against the trust store and, when an engine is made for a host name, the certificate's
// names against it (the same name goes out as SNI). Servers issue session tickets; a client
// context caches one session per host:port and offers it again, so a second engine for the
// same peer resumes (Java's SSLContext client session cache).
//
// Ownership.  SslContext is a shared handle: copies refer to the same configuration, which
// lives as long as any copy or any engine made from it. It is immutable once built and safe
// to use from any thread; engines made from it are not shared between threads.
//
// Errors.  build() throws std::system_error (niox.ssl category, OpenSSL's reason in the text)
// for a PEM that does not load or a key that does not match its certificate; the
// std::error_code& overload reports the same without throwing.
#pragma once

#include <niox/ssl/ssl_error.hpp>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace niox {

class SslEngine;
class SslContext;

// PEM text from a file or from memory: certificates (a chain, leaf first) or a private key.
// The builder reads files when build() runs and copies in-memory text when given it.
class Pem {
 public:
  static Pem file(std::filesystem::path path) { return Pem(std::move(path)); }
  static Pem memory(std::string text) { return Pem(std::move(text)); }

  bool is_file() const noexcept { return !path_.empty(); }
  const std::filesystem::path& path() const noexcept { return path_; }
  const std::string& text() const noexcept { return text_; }

 private:
  explicit Pem(std::filesystem::path path) : path_(std::move(path)) {}
  explicit Pem(std::string text) : text_(std::move(text)) {}
  std::filesystem::path path_;
  std::string text_;
};

enum class SslProtocol { tls1_2, tls1_3 };

// Netty's ClientAuth: whether a server asks for, or insists on, a client certificate.
enum class ClientAuth { none, optional, require };

class SslContextBuilder {
 public:
  static SslContextBuilder for_client();
  static SslContextBuilder for_server(Pem cert_chain, Pem private_key);

  // Trust these CA certificates instead of the system store.
  SslContextBuilder& trust_manager(Pem ca_certificates);
  // Trust the CA certificates of a hashed folder (c_rehash / openssl rehash layout).
  SslContextBuilder& trust_manager_directory(std::filesystem::path ca_directory);
  // The certificate this side presents: a client's certificate, or the server's (again). A
  // certificate without its chain in `cert_chain` is completed from the trust store once, by
  // build(); what the store gains later is not sent.
  SslContextBuilder& key_manager(Pem cert_chain, Pem private_key);
  SslContextBuilder& client_auth(ClientAuth mode);
  // ALPN: the protocols offered (client) or accepted (server), in order of preference.
  SslContextBuilder& application_protocols(std::vector<std::string> protocols);
  // The versions allowed, a subset of {TLS 1.2, TLS 1.3} (both when never called).
  SslContextBuilder& protocols(std::initializer_list<SslProtocol> versions);
  // The cipher suites allowed, OpenSSL's names, both versions' in one list (Netty's
  // ciphers()): TLS 1.3 suites ("TLS_AES_128_GCM_SHA256") and TLS 1.2 ones
  // ("ECDHE-ECDSA-AES128-GCM-SHA256"). A version none of whose suites is named keeps OpenSSL's
  // defaults. A name OpenSSL does not know fails build() (bad_configuration), rather than
  // leaving a weaker list than asked for.
  SslContextBuilder& ciphers(std::vector<std::string> names);
  // The key exchange groups offered (client, in order of preference: the first gets a key
  // share in the ClientHello) or accepted (server), by OpenSSL's names: "X25519", "P-256",
  // "P-384", "X448"... (Java's SSLParameters.setNamedGroups). Default: OpenSSL's list. A client
  // whose key share the server does not accept gets a HelloRetryRequest and one more round
  // trip. An unknown name fails build().
  SslContextBuilder& named_groups(std::vector<std::string> names);
  // How long a session may be resumed (server tickets and the client cache); 0 turns
  // resumption off.
  SslContextBuilder& session_timeout(std::chrono::seconds timeout);
  // Whether SslEngine::export_traffic_keys may hand a TLS 1.3 connection's keys to the
  // kernel (kTLS). Default: where this kernel offers kTLS (kernel_tls_available()). Off:
  // connections keep their records in user space, and export_traffic_keys refuses with the
  // reason. Either way each engine keeps its connection's traffic secrets (in memory, never
  // written out, wiped with the engine): it seals its own application records with them (see
  // SslEngine).
  SslContextBuilder& export_traffic_keys(bool on);
  // Server: connections whose SNI name is `host_name` (exact, or "*.example.com" for one
  // label) use `context`'s certificate instead of this one's.
  SslContextBuilder& sni(std::string host_name, SslContext context);

  SslContext build() const;
  SslContext build(std::error_code& ec) const;

  struct Settings;
  SslContextBuilder(SslContextBuilder&&) noexcept;
  SslContextBuilder& operator=(SslContextBuilder&&) noexcept;
  SslContextBuilder(const SslContextBuilder&);
  SslContextBuilder& operator=(const SslContextBuilder&);
  ~SslContextBuilder();

 private:
  explicit SslContextBuilder(bool server);
  std::unique_ptr<Settings> settings_;
};

class SslContext {
 public:
  // An empty context: is_valid() is false and new_engine() throws.
  SslContext() noexcept = default;

  bool is_valid() const noexcept { return impl_ != nullptr; }
  bool is_client() const noexcept;
  bool is_server() const noexcept { return is_valid() && !is_client(); }

  // A server engine, or a client engine that verifies the peer's chain but no name.
  SslEngine new_engine() const;
  // A client engine for `peer_host` (a DNS name or an IP literal): sent as SNI when it is a
  // name, checked against the peer's certificate, and with `peer_port` the key of the session
  // cache. A server context ignores both, like Java's createSSLEngine(host, port).
  SslEngine new_engine(std::string_view peer_host, std::uint16_t peer_port = 0) const;

  // The protocols set by application_protocols().
  const std::vector<std::string>& application_protocols() const noexcept;

  class Impl;

 private:
  friend class SslContextBuilder;
  friend class SslEngine;
  explicit SslContext(std::shared_ptr<Impl> impl) noexcept : impl_(std::move(impl)) {}
  std::shared_ptr<Impl> impl_;
};

}  // namespace niox
