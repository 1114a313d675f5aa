// What every example server does around its pipeline: the --port/--bind/--threads/--backend
// options and the --reuseport flag, the start-up checks, listening, printing the bound address, and stopping cleanly on
// SIGINT or SIGTERM.
//
//   ServerOptions common;                       // defaults per program
//   ... in the option loop: if (auto r = parse_server_option(name, value, common, error)) ...
//   return run_server({.program = "niox-echo-server", .options = common,
//                      .configure = [](ServerBootstrap& b, EventLoopGroup& workers) {...},
//                      .banner = [](const SocketAddress& a, EventLoopGroup& w) {...}});
//
// Exit status of run_server: 0 after a stop signal, 1 when the server cannot start (backend
// unavailable, address in use, ...), 2 for a --bind that is not an address. Other usage errors
// (2) are the caller's, before it runs.
#pragma once

#include <niox/channels/socket_address.hpp>
#include <niox/loop/event_loop_group.hpp>
#include <niox/ssl/ssl_context.hpp>
#include <niox/transport/bootstrap.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <csignal>
#include <sys/stat.h>
#include <unistd.h>

namespace niox::examples {

struct ServerOptions {
  std::string bind = "0.0.0.0";  // an IP literal; with allow_unix, also /path or unix:path
  std::uint16_t port = 8080;     // 0 picks a free port (printed at start-up)
  unsigned threads = 0;          // worker event loops; 0: one per CPU
  BackendKind backend = BackendKind::automatic;
  std::string tls_cert;  // PEM certificate chain: with tls_key, the server speaks TLS
  std::string tls_key;
  // One SO_REUSEPORT listener per worker loop (channel_option::listener_per_loop) instead of an
  // accepting thread handing connections to the workers (one worker accepts itself anyway).
  bool reuseport = false;
};

enum class OptionResult { not_mine, ok, invalid };

// Whether `name` is one of the options parse_server_option() takes.
bool is_server_option(std::string_view name) noexcept;

// Takes the flags (options without a value: --reuseport) into `o`; false for any other
// argument.
bool parse_server_flag(std::string_view arg, ServerOptions& o) noexcept;

// Takes --port, --bind, --threads, --backend, --tls-cert and --tls-key into `o`; not_mine for
// any other name. invalid sets `error` ("invalid --port '70000': expected 0-65535").
OptionResult parse_server_option(std::string_view name, std::string_view value, ServerOptions& o,
                                 std::string& error);

// The --help lines of the options above, aligned at `column`, with the program's defaults.
std::string server_options_usage(const ServerOptions& defaults, std::size_t column,
                                 bool allow_unix = false);

// The server's TLS context from --tls-cert/--tls-key (an empty context without them), offering
// `alpn`. Returns nullopt and sets `error` when only one of the two is given or they do not
// load (OpenSSL's reason).
std::optional<SslContext> server_tls_context(const ServerOptions& o, std::vector<std::string> alpn,
                                             std::string& error);

// The address to listen on: an IPv4/IPv6 literal with the port, or (allow_unix) a Unix-domain
// socket path given as "/path" or "unix:path". Throws std::invalid_argument on a bad address.
SocketAddress listen_address(const ServerOptions& o, bool allow_unix = false);

// The socket file a Unix-domain server just bound, remembered by device and inode, so that on
// shutdown (its destructor, after the server socket closed) it removes that very file: not a
// path that was replaced meanwhile, nor anything that is not a socket (an abstract name has no
// file at all).
class BoundSocketFile {
 public:
  explicit BoundSocketFile(const SocketAddress& bound) {
    if (!bound.is_unix() || bound.unix_domain().is_abstract()) {
      return;
    }
    struct stat st {};
    if (::lstat(bound.unix_domain().path().c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) {
      path_ = bound.unix_domain().path();
      dev_ = st.st_dev;
      ino_ = st.st_ino;
    }
  }
  BoundSocketFile(const BoundSocketFile&) = delete;
  BoundSocketFile& operator=(const BoundSocketFile&) = delete;
  ~BoundSocketFile() { remove(); }

 private:
  void remove() const noexcept {
    struct stat st {};
    if (!path_.empty() && ::lstat(path_.c_str(), &st) == 0 && S_ISSOCK(st.st_mode) &&
        st.st_dev == dev_ && st.st_ino == ino_) {
      ::unlink(path_.c_str());
    }
  }

  std::string path_;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
};

// SIGINT and SIGTERM, blocked in the calling thread (and so in every thread it starts later:
// call this before any loop thread exists) so that wait() can take them; SIGPIPE is ignored.
class StopSignals {
 public:
  StopSignals();
  // Blocks until SIGINT or SIGTERM arrives; returns it.
  int wait() const;

 private:
  sigset_t set_;
};

struct ServerProgram {
  std::string program;  // the name in messages: "niox-echo-server: cannot listen on ..."
  ServerOptions options;
  bool allow_unix = false;  // --bind may name a Unix-domain socket
  // A separate one-thread group accepts when there are several workers; else the workers do.
  bool own_acceptor = true;
  // Sets child options and the child handler (the server socket has a backlog of 1024). Runs
  // after the loops exist, before binding.
  std::function<void(ServerBootstrap&, EventLoopGroup& workers)> configure;
  // The line printed on stdout once listening (flushed: tests and scripts read it).
  std::function<std::string(const SocketAddress& bound, EventLoopGroup& workers)> banner;
};

// Checks the backend, blocks SIGINT/SIGTERM (before any loop thread exists) and ignores
// SIGPIPE, starts the loops, binds, prints the banner, waits for a stop signal, then closes the
// server socket (and removes the socket file of a Unix-domain address it bound itself) and shuts
// the loops down gracefully. Errors go to stderr as
// "PROGRAM: what"; returns the exit status.
int run_server(const ServerProgram& p);

}  // namespace niox::examples
