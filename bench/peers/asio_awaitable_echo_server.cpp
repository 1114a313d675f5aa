// asio_awaitable_echo_server: the standalone Asio peer written with C++20 coroutines, as the
// Asio examples write it (co_spawn, use_awaitable, one io_context thread).
//
// Per connection: async_read_some into a 64 KiB buffer, then async_write of what was read
// (TCP_NODELAY set, as in asio_echo_server).
//
// usage: asio_awaitable_echo_server [--port N] [--host ADDR]   (default 127.0.0.1, port 7000)

#include "asio_peer_args.hpp"

#include <asio.hpp>

#include <array>
#include <cstdio>

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
  auto args = parse_asio_peer_args(argc, argv);
  if (!args) {
    return 1;
  }
  try {
    asio::io_context io(1);  // concurrency hint 1: one thread, so Asio may skip locking
    tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address(args->host), args->port));
    asio::co_spawn(io, listener(std::move(acceptor)), asio::detached);
    std::fprintf(stderr, "asio_awaitable_echo_server: listening on %s:%u\n", args->host.c_str(),
                 args->port);
    io.run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "asio_awaitable_echo_server: %s\n", e.what());
    return 1;
  }
}
