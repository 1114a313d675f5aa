// SslEngine's state: one OpenSSL connection between two memory BIOs, the network side of
// which wrap() drains and unwrap() fills one record at a time.
#pragma once

#include "record_sealer.hpp"
#include "ssl_context_impl.hpp"

#include <niox/ssl/ssl_engine.hpp>

#include <openssl/evp.h>
#include <openssl/ssl.h>

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace niox {

class SslEngine::Impl {
 public:
  Impl(std::shared_ptr<SslContext::Impl> context, std::string_view peer_host,
       std::uint16_t peer_port);
  ~Impl();
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  static void switch_context(SSL* ssl, const SslContext& context);
  static bool remember_session(SSL* ssl, SSL_SESSION* session);

  void begin_handshake() noexcept;
  HandshakeStatus handshake_status() const noexcept;
  SslEngineResult wrap(std::span<ByteBuffer> srcs, ByteBuffer& dst, std::error_code& ec);
  SslEngineResult unwrap(ByteBuffer& src, std::span<ByteBuffer> dsts, std::error_code& ec);
  void close_outbound() noexcept;
  bool is_outbound_done() const noexcept;
  void close_inbound(std::error_code& ec) noexcept;
  bool is_inbound_done() const noexcept { return inbound_done_; }

  // kTLS: OpenSSL's keylog callback (every context sets it) hands over the TLS 1.3
  // application traffic secrets, and the message callback counts the records made or read
  // under them and sees key updates. The message callback also sees whether a record of ours
  // left encrypted (what close_outbound mid-handshake needs to know).
  static void on_keylog(const SSL* ssl, const char* line);
  static void on_message(int write_p, int version, int content_type, const void* buf,
                         std::size_t len, SSL* ssl, void* arg);
  std::string_view traffic_keys_refusal(TrafficDirection direction) const noexcept;
  // Whether the context lets the keys go to the kernel (SslContextBuilder::export_traffic_keys).
  bool records_traffic_keys() const noexcept { return context_->exports_traffic_keys_; }
  std::optional<TrafficKeys> export_traffic_keys(TrafficDirection direction) const;

  bool sealing() const noexcept { return sealer_ != nullptr; }

  bool client_ = false;
  SSL* ssl_ = nullptr;

 private:
  struct Traffic {
    std::array<unsigned char, EVP_MAX_MD_SIZE> secret{};
    std::size_t secret_size = 0;
    std::uint64_t records = 0;  // made (outbound) or read (inbound) under the secret
    bool known = false;
    bool key_updated = false;
    Traffic() = default;
    Traffic(const Traffic&) = delete;
    Traffic& operator=(const Traffic&) = delete;
    ~Traffic();
  };

  std::optional<TrafficCipher> traffic_cipher() const noexcept;
  std::size_t pending_output() const noexcept;
  std::size_t drain_output(ByteBuffer& dst) noexcept;
  void drive_handshake(std::error_code& ec);
  void queue_plaintext_alert(std::uint8_t description) noexcept;
  // Once the handshake is done (TLS 1.3, a cipher the sealer knows, nothing of OpenSSL's
  // waiting), application data is sealed by sealer_ instead of SSL_write. OpenSSL still makes
  // the other messages of that direction (alerts, a KeyUpdate): its records are dropped at
  // the write BIO and on_message seals each message again, in order, into pending_out_.
  void start_sealing();
  void reseal(std::uint8_t type, const void* message, std::size_t len) noexcept;
  // Has OpenSSL write (and on_message seal) the KeyUpdate a peer asked for; whether output
  // now waits.
  bool answer_key_update() noexcept;
  void fail(std::error_code& ec, std::error_code cause) noexcept;
  SslEngineResult result(SslEngineStatus status, std::size_t consumed,
                         std::size_t produced) noexcept;

  std::shared_ptr<SslContext::Impl> context_;
  BIO* network_in_ = nullptr;  // owned by ssl_
  // OpenSSL's write BIO (owned by ssl_): while wrap encrypts application data (TLS 1.2; TLS 1.3
  // data is sealed without OpenSSL's records, and they are dropped here) it copies each
  // record straight into wrap's destination (direct_), which wrap has checked holds a whole
  // record; everything else (handshake flights, alerts, close_notify) waits in pending_out_,
  // as in a memory BIO, until wrap drains it. A memory BIO alone cost a second copy of every
  // record: into the BIO, and out of it.
  BIO* network_out_ = nullptr;
  BIO* pending_out_ = nullptr;  // ours
  ByteBuffer* direct_ = nullptr;
  static BIO_METHOD* direct_method() noexcept;
  static int direct_write(BIO* bio, const char* data, std::size_t len, std::size_t* written);
  static long direct_ctrl(BIO* bio, int cmd, long num, void* ptr);
  std::string session_key_;
  std::vector<std::byte> gather_;
  bool started_ = false;
  bool exchanged_ = false;  // any byte went either way: closing now can be a truncation
  bool handshake_done_ = false;
  bool finished_reported_ = false;
  bool failed_ = false;
  bool outbound_closed_ = false;
  bool inbound_done_ = false;
  bool close_notify_received_ = false;
  // A record of ours left encrypted: an alert mid-handshake would need the keys only OpenSSL
  // holds, and uses for alerts once the handshake is done.
  bool sent_protected_ = false;
  bool close_after_handshake_ = false;  // close_outbound waits for the handshake to end
  std::unique_ptr<detail::RecordSealer> sealer_;
  std::uint64_t wrapped_ = 0;     // application bytes SSL_write took (see seal_after)
  bool sealing_refused_ = false;  // for good: TLS 1.2, another cipher, keys not seen
  bool keys_wanted_ = false;      // sealing was refused only for want of the keys
  bool seal_failed_ = false;      // the cipher failed inside OpenSSL's callback
  Traffic outbound_;
  Traffic inbound_;
};

// What the tests reach past the API with (forcing one TLS 1.3 cipher suite, a key update).
struct detail::SslEngineAccess {
  static SSL* ssl(SslEngine& engine) noexcept { return engine.impl_->ssl_; }
  // Whether the engine's own record sealer makes its application data records.
  static bool sealing(SslEngine& engine) noexcept { return engine.impl_->sealing(); }
};

}  // namespace niox
