#include "kernel_tls.hpp"

#include <niox/base/log.hpp>

#include <atomic>
#include <cerrno>
#include <cstring>

#include <linux/tls.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>

#ifndef SOL_TLS
#define SOL_TLS 282
#endif
#ifndef TCP_ULP
#define TCP_ULP 31
#endif

namespace niox::detail {
namespace {

std::error_code last_error() noexcept { return {errno, std::system_category()}; }

template <class Info>
std::error_code set_keys(int fd, int option, Info& info) noexcept {
  const int r = ::setsockopt(fd, SOL_TLS, option, &info, sizeof info);
  const std::error_code ec = r == 0 ? std::error_code() : last_error();
  ::explicit_bzero(&info, sizeof info);
  return ec;
}

template <class Info>
void fill_gcm(Info& info, const TrafficKeys& keys, unsigned short cipher_type) noexcept {
  info.info.version = TLS_1_3_VERSION;
  info.info.cipher_type = cipher_type;
  std::memcpy(info.key, keys.key_bytes.data(), sizeof info.key);
  // RFC 8446's 12-byte IV is the kernel's 4-byte salt followed by its 8-byte iv.
  std::memcpy(info.salt, keys.iv.data(), sizeof info.salt);
  std::memcpy(info.iv, keys.iv.data() + sizeof info.salt, sizeof info.iv);
  const auto seq = keys.sequence_bytes();
  std::memcpy(info.rec_seq, seq.data(), sizeof info.rec_seq);
}

}  // namespace

std::error_code install_kernel_tls(int fd, TrafficDirection direction,
                                   const TrafficKeys& keys) noexcept {
  static constexpr char ulp[] = "tls";
  if (::setsockopt(fd, SOL_TCP, TCP_ULP, ulp, sizeof ulp) != 0 && errno != EEXIST) {
    return last_error();
  }
  const int option = direction == TrafficDirection::outbound ? TLS_TX : TLS_RX;
  switch (keys.cipher) {
    case TrafficCipher::aes_128_gcm: {
      tls12_crypto_info_aes_gcm_128 info{};
      fill_gcm(info, keys, TLS_CIPHER_AES_GCM_128);
      return set_keys(fd, option, info);
    }
    case TrafficCipher::aes_256_gcm: {
      tls12_crypto_info_aes_gcm_256 info{};
      fill_gcm(info, keys, TLS_CIPHER_AES_GCM_256);
      return set_keys(fd, option, info);
    }
    case TrafficCipher::chacha20_poly1305: {
      tls12_crypto_info_chacha20_poly1305 info{};
      info.info.version = TLS_1_3_VERSION;
      info.info.cipher_type = TLS_CIPHER_CHACHA20_POLY1305;
      std::memcpy(info.key, keys.key_bytes.data(), sizeof info.key);
      std::memcpy(info.iv, keys.iv.data(), sizeof info.iv);
      const auto seq = keys.sequence_bytes();
      std::memcpy(info.rec_seq, seq.data(), sizeof info.rec_seq);
      return set_keys(fd, option, info);
    }
  }
  return std::make_error_code(std::errc::invalid_argument);
}

std::error_code send_kernel_tls_record(int fd, std::uint8_t type,
                                       std::span<const std::byte> payload) noexcept {
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(std::uint8_t))] = {};
  iovec iov{const_cast<std::byte*>(payload.data()), payload.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_TLS;
  c->cmsg_type = TLS_SET_RECORD_TYPE;
  c->cmsg_len = CMSG_LEN(sizeof type);
  std::memcpy(CMSG_DATA(c), &type, sizeof type);
  for (;;) {
    const ssize_t n = ::sendmsg(fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n >= 0) {
      return static_cast<std::size_t>(n) == payload.size()
                 ? std::error_code()
                 : std::make_error_code(std::errc::message_size);
    }
    if (errno != EINTR) return last_error();
  }
}

long receive_kernel_tls_record(int fd, std::span<std::byte> room, std::uint8_t& type,
                               std::error_code& ec) noexcept {
  ec.clear();
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(std::uint8_t))] = {};
  iovec iov{room.data(), room.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  for (;;) {
    const ssize_t n = ::recvmsg(fd, &msg, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ec = last_error();
      return -1;
    }
    type = tls_application_data_record;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level == SOL_TLS && c->cmsg_type == TLS_GET_RECORD_TYPE) {
        std::memcpy(&type, CMSG_DATA(c), sizeof type);
      }
    }
    return static_cast<long>(n);
  }
}

bool only_session_tickets(std::span<const std::byte> record) noexcept {
  constexpr std::uint8_t new_session_ticket_message = 4;
  while (!record.empty()) {
    if (record.size() < 4 || static_cast<std::uint8_t>(record[0]) != new_session_ticket_message) {
      return false;
    }
    const std::size_t length = static_cast<std::size_t>(record[1]) << 16 |
                               static_cast<std::size_t>(record[2]) << 8 |
                               static_cast<std::size_t>(record[3]);
    if (record.size() < 4 + length) return false;
    record = record.subspan(4 + length);
  }
  return true;
}

void log_kernel_tls_fallback(std::string_view why) noexcept {
  static std::atomic<bool> logged{false};
  const bool first = !logged.exchange(true, std::memory_order_relaxed);
  log(first ? LogLevel::warn : LogLevel::debug, "TLS records: user_space for a connection: {}",
      why);
}

}  // namespace niox::detail
