// asio_awaitable_echo_server: the standalone Asio peer written with C++20 coroutines, as the
// Asio examples write it (co_spawn, use_awaitable, one io_context thread).
//
// Per connection: async_read_some into a 64 KiB buffer, then async_write of what was read
// (TCP_NODELAY set, as in asio_echo_server).
//
// usage: asio_awaitable_echo_server [--port N] [--host ADDR]   (default 127.0.0.1, port 7000)

#include <asio.hpp>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace {

using asio::awaitable;
using asio::use_awaitable;
using asio::ip::tcp;

awaitable<void> echo(tcp::socket socket) {
  try {
    std::array<char, 64 * 1024> buf;
    for (;;) {
      std::size_t n = co_await socket.async_read_some(asio::buffer(buf), use_awaitable);
      co_await asio::async_write(socket, asio::buffer(buf.data(), n), use_awaitable);
    }
  } catch (const std::exception&) {
    // end of stream or reset: the connection ends
  }
}

awaitable<void> listener(tcp::acceptor acceptor) {
  for (;;) {
    tcp::socket socket = co_await acceptor.async_accept(use_awaitable);
    socket.set_option(tcp::no_delay(true));
    asio::co_spawn(acceptor.get_executor(), echo(std::move(socket)), asio::detached);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string host = "127.0.0.1";
  unsigned short port = 7000;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--port" && i + 1 < argc) {
      port = static_cast<unsigned short>(std::atoi(argv[++i]));
    } else if (a == "--host" && i + 1 < argc) {
      host = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--port N] [--host ADDR]\n", argv[0]);
      return 1;
    }
  }
  try {
    asio::io_context io(1);  // concurrency hint 1: one thread, so Asio may skip locking
    tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address(host), port));
    asio::co_spawn(io, listener(std::move(acceptor)), asio::detached);
    std::fprintf(stderr, "asio_awaitable_echo_server: listening on %s:%u\n", host.c_str(), port);
    io.run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "asio_awaitable_echo_server: %s\n", e.what());
    return 1;
  }
}
