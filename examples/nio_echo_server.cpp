// A single-threaded echo server on a Selector, written the way a Java NIO program is:
//
//   nio_echo_server [--port P] [--bind ADDR]   serve on ADDR:P (default 127.0.0.1:7007) until
//                                              SIGINT/SIGTERM
//   nio_echo_server --self-test                serve on a free port, echo-check a few clients,
//                                              exit 0 on success
//
// Each connection owns one buffer: reads fill it, the echo drains it; while the peer does not
// read, OP_READ is switched off so a slow client cannot make the server buffer without bound.
#include <niox/channels/selector.hpp>
#include <niox/channels/server_socket_channel.hpp>
#include <niox/channels/socket_channel.hpp>

#include "command_line.hpp"

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

using namespace niox;
namespace examples = niox::examples;

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
  SocketAddress local_address() const { return *server_.local_address(); }
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

struct Options {
  std::string bind = "127.0.0.1";
  std::uint16_t port = 7007;
  bool self_test = false;
};

const char* const usage =
    "usage: nio_echo_server [--port P] [--bind ADDR] | --self-test\n"
    "\n"
    "A single-threaded echo server on a Selector, written as a Java NIO program is.\n"
    "\n"
    "  --port P       TCP port, 0 for any free port (default: 7007)\n"
    "  --bind ADDR    IPv4 or IPv6 address to listen on (default: 127.0.0.1)\n"
    "  --self-test    serve on a free port, echo-check a few clients, exit 0 on success\n"
    "  --help         this text\n"
    "\n"
    "Prints 'echo server on ADDRESS' once listening; stops on SIGINT or SIGTERM.\n"
    "Exit status: 0 after a signal, 1 when the server cannot start, 2 on a usage error.\n";

// nullopt with `error` set on a usage error; `help` set for --help.
std::optional<Options> parse_args(std::span<const std::string_view> args, bool& help,
                                  std::string& error) {
  Options o;
  examples::OptionReader reader(args);
  while (reader.next()) {
    if (reader.is_help()) {
      help = true;
      return std::nullopt;
    }
    if (reader.arg() == "--self-test") {
      o.self_test = true;
      continue;
    }
    if (reader.name() != "--port" && reader.name() != "--bind") {
      error = reader.unknown();
      return std::nullopt;
    }
    auto value = reader.value(error);
    if (!value) {
      return std::nullopt;
    }
    if (reader.name() == "--port") {
      if (!examples::parse_number<std::uint16_t>(*value, 0, 65535, o.port)) {
        error = examples::invalid_value(reader.name(), *value, "expected 0-65535");
        return std::nullopt;
      }
    } else if (value->empty()) {
      error = examples::invalid_value(reader.name(), *value, "empty address");
      return std::nullopt;
    } else {
      o.bind = *value;
    }
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string_view> args(argv + 1, argv + argc);
  bool help = false;
  std::string error;
  auto options = parse_args(args, help, error);
  if (help) {
    std::fputs(usage, stdout);
    return 0;
  }
  if (!options) {
    std::fprintf(stderr, "nio_echo_server: %s\n\n%s", error.c_str(), usage);
    return 2;
  }
  if (options->self_test) {
    try {
      return self_test();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "nio_echo_server: %s\n", e.what());
      return 1;
    }
  }
  SocketAddress address;
  try {
    address = InetSocketAddress(options->bind, options->port);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nio_echo_server: --bind: %s\n", e.what());
    return 2;
  }
  try {
    EchoServer server(address);
    running_selector = &server.selector();
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    std::printf("echo server on %s\n", server.local_address().to_string().c_str());
    std::fflush(stdout);
    server.run();
    running_selector = nullptr;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nio_echo_server: cannot serve on %s: %s\n", address.to_string().c_str(),
                 e.what());
    return 1;
  }
  return 0;
}
