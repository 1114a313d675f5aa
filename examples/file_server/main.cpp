// niox-file-server: HTTP/1.1 static files over the niox transport. See --help.
//
// The protocol is all in HttpServerConnection (bytes in, planned responses out) and the moving of
// bytes in HttpServerHandler; this file reads the options and starts the server.
#include "file_server_options.hpp"
#include "http_server_handler.hpp"
#include "open_file_cache.hpp"

#include "server_program.hpp"

#include <niox/loop/event_loop_group.hpp>
#include <niox/transport/bootstrap.hpp>
#include <niox/transport/loop_socket_channel.hpp>
#include <niox/transport/ssl_handler.hpp>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

using namespace niox;
using namespace niox::http;

// How often each loop checks its open-file cache for files deleted or replaced meanwhile.
constexpr std::chrono::seconds cache_sweep_period{1};

// Where the built-in site is: next to an installed program (PREFIX/bin → PREFIX/share/niox/site),
// at the configured install location, or in the source tree when run from a build directory.
std::string find_builtin_site() {
  namespace fs = std::filesystem;
  std::error_code ec;
  auto exe = fs::read_symlink("/proc/self/exe", ec);
  std::vector<fs::path> candidates;
  if (!ec) {
    candidates.push_back(exe.parent_path().parent_path() / "share" / "niox" / "site");
  }
#ifdef NIOX_FILE_SERVER_INSTALLED_SITE_DIR
  candidates.emplace_back(NIOX_FILE_SERVER_INSTALLED_SITE_DIR);
#endif
  candidates.emplace_back(NIOX_FILE_SERVER_SITE_DIR);
  for (const auto& c : candidates) {
    if (fs::is_regular_file(c / "index.html", ec)) {
      return c.string();
    }
  }
  return {};
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string_view> args(argv + 1, argv + argc);
  std::string error;
  auto parsed = parse_file_server_args(args, error);
  if (!parsed) {
    std::cerr << "niox-file-server: " << error << "\n\n" << file_server_usage();
    return 2;
  }
  const auto& o = *parsed;
  if (o.help) {
    std::cout << file_server_usage();
    return 0;
  }
  std::string root_dir = o.root;
  if (root_dir.empty()) {
    root_dir = find_builtin_site();
    if (root_dir.empty()) {
      std::cerr << "niox-file-server: the built-in site is not installed; give --root DIR\n";
      return 1;
    }
  }
  std::error_code ec;
  FileRoot root(root_dir, FileRoot::Resolver::auto_detect, ec);
  if (ec) {
    // Refused here rather than by a 403 or 404 to every request.
    std::string why = ec.message();
    if (ec == std::errc::no_such_file_or_directory) {
      why = "no such directory";
    } else if (ec == std::errc::not_a_directory) {
      why = "not a directory";
    } else if (ec == std::errc::permission_denied) {
      why = "permission denied (the server needs read and search permission on the directory)";
    }
    std::cerr << "niox-file-server: cannot serve '" << root_dir << "': " << why << "\n";
    return 1;
  }
  std::string tls_error;
  auto tls = examples::server_tls_context(o, {"http/1.1"}, tls_error);
  if (!tls) {
    std::cerr << "niox-file-server: " << tls_error << "\n";
    return 1;
  }
  const SslContext ssl = *tls;
  StaticFileResponder responder(root);
  HttpDecoderConfig decoder;
  decoder.max_header_bytes = o.max_header_bytes;
  const auto idle_timeout = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double>(o.idle_timeout_seconds));

  // One open-file cache and one HttpServerLoop per loop, used only on that loop's thread; the
  // map is read-only once serving, and all of them outlive the loops' connections.
  std::vector<std::unique_ptr<OpenFileCache>> caches;
  std::vector<std::unique_ptr<HttpServerLoop>> loops;
  std::unordered_map<const EventLoop*, HttpServerLoop*> loop_of;

  examples::ServerProgram p;
  p.program = "niox-file-server";
  p.options = o;
  p.allow_unix = true;  // --bind unix:PATH (curl --unix-socket PATH http://localhost/)
  p.configure = [&](ServerBootstrap& b, EventLoopGroup& workers) {
    for (std::size_t i = 0; i < workers.size(); ++i) {
      caches.push_back(std::make_unique<OpenFileCache>());
      OpenFileCache* cache = caches.back().get();
      EventLoop& loop = workers.loop(i);
      loops.push_back(
          std::make_unique<HttpServerLoop>(loop, responder, decoder, cache, idle_timeout));
      loop_of[&loop] = loops.back().get();
      // A deleted or replaced file is let go of even if nobody asks for it again.
      loop.schedule_at_fixed_rate(cache_sweep_period, cache_sweep_period, [&root, cache] {
        cache->sweep(root, OpenFileCache::Clock::now());
      });
    }
    // File bodies stay in their files until the client's window opens, instead of megabytes
    // queueing in the kernel per connection: each then leaves from this server's loop as it is
    // written, not later from the client's acknowledgements (on loopback, on the client's core).
    b.child_option(channel_option::tcp_nodelay, true)
        .child_option(channel_option::tcp_notsent_lowat, 16 * 1024)
        .child_option(channel_option::allow_half_closure, true)
        .child_handler(std::make_shared<ChannelInitializer>([&](Channel& ch) {
          auto& loop = static_cast<LoopSocketChannel&>(ch).event_loop();
          if (ssl.is_valid()) {
            ch.pipeline().add_last("ssl", std::make_shared<SslHandler>(ssl.new_engine()));
          }
          // The idle timeout is the handler's: its loop sweeps its connections (no handler and
          // no timer of its own per connection).
          ch.pipeline().add_last("http", std::make_shared<HttpServerHandler>(*loop_of.at(&loop)));
        }));
  };
  p.banner = [&](const SocketAddress& bound, EventLoopGroup& workers) {
    return "niox-file-server listening on " + bound.to_string() +
           (ssl.is_valid() ? " (https)" : "") + " serving " + root_dir + " (backend " +
           std::string(to_string(workers.loop(0).backend())) + ", " +
           std::to_string(workers.size()) + " threads)";
  };
  return examples::run_server(p);
}
