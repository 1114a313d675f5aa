// What a connection's transport state costs while idle: a promise's state takes the cache's
// 128-byte class, and a channel makes its close future's state only when someone asks for it
// (most never do). The outbound buffer's share (none once drained) is tested in
// allocation_test.cpp, beside its allocation count.
#include <niox/buffer/buffer_pool.hpp>
#include <niox/loop/event_loop.hpp>
#include <niox/transport/channel_future.hpp>
#include <niox/transport/loop_socket_channel.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include <sys/socket.h>

namespace niox {
namespace {

TEST(ConnectionMemory, APromiseStateTakesTheSmallClassOfTheBlockCache) {
  EXPECT_LE(BufferPool::class_size(sizeof(detail::PromiseState)), 128u);
}

std::shared_ptr<LoopSocketChannel> adopt_one(EventLoop& loop) {
  int fds[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds), 0);
  FileDescriptor peer(fds[1]);  // closed here: the channel sees end of stream, never read
  return LoopSocketChannel::adopt(loop, FileDescriptor(fds[0]), AF_UNIX);
}

void run_a_while(EventLoop& loop) {
  for (int i = 0; i < 20; ++i) loop.run_once(std::chrono::milliseconds(1));
}

// Before, every channel took a block for its close promise's state when it was made.
TEST(ConnectionMemory, AChannelTakesNoCloseStateUntilItsCloseFutureIsAskedFor) {
  EventLoop loop;
  auto cached = [] { return BufferPool::for_this_thread().stats().cached_bytes; };
  {
    auto warm = adopt_one(loop);  // fills the thread's cache with what a channel frees
    (void)warm->close_future();
    warm->close();
    run_a_while(loop);
  }
  run_a_while(loop);
  const std::size_t before = cached();
  auto ch = adopt_one(loop);
  EXPECT_EQ(cached(), before);
  ChannelFuture f = ch->close_future();
  EXPECT_LT(cached(), before);
  EXPECT_TRUE(f == ch->close_future());  // one state, made once
  ch->close();
  run_a_while(loop);
  EXPECT_TRUE(f.is_success());
}

TEST(ConnectionMemory, ACloseFutureAskedForAfterTheCloseIsComplete) {
  EventLoop loop;
  auto ch = adopt_one(loop);
  ch->close();
  run_a_while(loop);
  ChannelFuture f = ch->close_future();
  EXPECT_TRUE(f.is_success());
  bool heard = false;
  f.add_listener([&](const std::error_code& ec) { heard = !ec; });
  run_a_while(loop);
  EXPECT_TRUE(heard);
}

// Asked for on another thread while the loop closes the channel: either side may make the
// state first, and the future completes exactly once either way.
TEST(ConnectionMemory, ACloseFutureAskedForDuringTheCloseCompletes) {
  for (int round = 0; round < 50; ++round) {
    EventLoop loop;
    auto ch = adopt_one(loop);
    ChannelFuture f;
    std::thread asker([&] { f = ch->close_future(); });
    ch->close();
    asker.join();
    run_a_while(loop);
    ASSERT_TRUE(f.is_success()) << "round " << round;
  }
}

}  // namespace
}  // namespace niox
