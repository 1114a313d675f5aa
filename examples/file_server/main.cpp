// niox-file-server: HTTP/1.1 static files over the niox transport. See --help.
//
// The protocol is all in HttpServerConnection (bytes in, planned responses out); this file only
// moves bytes: each planned response leaves as its head and small body (one gathering write with
// everything else flushed at the same time) and, for large files, a FileRegion (sendfile).
#include "file_server_options.hpp"
#include "http_server_connection.hpp"
#include "open_file_cache.hpp"

#include "server_program.hpp"

#include <niox/loop/event_loop_group.hpp>
#include <niox/transport/bootstrap.hpp>
#include <niox/transport/file_region.hpp>
#include <niox/transport/idle_state_handler.hpp>
#include <niox/transport/ssl_handler.hpp>

#include <chrono>
#include <exception>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace {

using namespace niox;
using namespace niox::http;

// After a response that ends the connection, the server shuts its output down (FIN) and reads
// and discards what the client still sends, until the client ends its side or for at most
// this long, then closes. Closing at once with unread input makes the kernel reset the
// connection, and a reset can destroy the response the client has not read yet (a client
// still sending an oversized head, say, and then its 431).
constexpr std::chrono::seconds lingering_close_time{2};

// How often each loop checks its open-file cache for files deleted or replaced meanwhile.
constexpr std::chrono::seconds cache_sweep_period{1};

// One per connection, on its loop. Requests are decoded straight from the read buffer; only
// input that on_read left unconsumed (a request cut by the end of a read, or requests beyond
// the response queue's bound) is copied, into pending_, which is freed once empty. So a
// keep-alive connection between requests holds nothing but this object.
class HttpServerHandler final : public ChannelHandler {
 public:
  HttpServerHandler(const StaticFileResponder& responder, HttpDecoderConfig decoder,
                    OpenFileCache* cache, std::chrono::nanoseconds head_timeout)
      : conn_(responder, decoder, 32, cache), head_timeout_(head_timeout) {}

  void channel_read(ChannelHandlerContext& ctx, Message msg) override {
    auto* in = msg.get_if<ByteBuffer>();
    if (in == nullptr || closing_) {
      return;
    }
    if (pending_.empty()) {
      serve(ctx, *in);
      keep_unconsumed(*in);
    } else {
      keep_unconsumed(*in);
      serve_pending(ctx);
    }
    // A request head still incomplete long after it began: a client trickling its request (or
    // never finishing it) holds the connection for nothing. The silent ones are closed by the
    // IdleStateHandler in front; this catches those that keep sending a byte now and then.
    if (!closing_ && head_started_ && head_timeout_.count() > 0 &&
        std::chrono::steady_clock::now() - *head_started_ > head_timeout_) {
      close_now(ctx);
    }
  }

  void channel_read_complete(ChannelHandlerContext& ctx) override {
    // A client that pipelines without reading our answers is pushed back: no more reads until
    // the outbound buffer drained below its low water mark.
    if (!closing_ && !ctx.channel().is_writable()) {
      ctx.channel().config().set_auto_read(false);
    }
  }

  void channel_writability_changed(ChannelHandlerContext& ctx) override {
    if (!closing_ && ctx.channel().is_writable()) {
      serve_pending(ctx);
      if (!closing_) {
        ctx.channel().config().set_auto_read(true);
      }
    }
    ctx.fire_channel_writability_changed();
  }

  void user_event_triggered(ChannelHandlerContext& ctx, std::any event) override {
    if (std::any_cast<IdleStateEvent>(&event) != nullptr) {
      // Nothing read and no write completed for the idle timeout: an idle keep-alive
      // connection, a client gone silent mid-request, or one that stopped reading. A large
      // file still going out to a slow client completes no write for a long time, though:
      // while the peer keeps acknowledging bytes, it is not idle.
      if (!response_progressing(ctx)) {
        close_now(ctx);
      }
      return;
    }
    if (std::any_cast<ChannelInputShutdownEvent>(&event) != nullptr) {
      if (closing_) {
        // A lingering close: the client ended its side after our FIN, done. Before the FIN
        // (the last response still being written), the close after the flush sees the input
        // shut down and closes without lingering.
        if (ctx.channel().is_output_shutdown()) {
          ctx.close();
        }
        return;
      }
      conn_.on_end_of_input();
      // Nothing more can arrive, so nothing is left unread: close once written.
      close_after_flush(ctx, ctx.write_and_flush(ByteBuffer()), /*linger=*/false);
      return;
    }
    ctx.fire_user_event_triggered(std::move(event));
  }

  void exception_caught(ChannelHandlerContext& ctx, std::exception_ptr) override { ctx.close(); }

 private:
  void keep_unconsumed(const ByteBuffer& in) {
    if (closing_ || !in.has_remaining()) {
      return;
    }
    auto bytes = in.bytes();
    pending_.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  }

  void serve_pending(ChannelHandlerContext& ctx) {
    auto in = ByteBuffer::wrap(std::string_view(pending_));
    serve(ctx, in);
    pending_.erase(0, in.position());
    if (pending_.empty()) {
      std::string().swap(pending_);  // nothing held between requests
    }
  }

  // Answers the requests in `in`, advancing its position past them.
  void serve(ChannelHandlerContext& ctx, ByteBuffer& in) {
    // The responses of one call, written before it returns: one vector for the thread.
    thread_local std::vector<HttpResponse> queue;
    ChannelFuture last;
    while (!closing_ && in.has_remaining() && ctx.channel().is_writable()) {
      queue.clear();
      conn_.on_read(in, queue);
      if (queue.empty()) {
        break;  // an incomplete request: wait for more input
      }
      for (auto& r : queue) {
        if (r.head.has_remaining()) {
          last = ctx.write(std::move(r.head));
        }
        if (r.body.has_remaining()) {
          last = ctx.write(std::move(r.body));
        }
        if (r.has_file_region()) {
          last = ctx.write(FileRegion(std::move(r.file), r.file_offset, r.file_count));
        }
      }
      queue.clear();
      // Flushing once per batch lets every head and small body of a pipelined batch leave in
      // one gathering write.
      ctx.flush();
      if (conn_.is_closing()) {
        close_after_flush(ctx, last, /*linger=*/true);
      }
    }
    if (conn_.is_idle()) {
      head_started_.reset();
    } else if (!head_started_) {
      head_started_ = std::chrono::steady_clock::now();  // a request has begun
    }
  }

  bool response_progressing(ChannelHandlerContext& ctx) {
    auto& ch = static_cast<LoopSocketChannel&>(ctx.channel());
    if (ch.outbound_buffer().total_pending_bytes() == 0 || ch.fd() < 0) {
      return false;
    }
    tcp_info info{};
    socklen_t len = sizeof info;
    if (::getsockopt(ch.fd(), IPPROTO_TCP, TCP_INFO, &info, &len) != 0 ||
        info.tcpi_bytes_acked == acked_at_last_idle_) {
      return false;
    }
    acked_at_last_idle_ = info.tcpi_bytes_acked;
    return true;
  }

  void close_now(ChannelHandlerContext& ctx) {
    closing_ = true;
    pending_.clear();
    ctx.close();
  }

  // Closes once `last` is written. With `linger`, a lingering close instead (see
  // lingering_close_time): FIN first, then input is read and dropped (channel_read ignores it
  // once closing_) until the client's end of stream or the time is up.
  void close_after_flush(ChannelHandlerContext& ctx, ChannelFuture last, bool linger) {
    closing_ = true;
    pending_.clear();
    std::weak_ptr<Channel> weak = ctx.channel().shared_from_this();
    last.add_listener([weak, linger](std::error_code ec) {
      auto ch = weak.lock();
      if (!ch) {
        return;
      }
      if (ec || !linger || !ch->is_active() || ch->is_input_shutdown()) {
        ch->close();
        return;
      }
      ch->shutdown_output();
      ch->config().set_auto_read(true);  // keep draining, even if reads were paused
      ch->executor().schedule(lingering_close_time, [weak] {
        if (auto c = weak.lock()) {
          c->close();
        }
      });
    });
  }

  HttpServerConnection conn_;
  std::string pending_;
  bool closing_ = false;
  std::chrono::nanoseconds head_timeout_;
  // TCP_INFO bytes acked by the peer, at the last idle event.
  std::uint64_t acked_at_last_idle_ = 0;
  std::optional<std::chrono::steady_clock::time_point> head_started_;  // of the incomplete request
};

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

  // One cache per loop, used only on that loop's thread; the map is read-only once serving.
  std::vector<std::unique_ptr<OpenFileCache>> caches;
  std::unordered_map<const EventLoop*, OpenFileCache*> cache_of;

  examples::ServerProgram p;
  p.program = "niox-file-server";
  p.options = o;
  p.allow_unix = true;  // --bind unix:PATH (curl --unix-socket PATH http://localhost/)
  p.configure = [&](ServerBootstrap& b, EventLoopGroup& workers) {
    for (std::size_t i = 0; i < workers.size(); ++i) {
      caches.push_back(std::make_unique<OpenFileCache>());
      OpenFileCache* cache = caches.back().get();
      EventLoop& loop = workers.loop(i);
      cache_of[&loop] = cache;
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
          auto it = cache_of.find(&loop);
          if (ssl.is_valid()) {
            ch.pipeline().add_last("ssl", std::make_shared<SslHandler>(ssl.new_engine()));
          }
          if (idle_timeout.count() > 0) {
            ch.pipeline().add_last("idle", std::make_shared<IdleStateHandler>(
                                               std::chrono::nanoseconds::zero(),
                                               std::chrono::nanoseconds::zero(), idle_timeout));
          }
          ch.pipeline().add_last(
              "http",
              std::make_shared<HttpServerHandler>(
                  responder, decoder, it == cache_of.end() ? nullptr : it->second, idle_timeout));
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
