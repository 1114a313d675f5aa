// channel_option::write_zero_copy_threshold on every backend: flushes at or above the threshold
// go out zero-copy on io_uring (LoopCounters::zero_copy_sends), those below it and every flush
// without the option plainly, and the peer gets every byte either way.
#include <niox/transport/bootstrap.hpp>
#include <niox/transport/channel_option.hpp>

#include "../support/transport_sockets.hpp"

#include <gtest/gtest.h>

#include <future>
#include <optional>

using namespace niox;
using namespace niox::test;

namespace {

class ZeroCopyWriteTest : public DescriptorCheckedTest {
 protected:
  bool zero_copy_expected() const {
    return GetParam().kind == BackendKind::io_uring && !GetParam().io_uring_readiness_only;
  }
};

ByteBuffer buffer_of(const std::vector<std::byte>& bytes) {
  ByteBuffer b = ByteBuffer::allocate(bytes.size());
  b.put(std::span<const std::byte>(bytes));
  b.flip();
  return b;
}

// On connection: a 4 KiB message, then (once it was written) a 2 MiB one, each flushed alone.
class SendTwo final : public ChannelHandler {
 public:
  std::vector<std::byte> small = pseudo_random_bytes(4 << 10, 1);
  std::vector<std::byte> large = pseudo_random_bytes(2 << 20, 2);
  std::promise<std::error_code> written;

  void channel_active(ChannelHandlerContext& ctx) override {
    std::shared_ptr<Channel> ch = ctx.channel().shared_from_this();
    ch->write_and_flush(buffer_of(small)).add_listener([this, ch](const std::error_code& ec) {
      if (ec) return written.set_value(ec);
      ch->write_and_flush(buffer_of(large)).add_listener([this](const std::error_code& ec2) {
        written.set_value(ec2);
      });
    });
    ctx.fire_channel_active();
  }
};

// The zero-copy sends the server's loop made for the two messages.
std::uint64_t zero_copy_sends_for(const EventLoop::Options& options,
                                  std::optional<std::size_t> threshold) {
  TestServer server(options, 1);
  auto handler = std::make_shared<SendTwo>();
  server.bootstrap().child_handler(handler);
  if (threshold)
    server.bootstrap().child_option(channel_option::write_zero_copy_threshold, *threshold);
  SocketAddress addr = server.start(InetSocketAddress::loopback_v4(0));
  EventLoop& loop = server.workers().loop(0);
  const std::uint64_t before = loop.counters().zero_copy_sends;

  PeerSocket client(addr);
  std::vector<std::byte> want = handler->small;
  want.insert(want.end(), handler->large.begin(), handler->large.end());
  EXPECT_TRUE(client.recv_exact(want.size()) == want) << "bytes differ";
  auto f = handler->written.get_future();
  EXPECT_FALSE(wait_for(f));
  return loop.counters().zero_copy_sends - before;
}

TEST_P(ZeroCopyWriteTest, OffByDefault) { EXPECT_EQ(zero_copy_sends_for(options(), {}), 0u); }

TEST_P(ZeroCopyWriteTest, AFlushAtTheThresholdGoesZeroCopyAndASmallerOneDoesNot) {
  // 64 KiB: only the 2 MiB message reaches it.
  const std::uint64_t sends = zero_copy_sends_for(options(), 64 << 10);
  if (zero_copy_expected()) {
    EXPECT_GE(sends, 1u);
  } else {
    EXPECT_EQ(sends, 0u);
  }
}

TEST_P(ZeroCopyWriteTest, FlushesBelowTheThresholdArePlain) {
  EXPECT_EQ(zero_copy_sends_for(options(), 4 << 20), 0u);
}

NIOX_INSTANTIATE_BACKENDS(ZeroCopyWriteTest);

}  // namespace
