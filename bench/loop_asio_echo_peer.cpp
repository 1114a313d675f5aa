// The Asio peer for the loop echo benchmark: one io_context thread, one buffer per session,
// async_read_some then async_write of what was read (the shape of loop_echo_server).
//
//   niox_loop_asio_echo_peer --port 7001 [--buffer 65536]
#include <asio.hpp>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string_view>
#include <vector>

namespace {
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(asio::ip::tcp::socket s, std::size_t n) : socket_(std::move(s)), buf_(n) {}
  void read() {
    socket_.async_read_some(asio::buffer(buf_), [self = shared_from_this()](std::error_code ec, std::size_t n) {
      if (!ec) self->write(n);
    });
  }

 private:
  void write(std::size_t n) {
    asio::async_write(socket_, asio::buffer(buf_.data(), n), [self = shared_from_this()](std::error_code ec, std::size_t) {
      if (!ec) self->read();
    });
  }
  asio::ip::tcp::socket socket_;
  std::vector<char> buf_;
};
}  // namespace

int main(int argc, char** argv) {
  unsigned short port = 7001;
  std::size_t buffer = 64 * 1024;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string_view k = argv[i];
    if (k == "--port") port = static_cast<unsigned short>(std::atoi(argv[i + 1]));
    else if (k == "--buffer") buffer = std::strtoul(argv[i + 1], nullptr, 10);
  }
  asio::io_context io(1);
  asio::ip::tcp::acceptor acceptor(io, {asio::ip::make_address("127.0.0.1"), port});
  std::function<void()> accept = [&] {
    acceptor.async_accept([&](std::error_code ec, asio::ip::tcp::socket s) {
      if (!ec) {
        s.set_option(asio::ip::tcp::no_delay(true));
        std::make_shared<Session>(std::move(s), buffer)->read();
      }
      accept();
    });
  };
  accept();
  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](std::error_code, int) { io.stop(); });
  std::printf("asio echo peer on 127.0.0.1:%u\n", port);
  std::fflush(stdout);
  io.run();
  return 0;
}
