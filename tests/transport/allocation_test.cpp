// Steady state allocates nothing per message: once a connection is warm, an echo through the
// pipeline (receive buffer, channel_read, write with the void promise, flush, the gathering
// write and its completion) performs no heap allocation on the loop thread. Nor does a write
// with a real promise and a listener that holds its channel: the promise state comes from a
// per-thread cache, the listener is stored in it, and the task that runs it is queued inline.
//
// Counted: operator new everywhere, and malloc/calloc/realloc too where no sanitizer replaces
// the allocator (receive buffers come from malloc-family calls, not operator new).
#include <niox/buffer/buffer_pool.hpp>
#include <niox/loop/event_loop.hpp>
#include <niox/transport/channel_handler.hpp>
#include <niox/transport/channel_pipeline.hpp>
#include <niox/transport/embedded_channel.hpp>
#include <niox/transport/loop_socket_channel.hpp>
#include <niox/transport/outbound_buffer.hpp>

#include "support/backends.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string_view>

#include <sys/socket.h>
#include <unistd.h>

namespace {
thread_local bool counting = false;
thread_local std::size_t allocations = 0;
}  // namespace

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define NIOX_COUNT_MALLOC 0
#else
#define NIOX_COUNT_MALLOC 1
#endif

#if NIOX_COUNT_MALLOC
// glibc's own entry points: the replacements below count, then forward.
extern "C" void* __libc_malloc(std::size_t);
extern "C" void* __libc_calloc(std::size_t, std::size_t);
extern "C" void* __libc_realloc(void*, std::size_t);
extern "C" void* malloc(std::size_t n) noexcept {
  if (counting) ++allocations;
  return __libc_malloc(n);
}
extern "C" void* calloc(std::size_t n, std::size_t m) noexcept {
  if (counting) ++allocations;
  return __libc_calloc(n, m);
}
extern "C" void* realloc(void* p, std::size_t n) noexcept {
  if (counting) ++allocations;
  return __libc_realloc(p, n);
}
#else
// Counting replacements of operator new (this test binary only); they forward to malloc/free.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(std::size_t n) {
  if (counting) ++allocations;
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#endif

namespace niox {
namespace {

enum class Mode { write_then_flush, write_and_flush, promise_with_listener };

// Echoes each read: write (void promise) + flush on read complete, write_and_flush (void
// promise), or write with a fresh promise and a listener + flush on read complete.
class Echo final : public ChannelHandler {
 public:
  explicit Echo(Mode mode) : mode_(mode) {}
  void channel_read(ChannelHandlerContext& ctx, Message&& msg) override {
    switch (mode_) {
      case Mode::write_and_flush: ctx.write_and_flush(std::move(msg), ChannelPromise()); break;
      case Mode::write_then_flush: ctx.write(std::move(msg), ChannelPromise()); break;
      case Mode::promise_with_listener: {
        ++writes;
        auto p = ctx.new_promise();
        // What a listener usually holds: its handler, the channel, and the context.
        p.add_listener(
            [this, ch = ctx.channel().shared_from_this(), at = &ctx](const std::error_code& ec) {
              if (!ec && ch && at) ++written;
            });
        ctx.write(std::move(msg), std::move(p));
        break;
      }
    }
  }
  void channel_read_complete(ChannelHandlerContext& ctx) override {
    if (mode_ != Mode::write_and_flush) ctx.flush();
  }
  int writes = 0;
  int written = 0;

 private:
  Mode mode_;
};

class PipelineAllocationTest
    : public ::testing::TestWithParam<std::tuple<test::BackendVariant, Mode>> {
 protected:
  void SetUp() override {
    if (auto why = test::backend_skip_reason(std::get<0>(GetParam()).kind)) GTEST_SKIP() << *why;
  }
  EventLoop::Options options() const {
    EventLoop::Options o;
    o.backend = std::get<0>(GetParam()).kind;
    o.io_uring_readiness_only = std::get<0>(GetParam()).io_uring_readiness_only;
    o.multishot_receive = std::get<0>(GetParam()).multishot_receive;
    return o;
  }
};

// Sends one 128-byte message from the peer and turns the loop until it came back whole.
bool round_trip(EventLoop& loop, int peer, int round) {
  std::array<std::byte, 128> out{}, in{};
  std::memset(out.data(), round & 0xff, out.size());
  std::memcpy(out.data(), &round, sizeof round);
  std::size_t sent = 0;
  while (sent < out.size()) {
    ssize_t n = ::send(peer, out.data() + sent, out.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
    } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
      return false;
    } else {
      loop.run_once(std::chrono::milliseconds(1));
    }
  }
  std::size_t got = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (got < in.size()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    loop.run_once(std::chrono::milliseconds(1));
    ssize_t k = ::recv(peer, in.data() + got, in.size() - got, MSG_DONTWAIT);
    if (k == 0) return false;
    if (k > 0) got += static_cast<std::size_t>(k);
    if (k < 0 && errno != EAGAIN && errno != EINTR) return false;
  }
  return std::memcmp(in.data(), out.data(), in.size()) == 0;
}

// A drained OutboundBuffer keeps nothing, and its gathering iovecs are the thread's: on a warm
// thread, a new connection's writes allocate nothing (before, each buffer's first write
// allocated its entry ring and a 16 KiB iovec array, and kept both).
void write_through(OutboundBuffer& out, ByteBuffer b) {
  const std::size_t n = b.remaining();
  out.add_message(std::move(b), {});
  out.add_flush();
  GatherWrite g = out.gather();
  ASSERT_EQ(g.bytes, n);
  out.remove_bytes(n);
  ASSERT_TRUE(out.is_empty());
}

TEST(OutboundBufferMemory, ADrainedBufferKeepsNothingSoTheNextConnectionAllocatesNothing) {
  {
    OutboundBuffer warm;  // the thread's first connection fills its caches
    write_through(warm, ByteBuffer::wrap(std::string_view("first")));
  }
  OutboundBuffer next;
  auto one = ByteBuffer::wrap(std::string_view("second"));
  auto two = ByteBuffer::wrap(std::string_view("third"));
  allocations = 0;
  counting = true;
  write_through(next, one);
  write_through(next, two);
  counting = false;
  EXPECT_EQ(allocations, 0u);
}

// The ring's block goes back to the thread's cache when the last entry completes, not when the
// buffer is destroyed: an idle connection keeps none.
TEST(OutboundBufferMemory, TheLastCompletedEntryGivesTheEntryRingBack) {
  auto cached = [] { return BufferPool::for_this_thread().stats().cached_bytes; };
  {
    OutboundBuffer warm;
    write_through(warm, ByteBuffer::wrap(std::string_view("first")));
  }
  OutboundBuffer out;
  out.add_message(ByteBuffer::wrap(std::string_view("queued")), {});
  out.add_flush();
  const std::size_t while_queued = cached();
  GatherWrite g = out.gather();
  out.remove_bytes(g.bytes);
  ASSERT_TRUE(out.is_empty());
  EXPECT_GT(cached(), while_queued);
}

// A handler removed while no handler of the pipeline runs (a channel's teardown removes every
// one) has its context freed at once: nothing is allocated to keep it until later.
TEST(PipelineMemory, RemovingHandlersOutsideAnEventAllocatesNothing) {
  EmbeddedChannel ch;
  ch.pipeline().add_last("a", std::make_shared<ChannelHandler>());
  ch.pipeline().add_last("b", std::make_shared<ChannelHandler>());
  allocations = 0;
  counting = true;
  auto a = ch.pipeline().remove("a");
  auto b = ch.pipeline().remove("b");
  counting = false;
  EXPECT_EQ(allocations, 0u);
  EXPECT_TRUE(a && b);
}

// What a server channel reads, once per accepted connection, is a message of its own kind: it
// goes through the server's pipeline without an allocation (std::any would make one for it).
TEST(PipelineMemory, AnAcceptedChannelTravelsAsAMessageWithoutAllocating) {
  auto none = std::shared_ptr<LoopSocketChannel>();
  allocations = 0;
  counting = true;
  Message m(std::move(none));
  Message moved(std::move(m));
  counting = false;
  EXPECT_EQ(allocations, 0u);
  EXPECT_NE(moved.get_if<std::shared_ptr<LoopSocketChannel>>(), nullptr);
  EXPECT_EQ(moved.get_if<std::shared_ptr<Channel>>(), nullptr);
  EXPECT_FALSE(moved.empty());
}

// A handler that removes itself inside an event (what every ChannelInitializer does, once per
// connection) has its context kept until the event returns: the one context is held as it is,
// with nothing allocated for it.
TEST(PipelineMemory, AHandlerRemovingItselfInsideAnEventAllocatesNothingToBeFreedLater) {
  struct RemovesItself : ChannelInboundHandlerAdapter {
    std::size_t allocated = 0;
    void channel_read(ChannelHandlerContext& ctx, Message&& msg) override {
      allocations = 0;
      counting = true;
      ctx.pipeline().remove(*this);
      counting = false;
      allocated = allocations;
      ctx.fire_channel_read(std::move(msg));
    }
  };
  EmbeddedChannel ch;
  auto h = std::make_shared<RemovesItself>();
  ch.pipeline().add_last("once", h);
  ch.write_inbound(std::string("x"));
  EXPECT_EQ(h->allocated, 0u);
  EXPECT_EQ(h.use_count(), 1) << "its context is freed once the event returned";
}

TEST_P(PipelineAllocationTest, SteadyStateEchoAllocatesNothingPerMessage) {
  EventLoop loop(options());
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds), 0);
  FileDescriptor peer_fd(fds[1]);  // never used with the loop
  const int peer = peer_fd.get();
  {
    auto ch = LoopSocketChannel::adopt(loop, FileDescriptor(fds[0]), AF_UNIX);
    // The counters see what the code under test allocates.
    allocations = 0;
    counting = true;
    auto echo = std::make_shared<Echo>(std::get<1>(GetParam()));
#if NIOX_COUNT_MALLOC
    auto probe = ByteBuffer::allocate(64);  // calloc inside the library
#endif
    counting = false;
    ASSERT_GT(allocations, 0u) << "the counting allocator is not in use";
    Echo& handler = *echo;
    ch->pipeline().add_last("echo", std::move(echo));
    ch->start_accepted();
    // Warm up: pools, the receive size guess, the outbound queue and the loop's operations.
    for (int i = 0; i < 200; ++i) ASSERT_TRUE(round_trip(loop, peer, i));

    constexpr int rounds = 500;
    int writes_before = handler.writes;
    allocations = 0;
    counting = true;
    bool ok = true;
    for (int i = 0; i < rounds && ok; ++i) ok = round_trip(loop, peer, 1000 + i);
    counting = false;
    ASSERT_TRUE(ok);
    EXPECT_EQ(allocations, 0u) << "heap allocations in " << rounds << " echoed messages";
    if (std::get<1>(GetParam()) == Mode::promise_with_listener) {
      EXPECT_GT(handler.writes, writes_before);
      // Every write's listener ran (the last one may still be queued on the loop).
      for (int i = 0; i < 10 && handler.written < handler.writes; ++i) {
        loop.run_once(std::chrono::milliseconds(1));
      }
      EXPECT_GE(handler.writes, 200 + rounds);
      EXPECT_EQ(handler.written, handler.writes);
    }

    ch->close();
    for (int i = 0; i < 10; ++i) loop.run_once(std::chrono::milliseconds(1));
  }
  loop.shutdown();
}

std::string case_name(
    const ::testing::TestParamInfo<std::tuple<test::BackendVariant, Mode>>& info) {
  const char* mode = std::get<1>(info.param) == Mode::write_and_flush    ? "_write_and_flush"
                     : std::get<1>(info.param) == Mode::write_then_flush ? "_write_then_flush"
                                                                         : "_promise_with_listener";
  return std::string(std::get<0>(info.param).name) + mode;
}

INSTANTIATE_TEST_SUITE_P(Backends, PipelineAllocationTest,
                         ::testing::Combine(::testing::ValuesIn(test::all_backends()),
                                            ::testing::Values(Mode::write_then_flush,
                                                              Mode::write_and_flush,
                                                              Mode::promise_with_listener)),
                         case_name);

}  // namespace
}  // namespace niox
