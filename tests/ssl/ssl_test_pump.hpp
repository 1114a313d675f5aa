// Two SslEngines talking through memory: what each wraps goes into the other's inbound bytes.
#pragma once

#include <niox/ssl/ssl_engine.hpp>

#include <gtest/gtest.h>

#include <random>

#include <string>
#include <system_error>
#include <vector>

namespace niox::test {

// n bytes of a seeded pseudo-random pattern.
inline std::string pattern(std::size_t n, unsigned seed) {
  std::string s(n, '\0');
  std::mt19937 rng(seed);
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

// One direction of the wire: bytes wrapped by one side, waiting to be unwrapped by the other.
class Wire {
 public:
  ByteBuffer& out() { return bytes_; }
  bool empty() const { return bytes_.position() == 0; }

  // Unwraps every whole record into `app` (which grows as needed), checking that positions move
  // by exactly what the results say. Stops at the first error, underflow or CLOSED.
  std::error_code deliver(SslEngine& engine, std::string& app) {
    bytes_.flip();
    std::error_code ec;
    while (bytes_.has_remaining()) {
      auto dst = ByteBuffer::allocate(SslEngine::application_buffer_size());
      const std::size_t src_before = bytes_.position();
      SslEngineResult r = engine.unwrap(bytes_, dst, ec);
      EXPECT_EQ(bytes_.position() - src_before, r.bytes_consumed) << fmt::format("{}", r);
      EXPECT_EQ(dst.position(), r.bytes_produced) << fmt::format("{}", r);
      results.push_back(r);
      app.append(reinterpret_cast<const char*>(dst.array_view().data()), dst.position());
      if (ec || r.status != SslEngineStatus::ok) {
        break;
      }
    }
    bytes_.compact();
    return ec;
  }

  std::vector<SslEngineResult> results;

 private:
  ByteBuffer bytes_ = ByteBuffer::allocate(8 << 20);
};

// Wraps until the engine has nothing more to send (handshake bytes, alerts, close_notify).
inline std::error_code flush(SslEngine& engine, Wire& wire,
                             std::vector<SslEngineResult>* results = nullptr) {
  std::error_code ec;
  for (int i = 0; i < 100; ++i) {
    ByteBuffer none;
    std::error_code step;
    const std::size_t before = wire.out().position();
    SslEngineResult r = engine.wrap(none, wire.out(), step);
    EXPECT_EQ(wire.out().position() - before, r.bytes_produced);
    EXPECT_EQ(r.bytes_consumed, 0u);
    if (results != nullptr) {
      results->push_back(r);
    }
    if (step && !ec) {
      ec = step;
    }
    if (r.bytes_produced == 0) {
      break;
    }
  }
  return ec;
}

struct HandshakeOutcome {
  std::error_code client;
  std::error_code server;
  bool client_finished = false;
  bool server_finished = false;
  bool ok() const { return !client && !server; }
};

struct EnginePair {
  SslEngine client;
  SslEngine server;
  Wire to_server;
  Wire to_client;
  std::string server_received;
  std::string client_received;

  // Runs both sides until neither has anything to send; the first error of each side is kept.
  HandshakeOutcome handshake() {
    HandshakeOutcome o;
    std::vector<SslEngineResult> seen;
    for (int round = 0; round < 20; ++round) {
      seen.clear();
      auto ce = flush(client, to_server, &seen);
      for (const auto& r : seen) {
        o.client_finished |= r.handshake_status == HandshakeStatus::finished;
      }
      if (ce && !o.client) o.client = ce;
      if (!o.server) {
        if (auto se = to_server.deliver(server, server_received)) o.server = se;
      }
      seen.clear();
      auto se = flush(server, to_client, &seen);
      for (const auto& r : seen) {
        o.server_finished |= r.handshake_status == HandshakeStatus::finished;
      }
      if (se && !o.server) o.server = se;
      if (!o.client) {
        if (auto e = to_client.deliver(client, client_received)) o.client = e;
      }
      for (const auto& r : to_server.results) {
        o.server_finished |= r.handshake_status == HandshakeStatus::finished;
      }
      for (const auto& r : to_client.results) {
        o.client_finished |= r.handshake_status == HandshakeStatus::finished;
      }
      if (to_server.empty() && to_client.empty() &&
          client.handshake_status() == HandshakeStatus::not_handshaking &&
          server.handshake_status() == HandshakeStatus::not_handshaking) {
        break;
      }
    }
    return o;
  }
};

}  // namespace niox::test
