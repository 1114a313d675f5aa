// Test helpers for channel tests: descriptor counting, loopback socket pairs, temporary
// directories, fast pseudo-random content and a checksum.
#pragma once

#include <niox/channels/server_socket_channel.hpp>
#include <niox/channels/socket_channel.hpp>

#include "open_fds.hpp"
#include "temp_dir.hpp"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <span>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <dirent.h>
#include <sys/socket.h>

namespace niox::test {

// Fails the test when a test case leaves descriptors behind.
class FdLeakCheck : public ::testing::Test {
 protected:
  void SetUp() override { fds_before_ = open_fd_count(); }
  void TearDown() override { EXPECT_EQ(open_fd_count(), fds_before_) << "descriptor leak"; }

 private:
  int fds_before_ = 0;
};

struct SocketPair {
  SocketChannel client;
  SocketChannel server;
};

inline SocketAddress loopback(ProtocolFamily family) {
  return family == ProtocolFamily::inet6 ? SocketAddress(InetSocketAddress::loopback_v6(0))
                                         : SocketAddress(InetSocketAddress::loopback_v4(0));
}

// A connected TCP pair over loopback (both blocking).
inline SocketPair tcp_pair(ProtocolFamily family = ProtocolFamily::inet) {
  auto listener = ServerSocketChannel::open(family);
  listener.bind(loopback(family), 4);
  auto client = SocketChannel::open(*listener.local_address());
  auto server = listener.accept();
  return {std::move(client), std::move(*server)};
}

inline bool ipv6_loopback_available() {
  try {
    auto listener = ServerSocketChannel::open(ProtocolFamily::inet6);
    listener.bind(InetSocketAddress::loopback_v6(0));
    return true;
  } catch (const std::system_error&) {
    return false;
  }
}

// xorshift64*: fast, reproducible bytes.
class Xorshift {
 public:
  explicit Xorshift(std::uint64_t seed) : s_(seed != 0 ? seed : 0x9E3779B97F4A7C15ull) {}
  std::uint64_t next() {
    s_ ^= s_ >> 12;
    s_ ^= s_ << 25;
    s_ ^= s_ >> 27;
    return s_ * 0x2545F4914F6CDD1Dull;
  }
  std::size_t below(std::size_t n) { return static_cast<std::size_t>(next() % n); }
  void fill(std::span<std::byte> out) {
    std::size_t i = 0;
    for (; i + 8 <= out.size(); i += 8) {
      std::uint64_t v = next();
      std::memcpy(out.data() + i, &v, 8);
    }
    if (i < out.size()) {
      std::uint64_t v = next();
      std::memcpy(out.data() + i, &v, out.size() - i);
    }
  }

 private:
  std::uint64_t s_;
};

// An order-sensitive 64-bit checksum (FNV-1a style over 8-byte words), independent of how the
// stream is split into update() calls.
class Checksum {
 public:
  void update(std::span<const std::byte> data) {
    std::size_t i = 0;
    while (carry_len_ > 0 && carry_len_ < 8 && i < data.size()) {
      carry_[carry_len_++] = data[i++];
    }
    if (carry_len_ == 8) {
      mix(carry_);
      carry_len_ = 0;
    }
    for (; i + 8 <= data.size(); i += 8) {
      mix(data.data() + i);
    }
    for (; i < data.size(); ++i) {
      carry_[carry_len_++] = data[i];
    }
    bytes_ += data.size();
  }
  std::uint64_t value() const {
    std::uint64_t h = h_;
    for (std::size_t i = 0; i < carry_len_; ++i) {
      h = (h ^ static_cast<std::uint8_t>(carry_[i])) * 0x100000001B3ull;
    }
    return h ^ bytes_;
  }
  std::uint64_t bytes() const { return bytes_; }

 private:
  void mix(const std::byte* p) {
    std::uint64_t w;
    std::memcpy(&w, p, 8);
    h_ = (h_ ^ w) * 0x100000001B3ull;
    h_ ^= h_ >> 29;
  }
  std::uint64_t h_ = 0xCBF29CE484222325ull;
  std::uint64_t bytes_ = 0;
  std::byte carry_[8] = {};
  std::size_t carry_len_ = 0;
};

inline std::vector<std::byte> random_bytes(std::size_t n, std::uint64_t seed) {
  std::vector<std::byte> v(n);
  Xorshift(seed).fill(v);
  return v;
}

inline std::span<const std::byte> as_bytes(std::string_view s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

// Built with AddressSanitizer: big-data tests scale down so the suite still finishes quickly.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool sanitized_build = true;
#else
inline constexpr bool sanitized_build = false;
#endif

}  // namespace niox::test
