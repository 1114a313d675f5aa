#include "openssl_error.hpp"
#include "ssl_context_impl.hpp"
#include "ssl_engine_impl.hpp"

#include <niox/ssl/ssl_engine.hpp>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/kdf.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstring>
#include <vector>

namespace niox {
namespace {

constexpr std::size_t record_header_size = 5;
constexpr std::size_t max_plaintext = 16384;
// The sealer starts with a full record, or once this much went through SSL_write: a connection
// that sends one small response and closes (a handshake per request) would spend more on
// deriving the sealer's keys than the copies would have cost.
constexpr std::size_t seal_after = 4 * max_plaintext;
// The largest ciphertext a TLS 1.2 peer may send (RFC 5246 6.2.3); TLS 1.3 allows less.
constexpr std::size_t max_ciphertext = max_plaintext + 2048;
// Header, explicit IV, MAC and padding of the most expensive cipher TLS 1.2 still offers.
constexpr std::size_t max_record_overhead = SslEngine::packet_buffer_size() - max_plaintext;

constexpr std::uint8_t change_cipher_spec = 20;
constexpr std::uint8_t alert_record = 21;
constexpr std::uint8_t handshake_record = 22;
constexpr std::uint8_t application_data_record = 23;
constexpr std::uint8_t heartbeat_record = 24;

void throw_if(const std::error_code& ec, const char* what) {
  if (ec) {
    throw std::system_error(ec, what);
  }
}

std::size_t total_remaining(std::span<ByteBuffer> buffers) noexcept {
  std::size_t n = 0;
  for (const ByteBuffer& b : buffers) {
    n += b.remaining();
  }
  return n;
}

}  // namespace

std::string_view to_string(SslEngineStatus status) noexcept {
  switch (status) {
    case SslEngineStatus::ok: return "OK";
    case SslEngineStatus::buffer_underflow: return "BUFFER_UNDERFLOW";
    case SslEngineStatus::buffer_overflow: return "BUFFER_OVERFLOW";
    case SslEngineStatus::closed: return "CLOSED";
  }
  return "?";
}

std::string_view to_string(HandshakeStatus status) noexcept {
  switch (status) {
    case HandshakeStatus::not_handshaking: return "NOT_HANDSHAKING";
    case HandshakeStatus::finished: return "FINISHED";
    case HandshakeStatus::need_wrap: return "NEED_WRAP";
    case HandshakeStatus::need_unwrap: return "NEED_UNWRAP";
    case HandshakeStatus::need_task: return "NEED_TASK";
  }
  return "?";
}

// One method for every engine's write BIO, made on first use; null when OpenSSL cannot make one
// (no memory), which fails the engine's construction.
BIO_METHOD* SslEngine::Impl::direct_method() noexcept {
  static BIO_METHOD* const method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "niox engine output");
    if (m != nullptr &&
        (BIO_meth_set_write_ex(m, &Impl::direct_write) != 1 ||
         BIO_meth_set_ctrl(m, &Impl::direct_ctrl) != 1 || BIO_meth_set_create(m, [](BIO* b) {
                                                            BIO_set_init(b, 1);
                                                            return 1;
                                                          }) != 1)) {
      BIO_meth_free(m);
      m = nullptr;
    }
    return m;
  }();
  return method;
}

SslEngine::Impl::Impl(std::shared_ptr<SslContext::Impl> context, std::string_view peer_host,
                      std::uint16_t peer_port)
    : client_(context->is_client()), context_(std::move(context)) {
  ssl_ = SSL_new(context_->ctx_for_new_engine());
  network_in_ = BIO_new(BIO_s_mem());
  network_out_ = direct_method() != nullptr ? BIO_new(direct_method()) : nullptr;
  pending_out_ = BIO_new(BIO_s_mem());
  if (network_out_ != nullptr) BIO_set_data(network_out_, this);
  if (ssl_ == nullptr || network_in_ == nullptr || network_out_ == nullptr ||
      pending_out_ == nullptr) {
    BIO_free(network_in_);
    BIO_free(network_out_);
    BIO_free(pending_out_);
    SSL_free(ssl_);
    throw std::bad_alloc();
  }
  // An empty input BIO means "wait for more", never end of file.
  BIO_set_mem_eof_return(network_in_, -1);
  BIO_set_mem_eof_return(pending_out_, -1);
  SSL_set_bio(ssl_, network_in_, network_out_);
  // The context releases record buffers whenever they empty (an idle connection holds none).
  // During the handshake they would empty after every record: one 16 KiB buffer taken and
  // freed per record, and in glibc each such free and take of a large chunk sorts the small
  // free chunks too (the handshake's cost, not its crypto's). So the handshake keeps them; once
  // it is done each goes when it next empties (drive_handshake).
  SSL_clear_mode(ssl_, SSL_MODE_RELEASE_BUFFERS);
  SSL_set_app_data(ssl_, this);
  SSL_set_msg_callback(ssl_, &Impl::on_message);
  SSL_set_msg_callback_arg(ssl_, this);
  if (!client_) {
    SSL_set_accept_state(ssl_);
    return;
  }
  SSL_set_connect_state(ssl_);
  if (!peer_host.empty()) {
    const std::string host(peer_host);
    X509_VERIFY_PARAM* param = SSL_get0_param(ssl_);
    if (X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str()) != 1) {
      // A name, not an address: it is both what we ask for (SNI) and what we check.
      SSL_set_hostflags(ssl_, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
      if (SSL_set_tlsext_host_name(ssl_, host.c_str()) != 1 ||
          SSL_set1_host(ssl_, host.c_str()) != 1) {
        SSL_free(ssl_);
        BIO_free(pending_out_);
        throw std::system_error(
            detail::take_openssl_error(nullptr, make_error_code(SslErrc::bad_configuration)),
            "SslContext::new_engine");
      }
    }
    ERR_clear_error();
    session_key_ = host + ":" + std::to_string(peer_port);
    if (SSL_SESSION* session = context_->find_session(session_key_)) {
      SSL_set_session(ssl_, session);
      SSL_SESSION_free(session);
    }
  }
}

SslEngine::Impl::~Impl() {
  context_->engine_ended(sealer_ != nullptr || keys_wanted_);
  SSL_free(ssl_);
  BIO_free(pending_out_);
}

int SslEngine::Impl::direct_write(BIO* bio, const char* data, std::size_t len,
                                  std::size_t* written) {
  auto* self = static_cast<Impl*>(BIO_get_data(bio));
  if (self->sealer_ != nullptr) {
    // Made under keys and a sequence number that are no longer OpenSSL's: on_message has
    // sealed the message again.
    *written = len;
    return 1;
  }
  ByteBuffer* dst = self->direct_;
  // Straight into wrap's destination, unless something waits before it (order) or it does not
  // fit (never, for the records wrap asked for; a caller's BIO_write of its own goes pending).
  if (dst != nullptr && BIO_ctrl_pending(self->pending_out_) == 0 && dst->remaining() >= len) {
    std::memcpy(dst->writable_bytes().data(), data, len);
    dst->position(dst->position() + len);
    *written = len;
    return 1;
  }
  return BIO_write_ex(self->pending_out_, data, len, written);
}

long SslEngine::Impl::direct_ctrl(BIO* bio, int cmd, long, void*) {
  auto* self = static_cast<Impl*>(BIO_get_data(bio));
  switch (cmd) {
    case BIO_CTRL_FLUSH: return 1;  // nothing is held back from wrap
    case BIO_CTRL_PENDING:
    case BIO_CTRL_WPENDING: return static_cast<long>(BIO_ctrl_pending(self->pending_out_));
    default: return 0;  // no kTLS, no datagrams, no chaining
  }
}

void SslEngine::Impl::switch_context(SSL* ssl, const SslContext& context) {
  SSL_set_SSL_CTX(ssl, context.impl_->like(SSL_get_SSL_CTX(ssl)));
}

bool SslEngine::Impl::remember_session(SSL* ssl, SSL_SESSION* session) {
  auto* self = static_cast<Impl*>(SSL_get_app_data(ssl));
  if (self == nullptr || self->session_key_.empty()) {
    return false;
  }
  self->context_->store_session(self->session_key_, session);
  return true;
}

std::size_t SslEngine::Impl::pending_output() const noexcept {
  return BIO_ctrl_pending(pending_out_);
}

std::size_t SslEngine::Impl::drain_output(ByteBuffer& dst) noexcept {
  const std::size_t n = std::min({pending_output(), dst.remaining(), std::size_t{INT_MAX}});
  if (n == 0) {
    return 0;
  }
  const int got = BIO_read(pending_out_, dst.writable_bytes().data(), static_cast<int>(n));
  if (got <= 0) {
    return 0;
  }
  dst.position(dst.position() + static_cast<std::size_t>(got));
  exchanged_ = true;
  return static_cast<std::size_t>(got);
}

void SslEngine::Impl::fail(std::error_code& ec, std::error_code cause) noexcept {
  failed_ = true;
  close_after_handshake_ = false;
  ec = cause;
  ERR_clear_error();
}

void SslEngine::Impl::begin_handshake() noexcept { started_ = true; }

void SslEngine::Impl::drive_handshake(std::error_code& ec) {
  started_ = true;
  ERR_clear_error();
  const int r = SSL_do_handshake(ssl_);
  if (r == 1) {
    handshake_done_ = true;
    // Not SSL_free_buffers as well: it was suspected in a crash never explained (ad6730e), and
    // each buffer goes anyway when it next empties (the write buffer, once the sealer takes
    // over, in start_sealing).
    SSL_set_mode(ssl_, SSL_MODE_RELEASE_BUFFERS);
    if (SSL_version(ssl_) != TLS1_3_VERSION && !records_traffic_keys()) {
      // Only a close mid-handshake asked about our records, and TLS 1.2 is not sealed here:
      // the rest go without the calls.
      SSL_set_msg_callback(ssl_, nullptr);
    }
    if (close_after_handshake_) {
      close_after_handshake_ = false;
      SSL_shutdown(ssl_);
      ERR_clear_error();
    }
    return;
  }
  const int err = SSL_get_error(ssl_, r);
  if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
    return;
  }
  if (err == SSL_ERROR_ZERO_RETURN) {
    // The peer's close_notify (after its user_canceled, see close_outbound): it gave up on the
    // handshake, which is neither a protocol error nor a truncation.
    close_notify_received_ = true;
    inbound_done_ = true;
    fail(ec, make_error_code(SslErrc::handshake_canceled));
    return;
  }
  fail(ec, detail::take_openssl_error(ssl_, make_error_code(SslErrc::engine_closed)));
}

HandshakeStatus SslEngine::Impl::handshake_status() const noexcept {
  if (pending_output() > 0) {
    return HandshakeStatus::need_wrap;
  }
  if (close_after_handshake_) {
    return HandshakeStatus::need_unwrap;  // the peer's last flight, then our close_notify
  }
  if (failed_ || outbound_closed_ || inbound_done_ || handshake_done_) {
    return HandshakeStatus::not_handshaking;
  }
  if (!started_ && !exchanged_) {
    return client_ ? HandshakeStatus::need_wrap : HandshakeStatus::need_unwrap;
  }
  // A client that has not sent its hello yet still has to wrap it.
  return client_ && !exchanged_ ? HandshakeStatus::need_wrap : HandshakeStatus::need_unwrap;
}

SslEngineResult SslEngine::Impl::result(SslEngineStatus status, std::size_t consumed,
                                        std::size_t produced) noexcept {
  HandshakeStatus hs = handshake_status();
  if (handshake_done_ && !finished_reported_ && hs == HandshakeStatus::not_handshaking) {
    finished_reported_ = true;
    hs = HandshakeStatus::finished;
  }
  return {status, hs, consumed, produced};
}

SslEngineResult SslEngine::Impl::wrap(std::span<ByteBuffer> srcs, ByteBuffer& dst,
                                      std::error_code& ec) {
  ec.clear();
  if (dst.is_read_only()) {
    throw std::invalid_argument("SslEngine::wrap: read-only destination");
  }
  const bool closing = failed_ || outbound_closed_;
  if (!closing && !handshake_done_ && pending_output() == 0) {
    drive_handshake(ec);
  }
  if (pending_output() > 0) {
    // Handshake messages, alerts, or the rest of a record a small dst could not take.
    if (!dst.has_remaining()) {
      return result(SslEngineStatus::buffer_overflow, 0, 0);
    }
    const std::size_t produced = drain_output(dst);
    const bool done = (failed_ || outbound_closed_) && pending_output() == 0;
    return result(done ? SslEngineStatus::closed : SslEngineStatus::ok, 0, produced);
  }
  if (seal_failed_) {
    fail(ec, make_error_code(SslErrc::engine_closed));
    return result(SslEngineStatus::closed, 0, 0);
  }
  if (failed_ || outbound_closed_) {
    return result(SslEngineStatus::closed, 0, 0);
  }
  if (!handshake_done_) {
    return result(SslEngineStatus::ok, 0, 0);
  }

  const std::size_t chunk = std::min(total_remaining(srcs), max_plaintext);
  if (chunk == 0) {
    return result(SslEngineStatus::ok, 0, 0);
  }
  if (dst.remaining() < chunk + max_record_overhead) {
    return result(SslEngineStatus::buffer_overflow, 0, 0);
  }
  if (sealer_ == nullptr && !sealing_refused_ &&
      (chunk == max_plaintext || wrapped_ >= seal_after)) {
    start_sealing();
  }
  if (sealer_ != nullptr) {
    if (answer_key_update()) {  // it goes before the data
      return result(SslEngineStatus::ok, 0, drain_output(dst));
    }
    if (!sealer_->seal(application_data_record, srcs, chunk, dst)) {
      fail(ec, make_error_code(SslErrc::engine_closed));
      return result(SslEngineStatus::closed, 0, 0);
    }
    exchanged_ = true;
    return result(SslEngineStatus::ok, chunk, chunk + detail::RecordSealer::overhead);
  }
  // One record from one source when it holds the whole chunk; otherwise gather first, since a
  // record per source would put a record header on every small buffer.
  const std::byte* data = nullptr;
  auto first =
      std::find_if(srcs.begin(), srcs.end(), [](const ByteBuffer& b) { return b.has_remaining(); });
  if (first->remaining() >= chunk) {
    data = first->bytes().data();
  } else {
    gather_.resize(chunk);
    std::size_t at = 0;
    for (auto it = first; at < chunk; ++it) {
      const auto bytes = it->bytes().first(std::min(it->remaining(), chunk - at));
      std::copy(bytes.begin(), bytes.end(), gather_.begin() + static_cast<std::ptrdiff_t>(at));
      at += bytes.size();
    }
    data = gather_.data();
  }
  ERR_clear_error();
  std::size_t written = 0;
  const std::size_t dst_before = dst.position();
  direct_ = &dst;  // the record fits: checked above
  const int wrote = SSL_write_ex(ssl_, data, chunk, &written);
  direct_ = nullptr;
  const std::size_t direct = dst.position() - dst_before;
  if (direct > 0) exchanged_ = true;
  if (wrote != 1) {
    fail(ec, detail::take_openssl_error(ssl_, make_error_code(SslErrc::engine_closed)));
    return result(SslEngineStatus::closed, 0, direct);
  }
  wrapped_ += written;
  std::size_t left = written;
  for (auto it = first; left > 0; ++it) {
    const std::size_t n = std::min(it->remaining(), left);
    it->position(it->position() + n);
    left -= n;
  }
  return result(SslEngineStatus::ok, written, direct + drain_output(dst));
}

SslEngineResult SslEngine::Impl::unwrap(ByteBuffer& src, std::span<ByteBuffer> dsts,
                                        std::error_code& ec) {
  ec.clear();
  if (failed_) {
    ec = make_error_code(SslErrc::engine_closed);
    return result(SslEngineStatus::closed, 0, 0);
  }
  if (inbound_done_) {
    return result(SslEngineStatus::closed, 0, 0);
  }
  started_ = true;
  const auto in = src.bytes();
  if (in.size() < record_header_size) {
    return result(SslEngineStatus::buffer_underflow, 0, 0);
  }
  const auto type = static_cast<std::uint8_t>(in[0]);
  const auto major = static_cast<std::uint8_t>(in[1]);
  const std::size_t length = static_cast<std::size_t>(in[3]) << 8 | static_cast<std::size_t>(in[4]);
  // Checked here rather than by OpenSSL so that "GET / HTTP/1.1" gets a clear error at once
  // instead of waiting for the 18 KiB its first bytes would announce.
  if (type < change_cipher_spec || type > heartbeat_record || major != 3) {
    fail(ec, make_error_code(SslErrc::not_ssl_record));
    return result(SslEngineStatus::closed, 0, 0);
  }
  if (length > max_ciphertext) {
    fail(ec, make_error_code(SslErrc::record_overflow));
    return result(SslEngineStatus::closed, 0, 0);
  }
  const std::size_t record = record_header_size + length;
  if (in.size() < record) {
    return result(SslEngineStatus::buffer_underflow, 0, 0);
  }
  // Once OpenSSL has a record it decrypts all of it: refuse before handing it over when the
  // plaintext might not fit, so that BUFFER_OVERFLOW loses nothing.
  if (handshake_done_ && total_remaining(dsts) < std::min(length, max_plaintext)) {
    return result(SslEngineStatus::buffer_overflow, 0, 0);
  }
  const bool renegotiation =
      handshake_done_ && type == handshake_record && SSL_version(ssl_) < TLS1_3_VERSION;
  if (BIO_write(network_in_, in.data(), static_cast<int>(record)) != static_cast<int>(record)) {
    throw std::bad_alloc();
  }
  src.position(src.position() + record);
  exchanged_ = true;

  if (!handshake_done_) {
    drive_handshake(ec);
    if (ec) {
      return result(SslEngineStatus::closed, record, 0);
    }
    if (!handshake_done_) {
      return result(SslEngineStatus::ok, record, 0);
    }
    // The record that finished the handshake may be followed by data in OpenSSL's buffer
    // only for TLS 1.3 post-handshake messages, which the next unwrap reads.
    return result(SslEngineStatus::ok, record, 0);
  }

  std::size_t produced = 0;
  for (ByteBuffer& dst : dsts) {
    while (dst.has_remaining()) {
      ERR_clear_error();
      std::size_t got = 0;
      auto room = dst.writable_bytes();
      if (SSL_read_ex(ssl_, room.data(), room.size(), &got) == 1) {
        dst.position(dst.position() + got);
        produced += got;
        continue;
      }
      const int err = SSL_get_error(ssl_, 0);
      if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
        goto record_done;
      }
      if (err == SSL_ERROR_ZERO_RETURN) {
        close_notify_received_ = true;
        inbound_done_ = true;
        if (!outbound_closed_) {
          outbound_closed_ = true;
          SSL_shutdown(ssl_);  // queues our close_notify for the next wrap
        }
        ERR_clear_error();
        return result(SslEngineStatus::closed, record, produced);
      }
      fail(ec, detail::take_openssl_error(ssl_, make_error_code(SslErrc::engine_closed)));
      return result(SslEngineStatus::closed, record, produced);
    }
  }
  // Every destination is full: a record still being decrypted would be lost, but the room
  // check above guarantees the record fitted.
record_done:
  answer_key_update();
  if (renegotiation) {
    // OpenSSL answered no_renegotiation (SSL_OP_NO_RENEGOTIATION); we also end the
    // connection, so a peer that insists cannot keep us busy.
    if (!outbound_closed_) {
      outbound_closed_ = true;
      SSL_shutdown(ssl_);
    }
    fail(ec, make_error_code(SslErrc::renegotiation_refused));
    return result(SslEngineStatus::closed, record, produced);
  }
  return result(SslEngineStatus::ok, record, produced);
}

void SslEngine::Impl::close_outbound() noexcept {
  if (outbound_closed_ || failed_) {
    return;
  }
  outbound_closed_ = true;
  if (handshake_done_) {
    ERR_clear_error();
    SSL_shutdown(ssl_);
    ERR_clear_error();
    return;
  }
  if (!started_ && !exchanged_) {
    return;  // no handshake began: there is nothing to cancel
  }
  // SSL_shutdown refuses to run mid-handshake, and OpenSSL has no other call that sends an
  // alert, so a peer would read only the end of the stream, which it cannot tell from a cut
  // connection.
  if (sent_protected_) {
    // Only OpenSSL holds the keys an alert needs now, and it uses them once the handshake is
    // done: that takes the peer's last flight, one it sends without waiting for us.
    close_after_handshake_ = true;
    return;
  }
  // Nothing of ours is encrypted yet, so the alerts are plaintext records, as OpenSSL's own
  // would be at this point. user_canceled goes first: a peer may take close_notify alone
  // mid-handshake for a protocol error (RFC 8446 6.1; Java's engine does).
  queue_plaintext_alert(SSL_AD_USER_CANCELLED);
  queue_plaintext_alert(SSL_AD_CLOSE_NOTIFY);
  // The handshake is abandoned: going on with it would send its messages after the alerts.
  inbound_done_ = true;
}

void SslEngine::Impl::queue_plaintext_alert(std::uint8_t description) noexcept {
  // TLS 1.3 and 1.2 records alike carry 0x0303 (RFC 8446 5.1), and niox offers no older one.
  const std::uint8_t record[] = {alert_record, 3, 3, 0, 2, SSL3_AL_WARNING, description};
  BIO_write(pending_out_, record, sizeof record);
}

bool SslEngine::Impl::is_outbound_done() const noexcept {
  return (outbound_closed_ || failed_) && !close_after_handshake_ && pending_output() == 0;
}

void SslEngine::Impl::close_inbound(std::error_code& ec) noexcept {
  ec.clear();
  if (inbound_done_) {
    return;
  }
  inbound_done_ = true;
  if (!close_notify_received_ && exchanged_ && !failed_) {
    ec = make_error_code(SslErrc::truncated);
  }
}

// ---- kTLS: the traffic keys ------------------------------------------------------------

namespace {

constexpr std::string_view client_traffic_secret_0 = "CLIENT_TRAFFIC_SECRET_0";
constexpr std::string_view server_traffic_secret_0 = "SERVER_TRAFFIC_SECRET_0";
constexpr unsigned char key_update_message = 24;  // SSL3_MT_KEY_UPDATE

int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

SslEngine::Impl::Traffic::~Traffic() { OPENSSL_cleanse(secret.data(), secret.size()); }

void SslEngine::Impl::on_keylog(const SSL* ssl, const char* line) {
  auto* self = static_cast<Impl*>(SSL_get_app_data(ssl));
  if (self == nullptr || line == nullptr) return;
  const std::string_view text(line);
  const std::size_t label_end = text.find(' ');
  const std::size_t secret_at = text.rfind(' ');
  if (label_end == std::string_view::npos || secret_at == label_end) return;
  const std::string_view label = text.substr(0, label_end);
  const bool client_secret = label == client_traffic_secret_0;
  if (!client_secret && label != server_traffic_secret_0) return;
  // The client's secret protects what the client sends.
  Traffic& t = client_secret == self->client_ ? self->outbound_ : self->inbound_;
  const std::string_view hex = text.substr(secret_at + 1);
  if (hex.size() % 2 != 0 || hex.size() / 2 > t.secret.size()) return;
  for (std::size_t i = 0; i < hex.size() / 2; ++i) {
    const int hi = hex_value(hex[2 * i]);
    const int lo = hex_value(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return;
    t.secret[i] = static_cast<unsigned char>(hi << 4 | lo);
  }
  t.secret_size = hex.size() / 2;
  // The new keys start at record 0; OpenSSL installs them right after this call.
  t.records = 0;
  t.known = true;
}

void SslEngine::Impl::on_message(int write_p, int, int content_type, const void* buf,
                                 std::size_t len, SSL* ssl, void* arg) {
  auto* self = static_cast<Impl*>(arg);
  if (write_p != 0 && self->sealer_ != nullptr) {
    // OpenSSL's record of this message is dropped (direct_write); ours replaces it.
    if (content_type == SSL3_RT_HANDSHAKE || content_type == SSL3_RT_ALERT) {
      self->reseal(static_cast<std::uint8_t>(content_type), buf, len);
    }
    return;
  }
  Traffic& t = write_p != 0 ? self->outbound_ : self->inbound_;
  if (content_type == SSL3_RT_HEADER && write_p != 0 && len > 0) {
    // TLS 1.3 hides every encrypted record behind application_data; TLS 1.2 encrypts from
    // its ChangeCipherSpec on (TLS 1.3 sends one too, for middleboxes, and keeps plaintext).
    const auto type = static_cast<const std::uint8_t*>(buf)[0];
    if (type == application_data_record ||
        (type == change_cipher_spec && SSL_version(ssl) < TLS1_3_VERSION)) {
      self->sent_protected_ = true;
    }
  }
  if (content_type == SSL3_RT_HEADER) {
    // Called once per record, after its header was written (encrypted) or read (before it is
    // decrypted, so the record that carries a key change still counts under the old keys).
    if (t.known) ++t.records;
  } else if (content_type == SSL3_RT_HANDSHAKE && len > 0 &&
             static_cast<const unsigned char*>(buf)[0] == key_update_message) {
    t.key_updated = true;
  }
}

std::string_view SslEngine::Impl::traffic_keys_refusal(TrafficDirection direction) const noexcept {
  const bool outbound = direction == TrafficDirection::outbound;
  const Traffic& t = outbound ? outbound_ : inbound_;
  if (failed_) return "the engine failed";
  if (!handshake_done_) return "the handshake has not finished";
  if (SSL_version(ssl_) != TLS1_3_VERSION) {
    return "TLS 1.2: only TLS 1.3 keys are exported, its records stay in user space";
  }
  if (!traffic_cipher()) return "the negotiated cipher has no kernel counterpart";
  if (!records_traffic_keys()) {
    return "this engine's context does not export traffic keys "
           "(SslContextBuilder::export_traffic_keys)";
  }
  if (!t.known) return "the traffic secret was not seen";
  if (t.key_updated) return "a key update changed the keys: the records stay in user space";
  if (outbound) {
    if (outbound_closed_) return "the outbound side is closed";
    if (pending_output() > 0) return "records the engine made are still waiting to be wrapped out";
  } else {
    if (inbound_done_) return "the inbound side is done";
    if (BIO_ctrl_pending(network_in_) > 0 || SSL_has_pending(ssl_) == 1) {
      return "received bytes are still buffered in the engine";
    }
  }
  return {};
}

std::optional<TrafficCipher> SslEngine::Impl::traffic_cipher() const noexcept {
  const SSL_CIPHER* cipher = SSL_get_current_cipher(ssl_);
  if (cipher == nullptr) return std::nullopt;
  switch (SSL_CIPHER_get_protocol_id(cipher)) {
    case 0x1301: return TrafficCipher::aes_128_gcm;
    case 0x1302: return TrafficCipher::aes_256_gcm;
    case 0x1303: return TrafficCipher::chacha20_poly1305;
    default: return std::nullopt;
  }
}

std::optional<TrafficKeys> SslEngine::Impl::export_traffic_keys(TrafficDirection direction) const {
  if (!traffic_keys_refusal(direction).empty()) return std::nullopt;
  const bool outbound = direction == TrafficDirection::outbound;
  if (outbound && sealer_ != nullptr) return sealer_->keys();
  const Traffic& t = outbound ? outbound_ : inbound_;
  return detail::derive_traffic_keys(SSL_CIPHER_get_handshake_digest(SSL_get_current_cipher(ssl_)),
                                     *traffic_cipher(), {t.secret.data(), t.secret_size},
                                     t.records);
}

void SslEngine::Impl::start_sealing() {
  if (outbound_closed_ || failed_ || pending_output() > 0 ||
      SSL_get_key_update_type(ssl_) != SSL_KEY_UPDATE_NONE) {
    return;  // not now: what OpenSSL has to send goes first, under its own numbers
  }
  const std::optional<TrafficCipher> cipher = traffic_cipher();
  const SSL_SESSION* session = SSL_get0_session(ssl_);
  if (SSL_version(ssl_) != TLS1_3_VERSION || !cipher || outbound_.key_updated ||
      session == nullptr ||
      SSL_SESSION_get_max_fragment_length(session) != TLSEXT_max_fragment_length_DISABLED) {
    // TLS 1.2, TLS_AES_128_CCM_SHA256, a secret we no longer know, or a peer that asked for
    // records under 16 KiB (RFC 6066's max_fragment_length): OpenSSL's records.
    sealing_refused_ = true;
    return;
  }
  if (!outbound_.known) {
    // Started without the key-log callback (see SslContext::Impl): this connection writes
    // through SSL_write, and tells the context it would have sealed.
    keys_wanted_ = true;
    sealing_refused_ = true;
    return;
  }
  sealer_ = detail::RecordSealer::make(
      SSL_CIPHER_get_handshake_digest(SSL_get_current_cipher(ssl_)), *cipher,
      {outbound_.secret.data(), outbound_.secret_size}, outbound_.records);
  sealing_refused_ = sealer_ == nullptr;
  if (sealer_ != nullptr) {
    // OpenSSL's write buffer held the handshake's last flight. It would go when a write of
    // OpenSSL's next emptied it (SSL_MODE_RELEASE_BUFFERS), and OpenSSL makes no more
    // application records: free it now, or every connection keeps 16 KiB it never uses. Only
    // buffers holding nothing are freed.
    SSL_free_buffers(ssl_);
  }
}

bool SslEngine::Impl::answer_key_update() noexcept {
  if (sealer_ == nullptr || outbound_closed_ || failed_ ||
      SSL_get_key_update_type(ssl_) == SSL_KEY_UPDATE_NONE) {
    return false;
  }
  // The peer asked for our KeyUpdate (RFC 8446 4.6.3). OpenSSL would send it with its next
  // SSL_write, which the sealer replaced; SSL_key_update puts the pending one into the state
  // machine, and SSL_do_handshake writes it, for on_message to seal.
  ERR_clear_error();
  if (SSL_key_update(ssl_, SSL_KEY_UPDATE_NOT_REQUESTED) != 1 || SSL_do_handshake(ssl_) != 1) {
    seal_failed_ = true;
  }
  ERR_clear_error();
  return pending_output() > 0;
}

void SslEngine::Impl::reseal(std::uint8_t type, const void* message, std::size_t len) noexcept {
  ByteBuffer src = ByteBuffer::wrap(std::span(static_cast<const std::byte*>(message), len));
  // An alert or a KeyUpdate; a record's worth is the most OpenSSL writes at once.
  std::array<std::byte, max_plaintext + detail::RecordSealer::overhead> record;
  while (src.has_remaining()) {
    ByteBuffer out = ByteBuffer::wrap(std::span<std::byte>(record));
    if (!sealer_->seal(type, {&src, 1}, std::min(src.remaining(), max_plaintext), out) ||
        BIO_write(pending_out_, record.data(), static_cast<int>(out.position())) !=
            static_cast<int>(out.position())) {
      seal_failed_ = true;
      return;
    }
  }
  // Ours goes under the old keys; the next record under the new ones (RFC 8446 4.6.3).
  if (type == handshake_record && len > 0 &&
      static_cast<const unsigned char*>(message)[0] == key_update_message &&
      !sealer_->update_keys()) {
    seal_failed_ = true;
  }
}

// ---- SslEngine ---------------------------------------------------------------------------

SslEngine::SslEngine(std::unique_ptr<Impl> impl) noexcept : impl_(std::move(impl)) {}
SslEngine::SslEngine(SslEngine&&) noexcept = default;
SslEngine& SslEngine::operator=(SslEngine&&) noexcept = default;
SslEngine::~SslEngine() = default;

bool SslEngine::is_client_mode() const noexcept { return impl_->client_; }
void SslEngine::begin_handshake() { impl_->begin_handshake(); }
HandshakeStatus SslEngine::handshake_status() const noexcept { return impl_->handshake_status(); }

SslEngineResult SslEngine::wrap(std::span<ByteBuffer> srcs, ByteBuffer& dst, std::error_code& ec) {
  return impl_->wrap(srcs, dst, ec);
}
SslEngineResult SslEngine::wrap(std::span<ByteBuffer> srcs, ByteBuffer& dst) {
  std::error_code ec;
  SslEngineResult r = impl_->wrap(srcs, dst, ec);
  throw_if(ec, "SslEngine::wrap");
  return r;
}
SslEngineResult SslEngine::wrap(ByteBuffer& src, ByteBuffer& dst, std::error_code& ec) {
  return impl_->wrap(std::span(&src, 1), dst, ec);
}
SslEngineResult SslEngine::wrap(ByteBuffer& src, ByteBuffer& dst) {
  return wrap(std::span(&src, 1), dst);
}

SslEngineResult SslEngine::unwrap(ByteBuffer& src, std::span<ByteBuffer> dsts,
                                  std::error_code& ec) {
  return impl_->unwrap(src, dsts, ec);
}
SslEngineResult SslEngine::unwrap(ByteBuffer& src, std::span<ByteBuffer> dsts) {
  std::error_code ec;
  SslEngineResult r = impl_->unwrap(src, dsts, ec);
  throw_if(ec, "SslEngine::unwrap");
  return r;
}
SslEngineResult SslEngine::unwrap(ByteBuffer& src, ByteBuffer& dst, std::error_code& ec) {
  return impl_->unwrap(src, std::span(&dst, 1), ec);
}
SslEngineResult SslEngine::unwrap(ByteBuffer& src, ByteBuffer& dst) {
  return unwrap(src, std::span(&dst, 1));
}

void SslEngine::close_outbound() noexcept { impl_->close_outbound(); }
bool SslEngine::is_outbound_done() const noexcept { return impl_->is_outbound_done(); }
void SslEngine::close_inbound(std::error_code& ec) noexcept { impl_->close_inbound(ec); }
void SslEngine::close_inbound() {
  std::error_code ec;
  impl_->close_inbound(ec);
  throw_if(ec, "SslEngine::close_inbound");
}
bool SslEngine::is_inbound_done() const noexcept { return impl_->is_inbound_done(); }

std::string SslEngine::protocol() const {
  return SSL_is_init_finished(impl_->ssl_) == 1 ? SSL_get_version(impl_->ssl_) : "";
}

std::string SslEngine::cipher_suite() const {
  const SSL_CIPHER* cipher = SSL_get_current_cipher(impl_->ssl_);
  return cipher != nullptr ? SSL_CIPHER_get_name(cipher) : "";
}

std::string SslEngine::application_protocol() const {
  const unsigned char* data = nullptr;
  unsigned int len = 0;
  SSL_get0_alpn_selected(impl_->ssl_, &data, &len);
  return data != nullptr ? std::string(reinterpret_cast<const char*>(data), len) : "";
}

std::string SslEngine::peer_subject() const {
  X509* peer = SSL_get0_peer_certificate(impl_->ssl_);
  if (peer == nullptr) {
    return "";
  }
  BIO* out = BIO_new(BIO_s_mem());
  if (out == nullptr) {
    throw std::bad_alloc();
  }
  X509_NAME_print_ex(out, X509_get_subject_name(peer), 0, XN_FLAG_RFC2253);
  char* text = nullptr;
  const long n = BIO_get_mem_data(out, &text);
  std::string subject(text, static_cast<std::size_t>(n));
  BIO_free(out);
  return subject;
}

std::string SslEngine::server_name() const {
  const char* name = SSL_get_servername(impl_->ssl_, TLSEXT_NAMETYPE_host_name);
  return name != nullptr ? name : "";
}

bool SslEngine::is_session_reused() const noexcept { return SSL_session_reused(impl_->ssl_) == 1; }

std::string_view SslEngine::traffic_keys_refusal(TrafficDirection direction) const noexcept {
  return impl_->traffic_keys_refusal(direction);
}

std::optional<TrafficKeys> SslEngine::export_traffic_keys(TrafficDirection direction) const {
  return impl_->export_traffic_keys(direction);
}

}  // namespace niox
