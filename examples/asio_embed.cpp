// A niox EventLoop running inside a standalone Asio io_context, on one thread.
//
// The io_context watches the loop's pollable descriptor; whenever it turns readable, one
// non-blocking niox turn runs. niox writes a message through a socket pair, Asio reads it into
// niox ByteBuffers (as an Asio MutableBufferSequence) and answers with a gathering write of
// ByteBuffers (a ConstBufferSequence); niox reads the answer; an Asio timer and a niox timer
// tick alongside.
#include <niox/asio.hpp>
#include <niox/buffer/byte_buffer.hpp>
#include <niox/loop/event_loop.hpp>

#include <asio.hpp>

#include <array>
#include <cstdio>
#include <functional>
#include <string>

#include <fmt/format.h>
#include <sys/socket.h>

namespace {
niox::ByteBuffer text(std::string_view s) {
  auto b = niox::ByteBuffer::allocate(s.size());
  b.put(s);
  b.flip();
  return b;
}
std::string as_string(niox::ByteBuffer b) {
  b.flip();
  return {reinterpret_cast<const char*>(b.bytes().data()), b.remaining()};
}
}  // namespace

int main() {
  asio::io_context io;
  niox::EventLoop loop;

  // Drive niox from Asio: wait for readability, run one non-blocking turn, wait again.
  asio::posix::stream_descriptor niox_fd(io, loop.pollable_fd());
  std::function<void()> watch = [&] {
    niox_fd.async_wait(asio::posix::stream_descriptor::wait_read, [&](std::error_code ec) {
      if (ec) return;
      loop.run_once(std::chrono::milliseconds(0));
      watch();
    });
  };
  watch();

  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) return 1;
  niox::FileDescriptor niox_side(sv[0]);  // ours; closed through the loop at the end
  asio::posix::stream_descriptor asio_side(io, sv[1]);

  // niox -> Asio
  loop.write(niox_side.get(), text("hello from niox"),
             [](std::error_code ec, std::size_t n, niox::ByteBuffer) {
               fmt::print("niox wrote {} bytes ({})\n", n, ec ? ec.message() : "ok");
             });

  std::array<niox::ByteBuffer, 2> in{niox::ByteBuffer::allocate(5), niox::ByteBuffer::allocate(64)};
  std::array<niox::ByteBuffer, 3> reply{text("hello "), text("from "), text("asio")};
  asio_side.async_read_some(niox::asio_mutable_buffers(in), [&](std::error_code ec, std::size_t n) {
    if (ec) return;
    niox::asio_advance(in, n);
    fmt::print("asio read {} bytes: '{}' + '{}'\n", n, as_string(in[0]), as_string(in[1]));
    asio::async_write(asio_side, niox::asio_const_buffers(reply),
                      [&](std::error_code ec2, std::size_t m) {
                        niox::asio_advance(reply, m);
                        fmt::print("asio wrote {} bytes ({})\n", m, ec2 ? ec2.message() : "ok");
                      });
  });

  // Asio -> niox, then stop everything.
  loop.read(niox_side.get(), niox::ByteBuffer::allocate(64),
            [&](std::error_code ec, std::size_t n, niox::ByteBuffer buf) {
              fmt::print("niox read {} bytes: '{}' ({})\n", n, as_string(std::move(buf)),
                         ec ? ec.message() : "ok");
              loop.schedule(std::chrono::milliseconds(20), [&] {
                fmt::print("niox timer fired; counters: {}\n", loop.counters());
                io.stop();
              });
            });

  asio::steady_timer tick(io, std::chrono::milliseconds(5));
  tick.async_wait([](std::error_code ec) {
    if (!ec) fmt::print("asio timer fired\n");
  });

  io.run_for(std::chrono::seconds(5));
  niox_fd.release();  // the loop owns its pollable descriptor
  loop.close(std::move(niox_side));
  fmt::print("backend: {}\n", loop.backend());
  return 0;
}
