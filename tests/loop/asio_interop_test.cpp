// <niox/asio.hpp>: ByteBuffers as Asio buffer sequences. Built only where Asio is installed.
#if __has_include(<asio.hpp>)
#include <niox/asio.hpp>
#include <niox/loop/event_loop.hpp>

#include "support/loop_sockets.hpp"

#include <asio.hpp>
#include <gtest/gtest.h>

#include <array>
#include <string>

namespace niox {
namespace {

using test::buffer_with;

static_assert(asio::is_const_buffer_sequence<AsioBufferSequence<false>>::value);
static_assert(asio::is_mutable_buffer_sequence<AsioBufferSequence<true>>::value);
static_assert(asio::is_const_buffer_sequence<AsioBufferSequence<true>>::value);

TEST(AsioInterop, SequencesViewRemainingBytes) {
  std::array<ByteBuffer, 3> bufs{buffer_with("abc"), ByteBuffer::allocate(0), buffer_with("defgh")};
  bufs[2].position(2);
  auto seq = asio_const_buffers(bufs);
  EXPECT_EQ(asio::buffer_size(seq), 6u);
  std::string flat(6, '\0');
  EXPECT_EQ(asio::buffer_copy(asio::buffer(flat), seq), 6u);
  EXPECT_EQ(flat, "abcfgh");
}

TEST(AsioInterop, GatherWriteAndScatterReadThroughAsioThenAdvance) {
  asio::io_context io;
  auto [a, b] = test::loop_socket_pair();
  asio::posix::stream_descriptor wa(io, a.release()), rb(io, b.release());
  std::array<ByteBuffer, 3> out{buffer_with("hello "), buffer_with("asio "), buffer_with("world")};
  std::size_t written = 0;
  asio::async_write(wa, asio_const_buffers(out), [&](std::error_code ec, std::size_t n) {
    EXPECT_FALSE(ec);
    written = n;
    asio_advance(out, n);
  });
  std::array<ByteBuffer, 2> in{ByteBuffer::allocate(4), ByteBuffer::allocate(64)};
  std::size_t read = 0;
  asio::async_read(rb, asio_mutable_buffers(in), asio::transfer_exactly(16),
                   [&](std::error_code ec, std::size_t n) {
                     EXPECT_FALSE(ec);
                     read = n;
                     asio_advance(in, n);
                   });
  io.run_for(std::chrono::seconds(10));
  EXPECT_EQ(written, 16u);
  EXPECT_EQ(read, 16u);
  for (auto& b : out) EXPECT_FALSE(b.has_remaining());
  EXPECT_EQ(in[0].position(), 4u);
  EXPECT_EQ(in[1].position(), 12u);
  in[0].flip();
  in[1].flip();
  std::string got;
  for (auto& b : in) got.append(reinterpret_cast<const char*>(b.bytes().data()), b.remaining());
  EXPECT_EQ(got, "hello asio world");
}

TEST(AsioInterop, ReadOnlyBufferIsNotAMutableTarget) {
  std::array<ByteBuffer, 1> ro{buffer_with("x").as_read_only_buffer()};
  auto seq = asio_mutable_buffers(ro);
  EXPECT_ANY_THROW((void)*seq.begin());
}

// A niox EventLoop driven by an io_context on one thread through pollable_fd().
TEST(AsioInterop, EventLoopEmbeddedInIoContext) {
  asio::io_context io;
  EventLoop loop;
  asio::posix::stream_descriptor notify(io, loop.pollable_fd());
  std::function<void()> arm = [&] {
    notify.async_wait(asio::posix::stream_descriptor::wait_read, [&](std::error_code ec) {
      if (ec) return;
      loop.run_once(std::chrono::milliseconds(0));
      arm();
    });
  };
  arm();
  bool fired = false;
  loop.schedule(std::chrono::milliseconds(5), [&] {
    fired = true;
    io.stop();
  });
  io.run_for(std::chrono::seconds(10));
  notify.release();  // the loop owns that descriptor
  EXPECT_TRUE(fired);
}

}  // namespace
}  // namespace niox
#endif
