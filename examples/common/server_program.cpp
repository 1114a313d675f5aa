#include "server_program.hpp"

#include "command_line.hpp"

#include <csignal>
#include <exception>
#include <iostream>
#include <memory>
#include <stdexcept>

#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

namespace niox::examples {

bool is_server_option(std::string_view name) noexcept {
  return name == "--port" || name == "--bind" || name == "--threads" || name == "--backend" ||
         name == "--tls-cert" || name == "--tls-key";
}

bool parse_server_flag(std::string_view arg, ServerOptions& o) noexcept {
  if (arg == "--reuseport") {
    o.reuseport = true;
    return true;
  }
  return false;
}

OptionResult parse_server_option(std::string_view name, std::string_view value, ServerOptions& o,
                                 std::string& error) {
  if (name == "--port") {
    if (!parse_number<std::uint16_t>(value, 0, 65535, o.port)) {
      error = invalid_value(name, value, "expected 0-65535");
      return OptionResult::invalid;
    }
  } else if (name == "--bind") {
    if (value.empty()) {
      error = invalid_value(name, value, "empty address");
      return OptionResult::invalid;
    }
    o.bind = value;
  } else if (name == "--threads") {
    if (!parse_number<unsigned>(value, 0, 1024, o.threads)) {
      error = invalid_value(name, value, "expected 0-1024");
      return OptionResult::invalid;
    }
  } else if (name == "--backend") {
    auto b = parse_backend(value);
    if (!b) {
      error = invalid_value(name, value, "expected auto, io_uring or epoll");
      return OptionResult::invalid;
    }
    o.backend = *b;
  } else if (name == "--tls-cert" || name == "--tls-key") {
    if (value.empty()) {
      error = invalid_value(name, value, "empty path");
      return OptionResult::invalid;
    }
    (name == "--tls-cert" ? o.tls_cert : o.tls_key) = value;
  } else {
    return OptionResult::not_mine;
  }
  return OptionResult::ok;
}

std::string server_options_usage(const ServerOptions& d, std::size_t column, bool allow_unix) {
  auto line = [column](std::string_view left, std::string_view text) {
    std::string s = "  " + std::string(left);
    s.append(s.size() < column ? column - s.size() : 1, ' ');
    return s + std::string(text) + "\n";
  };
  std::string out;
  out +=
      line("--port P", "TCP port, 0 for any free port (default: " + std::to_string(d.port) + ")");
  if (allow_unix) {
    out += line("--bind ADDR", "IPv4/IPv6 address, or a Unix-domain socket path (/path or");
    out += line("", "unix:path) (default: " + d.bind + ")");
  } else {
    out += line("--bind ADDR", "IPv4 or IPv6 address to listen on (default: " + d.bind + ")");
  }
  out += line("--threads N", "event loops, 0 for one per CPU (default: " +
                                 (d.threads == 0 ? std::string("0") : std::to_string(d.threads)) +
                                 ")");
  out += line("--backend B", std::string("auto, io_uring or epoll (default: ") +
                                 std::string(to_string(d.backend)) + ")");
  out += line("--reuseport", "each event loop listens on the port itself (SO_REUSEPORT) and");
  out += line("", "keeps what it accepts; IP addresses only (default: one thread");
  out += line("", "accepts and hands connections to the event loops, or the only");
  out += line("", "event loop accepts itself)");
  out += line("--tls-cert FILE", "PEM certificate chain: serve TLS 1.2/1.3 (needs --tls-key)");
  out += line("--tls-key FILE", "PEM private key of --tls-cert");
  return out;
}

std::optional<SslContext> server_tls_context(const ServerOptions& o, std::vector<std::string> alpn,
                                             std::string& error) {
  if (o.tls_cert.empty() && o.tls_key.empty()) {
    return SslContext();
  }
  if (o.tls_cert.empty() || o.tls_key.empty()) {
    error = "--tls-cert and --tls-key go together";
    return std::nullopt;
  }
  std::error_code ec;
  SslContext context = SslContextBuilder::for_server(Pem::file(o.tls_cert), Pem::file(o.tls_key))
                           .application_protocols(std::move(alpn))
                           .build(ec);
  if (ec) {
    error =
        "cannot use --tls-cert " + o.tls_cert + " / --tls-key " + o.tls_key + ": " + ec.message();
    return std::nullopt;
  }
  return context;
}

SocketAddress listen_address(const ServerOptions& o, bool allow_unix) {
  if (allow_unix && o.bind.rfind("unix:", 0) == 0) {
    return UnixDomainSocketAddress(o.bind.substr(5));
  }
  if (allow_unix && !o.bind.empty() && o.bind[0] == '/') {
    return UnixDomainSocketAddress(o.bind);
  }
  return InetSocketAddress(o.bind, o.port);
}

StopSignals::StopSignals() {
  sigemptyset(&set_);
  sigaddset(&set_, SIGINT);
  sigaddset(&set_, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set_, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
}

int StopSignals::wait() const {
  int sig = 0;
  sigwait(&set_, &sig);
  return sig;
}

int run_server(const ServerProgram& p) {
  const auto& o = p.options;
  if (o.backend != BackendKind::automatic && !EventLoop::backend_available(o.backend)) {
    std::cerr << p.program << ": the " << to_string(o.backend)
              << " backend is not available on this machine\n";
    return 1;
  }
  SocketAddress where;
  try {
    where = listen_address(o, p.allow_unix);
  } catch (const std::exception& e) {
    // e.what() names the value: "cannot resolve 'no.such.host': Name or service not known".
    std::cerr << p.program << ": --bind: " << e.what() << "\n";
    return 2;
  }

  // Before any loop thread exists, so that every thread inherits the mask.
  const StopSignals stop_signals;

  try {
    EventLoopGroup::Options worker_options;
    worker_options.threads = o.threads;
    worker_options.loop.backend = o.backend;
    EventLoopGroup workers(worker_options);
    std::unique_ptr<EventLoopGroup> acceptor;
    // One worker loop accepts itself: a separate accepting thread would only add a hand-off
    // between threads to every connection, with no other loop to spread them over.
    if (p.own_acceptor && !o.reuseport && workers.size() > 1) {
      EventLoopGroup::Options acceptor_options;
      acceptor_options.threads = 1;
      acceptor_options.loop.backend = o.backend;
      acceptor = std::make_unique<EventLoopGroup>(acceptor_options);
    }

    ServerBootstrap b;
    if (acceptor) {
      b.group(*acceptor, workers);
    } else {
      b.group(workers);
    }
    b.option(channel_option::so_backlog, 1024);
    if (o.reuseport) {
      b.option(channel_option::listener_per_loop, true);
    }
    if (p.configure) {
      p.configure(b, workers);
    }
    auto bound = b.bind(where);
    std::error_code ec;
    if (bound.sync(ec); ec) {
      std::cerr << p.program << ": cannot listen on " << where.to_string() << ": " << ec.message()
                << "\n";
      return 1;
    }
    auto server = bound.channel();
    const BoundSocketFile socket_file(where);
    auto local = server->local_address();
    std::cout << (p.banner ? p.banner(local ? *local : where, workers)
                           : p.program + " listening on " + (local ? *local : where).to_string())
              << std::endl;

    stop_signals.wait();
    server->close().sync(ec);
    workers.shutdown_gracefully();
    if (acceptor) {
      acceptor->shutdown_gracefully();
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << p.program << ": " << e.what() << "\n";
    return 1;
  }
}

}  // namespace niox::examples
