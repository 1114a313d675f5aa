// asio_echo_server: the standalone Asio peer, written as an Asio user would write it.
//
// One io_context run by one thread; per connection async_read_some into a 64 KiB buffer, then
// async_write of what was read, then read again (the classic Asio echo example, with
// TCP_NODELAY as every latency-minded server sets it).
//
// usage: asio_echo_server [--port N] [--host ADDR]   (default 127.0.0.1, port 7000)

#include "asio_peer_args.hpp"

#include <asio.hpp>

#include <array>
#include <cstdio>
#include <memory>
#include <utility>

namespace {

class Session : public std::enable_shared_from_this<Session> {
 public:
  explicit Session(asio::ip::tcp::socket socket) : socket_(std::move(socket)) {}

  void start() { do_read(); }

 private:
  void do_read() {
    auto self = shared_from_this();
    socket_.async_read_some(asio::buffer(buf_), [this, self](std::error_code ec, std::size_t n) {
      if (!ec) do_write(n);
    });
  }

  void do_write(std::size_t n) {
    auto self = shared_from_this();
    asio::async_write(socket_, asio::buffer(buf_.data(), n),
                      [this, self](std::error_code ec, std::size_t) {
                        if (!ec) do_read();
                      });
  }

  asio::ip::tcp::socket socket_;
  std::array<char, 64 * 1024> buf_;
};

class Server {
 public:
  Server(asio::io_context& io, const asio::ip::tcp::endpoint& ep) : acceptor_(io, ep) {
    do_accept();
  }

 private:
  void do_accept() {
    acceptor_.async_accept([this](std::error_code ec, asio::ip::tcp::socket socket) {
      if (!ec) {
        socket.set_option(asio::ip::tcp::no_delay(true));
        std::make_shared<Session>(std::move(socket))->start();
      }
      do_accept();
    });
  }

  asio::ip::tcp::acceptor acceptor_;
};

}  // namespace

int main(int argc, char** argv) {
  auto args = parse_asio_peer_args(argc, argv);
  if (!args) {
    return 1;
  }
  try {
    asio::io_context io(1);  // concurrency hint 1: one thread, so Asio may skip locking
    Server server(io, asio::ip::tcp::endpoint(asio::ip::make_address(args->host), args->port));
    std::fprintf(stderr, "asio_echo_server: listening on %s:%u\n", args->host.c_str(), args->port);
    io.run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "asio_echo_server: %s\n", e.what());
    return 1;
  }
}
