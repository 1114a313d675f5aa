// A single-threaded echo server on a Selector, written the way a Java NIO program is:
//
//   nio_echo_server [port]        serve on 127.0.0.1:port (default 7007) until SIGINT/SIGTERM
//   nio_echo_server --self-test   serve on a free port, echo-check a few clients, exit 0 on success
//
// Each connection owns one buffer: reads fill it, the echo drains it; while the peer does not
// read, OP_READ is switched off so a slow client cannot make the server buffer without bound.
#include <niox/channels/selector.hpp>
#include <niox/channels/server_socket_channel.hpp>
#include <niox/channels/socket_channel.hpp>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

using namespace niox;

namespace {

struct Connection {
  SocketChannel channel;
  ByteBuffer buffer = ByteBuffer::allocate(16 * 1024);
};

std::atomic<bool> stop_requested{false};
Selector* running_selector = nullptr;

void on_signal(int) {
  stop_requested = true;
  if (running_selector != nullptr) {
    running_selector->wakeup();  // a write(2) to an eventfd: safe in a signal handler
  }
}

class EchoServer {
 public:
  explicit EchoServer(const SocketAddress& address) {
    server_.set_option(StandardSocketOptions::so_reuseaddr, true);
    server_.bind(address, 128);
    server_.configure_blocking(false);
    server_.register_with(selector_, SelectionKey::OP_ACCEPT);
  }

  std::uint16_t port() const { return server_.local_address()->inet().port(); }
  Selector& selector() { return selector_; }

  void run() {
    while (!stop_requested) {
      selector_.select();
      for (SelectionKey* key : selector_.selected_keys()) {
        if (!key->is_valid()) continue;
        if (key->is_acceptable()) {
          accept();
          continue;
        }
        auto* conn = key->attachment_as<Connection>();
        if (key->is_readable()) read(*key, *conn);
        if (key->is_valid() && key->is_writable()) write(*key, *conn);
      }
      selector_.selected_keys().clear();
    }
  }

 private:
  void accept() {
    std::error_code ec;
    while (auto channel = server_.accept(ec)) {
      channel->configure_blocking(false);
      channel->set_option(StandardSocketOptions::tcp_nodelay, true);
      auto conn = std::make_unique<Connection>(Connection{std::move(*channel)});
      conn->channel.register_with(selector_, SelectionKey::OP_READ, conn.get());
      connections_.emplace(conn.get(), std::move(conn));
    }
    if (ec) {
      // EMFILE and friends: the connection stays queued; say so and try again next round.
      std::fprintf(stderr, "accept: %s\n", ec.message().c_str());
    }
  }

  void read(SelectionKey& key, Connection& conn) {
    std::error_code ec;
    std::int64_t n = conn.channel.read(conn.buffer, ec);
    if (ec || n < 0) {
      close(conn);
      return;
    }
    conn.buffer.flip();
    write(key, conn);
  }

  void write(SelectionKey& key, Connection& conn) {
    std::error_code ec;
    conn.channel.write(conn.buffer, ec);
    if (ec) {
      close(conn);
      return;
    }
    if (conn.buffer.has_remaining()) {
      key.interest_ops(SelectionKey::OP_WRITE);  // wait until the peer reads
    } else {
      conn.buffer.clear();
      key.interest_ops(SelectionKey::OP_READ);
    }
  }

  void close(Connection& conn) {
    conn.channel.close();  // cancels its key
    connections_.erase(&conn);
  }

  Selector selector_;
  ServerSocketChannel server_ = ServerSocketChannel::open();
  std::unordered_map<Connection*, std::unique_ptr<Connection>> connections_;
};

int self_test() {
  EchoServer server(InetSocketAddress::loopback_v4(0));
  const auto port = server.port();
  std::atomic<bool> ok{true};
  std::thread clients([&] {
    std::vector<SocketChannel> open;
    for (int i = 0; i < 8; ++i) {
      open.push_back(SocketChannel::open(InetSocketAddress::loopback_v4(port)));
    }
    std::string payload(200000, 'x');
    for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>('a' + i % 26);
    for (auto& c : open) {
      std::thread writer([&] {
        auto out = ByteBuffer::wrap(std::string_view(payload));
        c.write(out);
      });
      auto in = ByteBuffer::allocate(payload.size());
      while (in.has_remaining() && c.read(in) > 0) {
      }
      writer.join();
      if (in.flip().string_view() != payload) ok = false;
    }
    stop_requested = true;
    server.selector().wakeup();
  });
  server.run();
  clients.join();
  std::puts(ok ? "self-test: ok" : "self-test: MISMATCH");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc > 1 && std::strcmp(argv[1], "--self-test") == 0) {
      return self_test();
    }
    std::uint16_t port = argc > 1 ? static_cast<std::uint16_t>(std::stoi(argv[1])) : 7007;
    EchoServer server(InetSocketAddress::loopback_v4(port));
    running_selector = &server.selector();
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    std::printf("echo server on 127.0.0.1:%u\n", server.port());
    server.run();
    running_selector = nullptr;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nio_echo_server: %s\n", e.what());
    return 1;
  }
  return 0;
}
