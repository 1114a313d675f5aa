// What the reliability tests share around the fault-injection shim: which backends it sees,
// a fixture that disarms it, and a datagram receiver for the UDP cases.
#pragma once

#include <niox/loop/event_loop.hpp>

#include "../support/backends.hpp"
#include "../support/fault_injection.hpp"
#include "../support/transport_sockets.hpp"

#include <gtest/gtest.h>

#include <array>
#include <span>
#include <string>

namespace niox::test {

// Whether the loop's I/O on this variant goes through libc (and so through the shim).
inline bool shim_sees_loop(const BackendVariant& v) {
  return v.kind == BackendKind::epoll || v.io_uring_readiness_only;
}

// Every rule is disarmed after each test, before the descriptor check.
class DisarmingTest : public DescriptorCheckedTest {
 protected:
  void TearDown() override {
    fault::disarm_all();
    DescriptorCheckedTest::TearDown();
  }
};

// The text of one datagram received through the loop; empty until it has arrived.
class DatagramText {
 public:
  void receive(EventLoop& loop, int fd) {
    loop.recvmsg(fd, in_,
                 [this](std::error_code ec, std::size_t n, std::span<ByteBuffer> bufs,
                        const SocketAddress&, int) {
                   EXPECT_FALSE(ec);
                   bufs[0].flip();
                   text_.assign(reinterpret_cast<const char*>(bufs[0].bytes().data()), n);
                 });
  }
  const std::string& text() const { return text_; }

 private:
  std::array<ByteBuffer, 1> in_{ByteBuffer::allocate(64)};
  std::string text_;
};

}  // namespace niox::test
