// SslHandler end to end on every backend: niox TLS clients against niox TLS servers, and raw
// sockets sending what a TLS port must survive.
#include <niox/buffer/buffer_pool.hpp>
#include <niox/ssl/record_path.hpp>
#include <niox/ssl/ssl_context.hpp>
#include <niox/transport/bootstrap.hpp>
#include <niox/transport/embedded_channel.hpp>
#include <niox/transport/loop_socket_channel.hpp>
#include <niox/transport/ssl_handler.hpp>
#include <niox/transport/transport_error.hpp>

#include "../support/temp_dir.hpp"
#include "channels/kernel_tls.hpp"
#include "transport/ssl_handler_access.hpp"
#include "../support/test_certificates.hpp"
#include "../support/transport_scenarios.hpp"
#include "../support/transport_sockets.hpp"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <mutex>

using namespace niox;
using namespace niox::test;

namespace {

// What a server's pipelines saw: exceptions (their niox.ssl codes) and handshakes.
struct ServerLog {
  std::mutex mutex;
  std::vector<std::error_code> errors;
  std::vector<std::error_code> close_events;
  std::atomic<int> handshakes{0};
  std::atomic<int> closed{0};

  void error(std::exception_ptr e) {
    std::lock_guard lock(mutex);
    try {
      std::rethrow_exception(e);
    } catch (const std::system_error& s) {
      errors.push_back(s.code());
    } catch (...) {
      errors.push_back(std::make_error_code(std::errc::io_error));
    }
  }
  // An application handler that records what reaches it and closes, and counts the closes.
  void watch(LambdaHandler& h) {
    h.on_exception = [this](ChannelHandlerContext& ctx, std::exception_ptr e) {
      error(e);
      ctx.close();
    };
    h.on_inactive = [this](ChannelHandlerContext&) { ++closed; };
  }
  // The TLS errors (a peer closing with unread bytes may also have caused an ECONNRESET).
  std::vector<std::error_code> errors_seen() {
    std::lock_guard lock(mutex);
    std::vector<std::error_code> tls;
    for (const auto& e : errors) {
      if (e.category() == ssl_category()) tls.push_back(e);
    }
    return tls;
  }
  std::vector<std::error_code> close_events_seen() {
    std::lock_guard lock(mutex);
    return close_events;
  }
  // Until `n` connections closed (20 s at most).
  void wait_closed(int n) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (closed.load() < n && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
};

// Until the server closed the connection: EOF, or a reset when it closed with our bytes unread.
// A client channel of `group` with `ssl` and then `app` in its pipeline, connecting to `addr`.
BootstrapFuture connect_tls(EventLoopGroup& group, const SocketAddress& addr,
                            std::shared_ptr<SslHandler> ssl, std::shared_ptr<ChannelHandler> app) {
  Bootstrap b;
  b.group(group).handler(init([ssl, app](Channel& ch) {
    ch.pipeline().add_last("ssl", ssl);
    ch.pipeline().add_last("app", app);
  }));
  return b.connect(addr);
}

void expect_closed_by_server(PeerSocket& peer) {
  try {
    peer.recv_to_eof();
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), std::errc::connection_reset) << e.what();
  }
}

class SslHandlerTest : public DescriptorCheckedTest {
 protected:
  TestCertificateAuthority ca;
  PemPair leaf = ca.issue();
  SslContext server_ssl =
      SslContextBuilder::for_server(Pem::memory(leaf.certificate), Pem::memory(leaf.private_key))
          .build();
  SslContext client_ssl =
      SslContextBuilder::for_client().trust_manager(Pem::memory(ca.certificate_pem())).build();

  // Connects a niox TLS client to `addr` on `group`, `app` behind its SslHandler.
  BootstrapFuture connect_tls_client(EventLoopGroup& group, const SocketAddress& addr,
                                     std::shared_ptr<ChannelHandler> app) {
    Bootstrap b;
    b.group(group).handler(init([this, app, port = addr.inet().port()](Channel& ch) {
      ch.pipeline().add_last(
          "ssl", std::make_shared<SslHandler>(client_ssl.new_engine("localhost", port)));
      ch.pipeline().add_last("app", app);
    }));
    return b.connect(addr);
  }

  // A TLS echo server whose pipelines report into `log`.
  SocketAddress serve_tls_echo(TestServer& server, ServerLog& log,
                               SslHandler::Options options = {}) {
    server.bootstrap().child_handler(init([this, &log, options](Channel& ch) {
      ch.pipeline().add_last("ssl", std::make_shared<SslHandler>(server_ssl.new_engine(), options));
      auto h = std::make_shared<LambdaHandler>();
      h->on_read = [](ChannelHandlerContext& ctx, Message&& m) { ctx.write(std::move(m)); };
      h->on_read_complete = [](ChannelHandlerContext& ctx) { ctx.flush(); };
      h->on_event = [&log](ChannelHandlerContext&, std::any e) {
        if (auto* hs = std::any_cast<SslHandshakeCompletionEvent>(&e); hs && hs->is_success()) {
          ++log.handshakes;
        }
        if (auto* c = std::any_cast<SslCloseCompletionEvent>(&e)) {
          std::lock_guard lock(log.mutex);
          log.close_events.push_back(c->cause);
        }
      };
      log.watch(*h);
      ch.pipeline().add_last("app", h);
    }));
    return server.start(InetSocketAddress::loopback_v4(0));
  }

  // A TLS server whose application does nothing; `raw` gets what reached the server in front
  // of its SslHandler (on its loop: read it once the connection closed).
  SocketAddress serve_tapped_tls(TestServer& server, ServerLog& log,
                                 std::shared_ptr<std::vector<std::byte>> raw) {
    server.bootstrap().child_handler(init([this, &log, raw](Channel& ch) {
      auto tap = std::make_shared<LambdaHandler>();
      tap->on_read = [raw](ChannelHandlerContext& ctx, Message&& m) {
        auto b = m.get<ByteBuffer>().bytes();
        raw->insert(raw->end(), b.begin(), b.end());
        ctx.fire_channel_read(std::move(m));
      };
      ch.pipeline().add_last("tap", tap);
      ch.pipeline().add_last("ssl", std::make_shared<SslHandler>(server_ssl.new_engine()));
      auto h = std::make_shared<LambdaHandler>();
      log.watch(*h);
      ch.pipeline().add_last("app", h);
    }));
    return server.start(InetSocketAddress::loopback_v4(0));
  }

  // Connects a niox TLS client, sends `data` in `pieces` writes flushed together, and returns
  // what came back once as many bytes arrived; closes with close_notify.
  std::vector<std::byte> tls_round_trip(EventLoopGroup& group, const SocketAddress& addr,
                                        const std::vector<std::byte>& data, int pieces,
                                        std::string* protocol = nullptr) {
    auto received = std::make_shared<std::vector<std::byte>>();
    auto all = std::make_shared<std::promise<void>>();
    auto ssl = std::make_shared<SslHandler>(client_ssl.new_engine("localhost", addr.inet().port()));
    auto h = std::make_shared<LambdaHandler>();
    // The engine is read on its loop, when the handshake completes: read from this thread it
    // races the loop, which may be in a post-handshake message (a session ticket) just then.
    std::promise<std::string> negotiated;
    h->on_event = [&, pieces](ChannelHandlerContext& ctx, std::any e) {
      auto* hs = std::any_cast<SslHandshakeCompletionEvent>(&e);
      if (hs == nullptr || !hs->is_success()) return;
      negotiated.set_value(ssl->engine().protocol());
      const std::size_t step = data.size() / static_cast<std::size_t>(pieces) + 1;
      for (std::size_t at = 0; at < data.size(); at += step) {
        const std::size_t n = std::min(step, data.size() - at);
        ctx.write(ByteBuffer::wrap(std::span<const std::byte>(data).subspan(at, n)));
      }
      ctx.flush();
    };
    h->on_read = [received, all, n = data.size()](ChannelHandlerContext&, Message&& m) {
      auto b = m.get<ByteBuffer>().bytes();
      received->insert(received->end(), b.begin(), b.end());
      if (received->size() == n) all->set_value();
    };
    auto f = connect_tls(group, addr, ssl, h);
    EXPECT_FALSE(await_for(f));
    EXPECT_FALSE(await_for(ssl->handshake_future()));
    auto proto = negotiated.get_future();
    std::string version = wait_for(proto);
    if (protocol != nullptr) *protocol = version;
    auto done = all->get_future();
    wait_for(done);
    EXPECT_FALSE(await_for(f.channel()->close()));
    return *received;
  }
};

TEST_P(SslHandlerTest, NioxClientAndServerEchoEveryByte) {
  ServerLog log;
  TestServer server(options(), 1);
  SocketAddress addr = serve_tls_echo(server, log);
  EventLoopGroup group(TestServer::group_options(options(), 1));
  for (std::size_t size :
       {std::size_t{1}, std::size_t{5000}, std::size_t{16384}, std::size_t{1} << 20}) {
    auto data = pseudo_random_bytes(size, size);
    std::string protocol;
    EXPECT_TRUE(tls_round_trip(group, addr, data, 7, &protocol) == data) << size;
    EXPECT_EQ(protocol, "TLSv1.3");
  }
  log.wait_closed(4);
  EXPECT_EQ(log.handshakes.load(), 4);
  EXPECT_TRUE(log.errors_seen().empty()) << log.errors_seen().front().message();
  // Every client closed with close_notify: no truncation on the server.
  for (const auto& ec : log.close_events_seen()) EXPECT_FALSE(ec) << ec.message();
  group.shutdown_gracefully();
}

// The client's key share (P-256) is not one the server takes: a HelloRetryRequest, a second
// ClientHello, and the connection carries every byte as usual. (That these contexts make the
// server retry: SslEngineTest.AHelloRetryRequestCostsARoundTripAndCompletes.)
TEST_P(SslHandlerTest, AHandshakeThroughAHelloRetryRequestEchoesEveryByte) {
  server_ssl =
      SslContextBuilder::for_server(Pem::memory(leaf.certificate), Pem::memory(leaf.private_key))
          .named_groups({"X25519"})
          .build();
  client_ssl = SslContextBuilder::for_client()
                   .trust_manager(Pem::memory(ca.certificate_pem()))
                   .named_groups({"P-256", "X25519"})
                   .build();
  ServerLog log;
  TestServer server(options(), 1);
  SocketAddress addr = serve_tls_echo(server, log);
  EventLoopGroup group(TestServer::group_options(options(), 1));
  auto data = pseudo_random_bytes(100000, 3);
  std::string protocol;
  EXPECT_TRUE(tls_round_trip(group, addr, data, 3, &protocol) == data);
  EXPECT_EQ(protocol, "TLSv1.3");
  log.wait_closed(1);
  EXPECT_EQ(log.handshakes.load(), 1);
  EXPECT_TRUE(log.errors_seen().empty()) << log.errors_seen().front().message();
  group.shutdown_gracefully();
}

// A raw peer for the bad-input cases: plaintext, noise and broken records to the TLS port.
TEST_P(SslHandlerTest, PlaintextHttpAndNoiseCloseThatConnectionOnly) {
  ServerLog log;
  TestServer server(options(), 1);
  SocketAddress addr = serve_tls_echo(server, log);
  {
    PeerSocket http(addr);
    http.send_all("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n");
    expect_closed_by_server(http);
  }
  {
    PeerSocket noise(addr);
    auto bytes = pseudo_random_bytes(4096, 18);
    bytes[0] = std::byte{0x99};
    noise.send_all(bytes);
    expect_closed_by_server(noise);
  }
  {
    PeerSocket oversized(addr);
    const unsigned char header[] = {0x16, 0x03, 0x01, 0xff, 0xff};
    oversized.send_all(std::span<const std::byte>(reinterpret_cast<const std::byte*>(header), 5));
    expect_closed_by_server(oversized);
  }
  log.wait_closed(3);
  auto errors = log.errors_seen();
  ASSERT_EQ(errors.size(), 3u);
  EXPECT_EQ(errors[0], SslErrc::not_ssl_record);
  EXPECT_EQ(errors[1], SslErrc::not_ssl_record);
  EXPECT_EQ(errors[2], SslErrc::record_overflow);
  // The server still serves.
  EventLoopGroup group(TestServer::group_options(options(), 1));
  auto data = pseudo_random_bytes(10000, 5);
  EXPECT_TRUE(tls_round_trip(group, addr, data, 2) == data);
  group.shutdown_gracefully();
}

// The first bytes of a real ClientHello, then nothing: the handshake timeout closes it.
TEST_P(SslHandlerTest, PeerStalledMidHandshakeIsClosedAtTheTimeout) {
  ServerLog log;
  TestServer server(options(), 1);
  SocketAddress addr = serve_tls_echo(
      server, log, {std::chrono::milliseconds(300), std::chrono::milliseconds(3000)});
  SslEngine client = client_ssl.new_engine("localhost");
  auto hello = ByteBuffer::allocate(SslEngine::packet_buffer_size());
  ByteBuffer none;
  client.wrap(none, hello);
  hello.flip();
  PeerSocket stalled(addr);
  stalled.send_all(hello.bytes().first(hello.remaining() / 2));
  expect_closed_by_server(stalled);  // returns once the server closed
  PeerSocket silent(addr);
  expect_closed_by_server(silent);
  log.wait_closed(2);
  auto errors = log.errors_seen();
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0], SslErrc::handshake_timeout);
  EXPECT_EQ(errors[1], SslErrc::handshake_timeout);
}

// A client engine over a blocking socket: finishes the handshake, then drops the connection
// without close_notify (or after a truncated record).
class BlockingTlsPeer {
 public:
  BlockingTlsPeer(const SocketAddress& addr, SslEngine engine)
      : socket_(addr), engine_(std::move(engine)) {}

  void handshake() {
    auto in = ByteBuffer::allocate(1 << 16);
    for (int i = 0; i < 50; ++i) {
      HandshakeStatus hs = engine_.handshake_status();
      if (hs == HandshakeStatus::need_wrap) {
        auto out = ByteBuffer::allocate(SslEngine::packet_buffer_size());
        ByteBuffer none;
        engine_.wrap(none, out);
        socket_.send_all(out.flip().bytes());
        continue;
      }
      if (hs != HandshakeStatus::need_unwrap) {
        ASSERT_EQ(engine_.protocol(), "TLSv1.3");
        return;
      }
      in.flip();
      auto app = ByteBuffer::allocate(SslEngine::application_buffer_size());
      SslEngineResult r = engine_.unwrap(in, app);
      in.compact();
      if (r.status == SslEngineStatus::buffer_underflow) {
        auto room = in.writable_bytes();
        ssize_t n = -1;
        do {
          // io_uring's task work can interrupt a blocked call (PeerSocket retries the same).
          n = ::recv(socket_.fd(), room.data(), room.size(), 0);
        } while (n < 0 && errno == EINTR);
        ASSERT_GT(n, 0) << std::strerror(errno);
        in.position(in.position() + static_cast<std::size_t>(n));
      }
    }
    FAIL() << "no handshake after 50 steps";
  }
  // An application record, cut short.
  void send_partial_record() {
    auto data = ByteBuffer::wrap(std::string_view("hello, truncated"));
    auto out = ByteBuffer::allocate(SslEngine::packet_buffer_size());
    engine_.wrap(data, out);
    out.flip();
    // Without a finished handshake nothing is wrapped, and `remaining() - 3` would wrap around
    // into a send far past the buffer.
    ASSERT_GT(out.remaining(), 3u);
    socket_.send_all(out.bytes().first(out.remaining() - 3));
  }
  void close() { socket_.close(); }

 private:
  PeerSocket socket_;
  SslEngine engine_;
};

TEST_P(SslHandlerTest, CloseWithoutCloseNotifyAndTruncatedRecordAreTruncation) {
  ServerLog log;
  TestServer server(options(), 1);
  SocketAddress addr = serve_tls_echo(server, log);
  {
    BlockingTlsPeer peer(addr, client_ssl.new_engine("localhost"));
    ASSERT_NO_FATAL_FAILURE(peer.handshake());
    peer.close();
  }
  log.wait_closed(1);
  {
    BlockingTlsPeer peer(addr, client_ssl.new_engine("localhost"));
    ASSERT_NO_FATAL_FAILURE(peer.handshake());
    ASSERT_NO_FATAL_FAILURE(peer.send_partial_record());
    peer.close();
  }
  log.wait_closed(2);
  EXPECT_EQ(log.handshakes.load(), 2);
  auto errors = log.errors_seen();
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0], SslErrc::truncated);
  EXPECT_EQ(errors[1], SslErrc::truncated);
  auto events = log.close_events_seen();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0], SslErrc::truncated);
}

TEST_P(SslHandlerTest, ServerCloseSendsCloseNotifyAndTheClientSeesACleanEnd) {
  TestServer server(options(), 1);
  server.bootstrap().child_handler(init([this](Channel& ch) {
    ch.pipeline().add_last("ssl", std::make_shared<SslHandler>(server_ssl.new_engine()));
    auto h = std::make_shared<LambdaHandler>();
    h->on_event = [](ChannelHandlerContext& ctx, std::any e) {
      if (std::any_cast<SslHandshakeCompletionEvent>(&e) != nullptr) {
        ctx.write_and_flush(ByteBuffer::wrap(std::string_view("bye")));
        ctx.close();
      }
    };
    ch.pipeline().add_last("app", h);
  }));
  SocketAddress addr = server.start(InetSocketAddress::loopback_v4(0));

  EventLoopGroup group(TestServer::group_options(options(), 1));
  auto got = std::make_shared<std::string>();
  auto close_event = std::make_shared<std::promise<std::error_code>>();
  auto exceptions = std::make_shared<std::atomic<int>>(0);
  auto h = std::make_shared<LambdaHandler>();
  h->on_read = [got](ChannelHandlerContext&, Message&& m) {
    got->append(m.get<ByteBuffer>().string_view());
  };
  h->on_event = [close_event](ChannelHandlerContext&, std::any e) {
    if (auto* c = std::any_cast<SslCloseCompletionEvent>(&e)) close_event->set_value(c->cause);
  };
  h->on_exception = [exceptions](ChannelHandlerContext&, std::exception_ptr) { ++*exceptions; };
  auto f = connect_tls_client(group, addr, h);
  ASSERT_FALSE(await_for(f));
  auto ev = close_event->get_future();
  EXPECT_FALSE(wait_for(ev)) << "the server's close_notify did not arrive";
  await_for(f.channel()->close_future());
  EXPECT_EQ(*got, "bye");
  EXPECT_EQ(exceptions->load(), 0);
  group.shutdown_gracefully();
}

// An application that turned AUTO_READ off and closes still hears the peer's close_notify: the
// handler reads again for it, so the close ends with the peer's answer, not at the (here very
// long) close_notify timeout.
TEST_P(SslHandlerTest, ServerCloseWithAutoReadOffStillReadsThePeersCloseNotify) {
  TestServer server(options(), 1);
  auto closed = std::make_shared<std::promise<void>>();
  server.bootstrap().child_handler(init([this, closed](Channel& ch) {
    SslHandler::Options o;
    o.close_notify_read_timeout = std::chrono::hours(1);
    ch.pipeline().add_last("ssl", std::make_shared<SslHandler>(server_ssl.new_engine(), o));
    auto h = std::make_shared<LambdaHandler>();
    h->on_event = [](ChannelHandlerContext& ctx, std::any e) {
      if (std::any_cast<SslHandshakeCompletionEvent>(&e) != nullptr) {
        ctx.channel().config().set_auto_read(false);
        ctx.write_and_flush(ByteBuffer::wrap(std::string_view("bye")));
        ctx.close();
      }
    };
    ch.pipeline().add_last("app", h);
    ch.close_future().add_listener([closed](const std::error_code&) { closed->set_value(); });
  }));
  SocketAddress addr = server.start(InetSocketAddress::loopback_v4(0));

  EventLoopGroup group(TestServer::group_options(options(), 1));
  auto got = std::make_shared<std::string>();
  auto h = std::make_shared<LambdaHandler>();
  h->on_read = [got](ChannelHandlerContext&, Message&& m) {
    got->append(m.get<ByteBuffer>().string_view());
  };
  auto f = connect_tls_client(group, addr, h);
  ASSERT_FALSE(await_for(f));
  auto server_closed = closed->get_future();
  EXPECT_EQ(server_closed.wait_for(std::chrono::seconds(20)), std::future_status::ready)
      << "the server waits for its close_notify timeout";
  await_for(f.channel()->close_future());
  EXPECT_EQ(*got, "bye");
  group.shutdown_gracefully();
  server.stop();
}

// A TLS record as it crossed the wire: its content type and its body (encrypted, when it was).
struct WireRecord {
  int type = 0;
  std::vector<std::byte> body;
};

// The whole records at the front of `bytes`.
std::vector<WireRecord> split_records(std::span<const std::byte> bytes) {
  std::vector<WireRecord> records;
  while (bytes.size() >= 5) {
    const std::size_t n =
        std::to_integer<std::size_t>(bytes[3]) << 8 | std::to_integer<std::size_t>(bytes[4]);
    if (bytes.size() < 5 + n) break;
    records.push_back({std::to_integer<int>(bytes[0]), {bytes.begin() + 5, bytes.begin() + 5 + n}});
    bytes = bytes.subspan(5 + n);
  }
  return records;
}

// A plaintext alert record of level warning (1) with this description.
bool is_warning_alert(const WireRecord& r, int description) {
  return r.type == 21 && r.body == std::vector{std::byte{1}, static_cast<std::byte>(description)};
}

constexpr int user_canceled = 90;
constexpr int close_notify = 0;

// A client engine over a blocking socket, driven one step at a time by the test.
class HandDrivenClient {
 public:
  HandDrivenClient(const SocketAddress& addr, SslEngine engine)
      : socket_(addr), engine_(std::move(engine)) {}

  SslEngine& engine() { return engine_; }
  PeerSocket& socket() { return socket_; }
  // Every byte the server sent so far.
  const std::vector<std::byte>& received() const { return received_; }

  // Wraps what the engine has to send (handshake messages, close_notify) and sends it.
  void send_engine_output() {
    auto out = ByteBuffer::allocate(1 << 16);
    for (;;) {
      ByteBuffer none;
      if (engine_.wrap(none, out).bytes_produced == 0) break;
    }
    socket_.send_all(out.flip().bytes());
  }
  void send(std::string_view data) {
    auto src = ByteBuffer::wrap(data);
    auto out = ByteBuffer::allocate(SslEngine::packet_buffer_size());
    engine_.wrap(src, out);
    socket_.send_all(out.flip().bytes());
  }
  // Unwraps what arrives until `done` says so, the engine fails (`ec`) or reports CLOSED, or
  // the server ends the stream; the last result.
  SslEngineResult unwrap_until(const std::function<bool(const SslEngineResult&)>& done,
                               std::error_code& ec) {
    for (;;) {
      in_.flip();
      auto app = ByteBuffer::allocate(SslEngine::application_buffer_size());
      SslEngineResult r = engine_.unwrap(in_, app, ec);
      in_.compact();
      if (ec || r.status == SslEngineStatus::closed || done(r)) return r;
      if (r.status == SslEngineStatus::buffer_underflow && !receive()) return r;
    }
  }

 private:
  bool receive() {
    auto room = in_.writable_bytes();
    ssize_t n = -1;
    do {
      n = ::recv(socket_.fd(), room.data(), room.size(), 0);
    } while (n < 0 && errno == EINTR);
    if (n <= 0) return false;  // the end of the stream, a reset or the 20 s timeout
    received_.insert(received_.end(), room.begin(), room.begin() + n);
    in_.position(in_.position() + static_cast<std::size_t>(n));
    return true;
  }

  PeerSocket socket_;
  SslEngine engine_;
  ByteBuffer in_ = ByteBuffer::allocate(1 << 16);
  std::vector<std::byte> received_;
};

// A TLS server whose application only reports into `log` (and counts what it reads into
// `reads`, if given), and a hand-driven client that has read the server's encrypted flight up
// to its Finished: the client's own Finished waits to be sent. The server's channel and
// SslHandler, or nulls after a failure (reported).
std::pair<std::shared_ptr<Channel>, std::shared_ptr<SslHandler>> read_server_flight(
    TestServer& server, ServerLog& log, const SslContext& server_ssl, const SslContext& client_ssl,
    std::unique_ptr<HandDrivenClient>& client, std::shared_ptr<std::atomic<int>> reads = nullptr) {
  using Accepted = std::pair<std::shared_ptr<Channel>, std::shared_ptr<SslHandler>>;
  auto accepted = std::make_shared<std::promise<Accepted>>();
  server.bootstrap().child_handler(init([server_ssl, &log, accepted, reads](Channel& ch) {
    auto ssl = std::make_shared<SslHandler>(server_ssl.new_engine());
    ch.pipeline().add_last("ssl", ssl);
    auto h = std::make_shared<LambdaHandler>();
    h->on_read = [reads](ChannelHandlerContext&, Message) {
      if (reads) ++*reads;
    };
    h->on_exception = [&log](ChannelHandlerContext&, std::exception_ptr e) { log.error(e); };
    h->on_inactive = [&log](ChannelHandlerContext&) { ++log.closed; };
    ch.pipeline().add_last("app", h);
    accepted->set_value({ch.shared_from_this(), ssl});
  }));
  SocketAddress addr = server.start(InetSocketAddress::loopback_v4(0));
  client = std::make_unique<HandDrivenClient>(addr, client_ssl.new_engine("localhost"));
  client->send_engine_output();  // the ClientHello
  std::error_code ec;
  client->unwrap_until(
      [](const SslEngineResult& r) { return r.handshake_status == HandshakeStatus::need_wrap; },
      ec);
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_EQ(client->engine().handshake_status(), HandshakeStatus::need_wrap);
  if (ec) return {};
  auto af = accepted->get_future();
  return wait_for(af);
}

// The handshake has begun (the SslHandler before the application started it on activation)
// and the server gives up on the connection at once, as a limit on connections would: the
// client hears why, in the plaintext alerts a TLS peer sends when it cancels (RFC 8446 6.1),
// instead of a bare FIN it could not tell from a cut connection.
TEST_P(SslHandlerTest, ServerClosingMidHandshakeSendsUserCanceledThenCloseNotify) {
  ServerLog log;
  TestServer server(options(), 1);
  auto handshake = std::make_shared<std::promise<ChannelFuture>>();
  server.bootstrap().child_handler(init([this, &log, handshake](Channel& ch) {
    auto ssl = std::make_shared<SslHandler>(server_ssl.new_engine());
    ch.pipeline().add_last("ssl", ssl);
    auto h = std::make_shared<LambdaHandler>();
    h->on_active = [ssl, handshake](ChannelHandlerContext& ctx) {
      handshake->set_value(ssl->handshake_future());
      ctx.channel().close();
    };
    h->on_exception = [&log](ChannelHandlerContext&, std::exception_ptr e) { log.error(e); };
    h->on_inactive = [&log](ChannelHandlerContext&) { ++log.closed; };
    ch.pipeline().add_last("app", h);
  }));
  SocketAddress addr = server.start(InetSocketAddress::loopback_v4(0));

  HandDrivenClient client(addr, client_ssl.new_engine("localhost"));
  client.send_engine_output();  // the ClientHello
  std::error_code ec;
  client.unwrap_until([](const SslEngineResult&) { return false; }, ec);
  auto records = split_records(client.received());
  ASSERT_EQ(records.size(), 2u) << client.received().size() << " bytes arrived";
  EXPECT_TRUE(is_warning_alert(records[0], user_canceled));
  EXPECT_TRUE(is_warning_alert(records[1], close_notify));
  // The client's engine reads the server giving up, not a cut connection.
  EXPECT_EQ(ec, SslErrc::handshake_canceled) << ec.message();
  EXPECT_TRUE(client.engine().is_inbound_done());
  EXPECT_NO_THROW(client.engine().close_inbound());
  client.socket().close();

  log.wait_closed(1);
  auto hs = handshake->get_future();
  EXPECT_EQ(await_for(wait_for(hs)), SslErrc::handshake_canceled);
  const auto errors = log.errors_seen();
  EXPECT_TRUE(errors.empty()) << "the side that closed reports " << errors.front().message();
}

// What a server (serve_tapped_tls) hears from a client that gave up right after its
// ClientHello: the ClientHello, user_canceled and close_notify, and its handshake fails as
// canceled, not as a truncation. Waits for the server's connection to close.
void expect_canceled_after_client_hello(ServerLog& log, const std::vector<std::byte>& raw) {
  log.wait_closed(1);
  auto records = split_records(raw);
  ASSERT_EQ(records.size(), 3u) << raw.size() << " bytes arrived";
  EXPECT_EQ(records[0].type, 22) << "the ClientHello";
  EXPECT_TRUE(is_warning_alert(records[1], user_canceled));
  EXPECT_TRUE(is_warning_alert(records[2], close_notify));
  const auto errors = log.errors_seen();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0], SslErrc::handshake_canceled) << errors[0].message();
}

// The client gives up right after its ClientHello left: the server reads the two alerts
// behind it, and its handshake fails as canceled, not as a truncation.
TEST_P(SslHandlerTest, ClientClosingMidHandshakeSendsUserCanceledThenCloseNotify) {
  ServerLog log;
  TestServer server(options(), 1);
  auto raw = std::make_shared<std::vector<std::byte>>();
  SocketAddress addr = serve_tapped_tls(server, log, raw);

  EventLoopGroup group(TestServer::group_options(options(), 1));
  auto ssl = std::make_shared<SslHandler>(client_ssl.new_engine("localhost"));
  auto exceptions = std::make_shared<std::atomic<int>>(0);
  auto h = std::make_shared<LambdaHandler>();
  // The SslHandler before this one sent the ClientHello on activation.
  h->on_active = [](ChannelHandlerContext& ctx) { ctx.channel().close(); };
  h->on_exception = [exceptions](ChannelHandlerContext&, std::exception_ptr) { ++*exceptions; };
  auto f = connect_tls(group, addr, ssl, h);
  ASSERT_FALSE(await_for(f));
  EXPECT_EQ(await_for(ssl->handshake_future()), SslErrc::handshake_canceled);
  EXPECT_FALSE(await_for(f.channel()->close_future()));
  EXPECT_EQ(exceptions->load(), 0) << "the side that closed reports no error";

  expect_canceled_after_client_hello(log, *raw);
  group.shutdown_gracefully();
}

// shutdown_output right after the ClientHello: the same two alerts as a close, then the FIN
// (it used to be a bare FIN, which the server could not tell from a cut connection). The
// client's input stays open until the server, its handshake canceled, closes.
TEST_P(SslHandlerTest, ClientShuttingDownOutputMidHandshakeSendsTheAlertsBeforeTheFin) {
  ServerLog log;
  TestServer server(options(), 1);
  auto raw = std::make_shared<std::vector<std::byte>>();
  SocketAddress addr = serve_tapped_tls(server, log, raw);

  EventLoopGroup group(TestServer::group_options(options(), 1));
  auto ssl = std::make_shared<SslHandler>(client_ssl.new_engine("localhost"));
  auto shutdown = std::make_shared<std::promise<ChannelFuture>>();
  auto h = std::make_shared<LambdaHandler>();
  h->on_active = [shutdown](ChannelHandlerContext& ctx) {
    shutdown->set_value(ctx.channel().shutdown_output());
  };
  auto f = connect_tls(group, addr, ssl, h);
  ASSERT_FALSE(await_for(f));
  EXPECT_EQ(await_for(ssl->handshake_future()), SslErrc::handshake_canceled);
  auto sf = shutdown->get_future();
  EXPECT_FALSE(await_for(wait_for(sf)));
  EXPECT_FALSE(await_for(f.channel()->close_future()));  // the server closed its side

  expect_canceled_after_client_hello(log, *raw);
  group.shutdown_gracefully();
}

// With TLS 1.3 the server's flight is encrypted: an alert now would need keys only OpenSSL
// holds, and it uses them for alerts once its handshake is done. So the server that gives up
// after its flight reads the client's Finished and then sends close_notify: the client, whose
// handshake finished with that Finished, sees a clean end. What the client sent after its
// Finished never reaches the server's application.
TEST_P(SslHandlerTest, ServerClosingAfterItsEncryptedFlightSendsCloseNotifyOnceTheHandshakeEnds) {
  ServerLog log;
  TestServer server(options(), 1);
  auto reads = std::make_shared<std::atomic<int>>(0);
  std::unique_ptr<HandDrivenClient> hand;
  auto [channel, ssl] = read_server_flight(server, log, server_ssl, client_ssl, hand, reads);
  ASSERT_TRUE(channel && hand);
  HandDrivenClient& client = *hand;
  std::error_code ec;
  channel->close();
  EXPECT_EQ(await_for(ssl->handshake_future()), SslErrc::handshake_canceled);

  client.send_engine_output();  // the client's Finished
  client.send("sent after the Finished");
  SslEngineResult r = client.unwrap_until([](const SslEngineResult&) { return false; }, ec);
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_EQ(r.status, SslEngineStatus::closed) << "the server's close_notify did not arrive";
  EXPECT_TRUE(client.engine().is_inbound_done());
  EXPECT_NO_THROW(client.engine().close_inbound());
  client.send_engine_output();  // the client's close_notify, answering
  EXPECT_FALSE(await_for(channel->close_future()));
  client.socket().close();

  log.wait_closed(1);
  EXPECT_EQ(reads->load(), 0);
  const auto errors = log.errors_seen();
  EXPECT_TRUE(errors.empty()) << "the side that closed reports " << errors.front().message();
}

// shutdown_output after the server's encrypted flight: OpenSSL can say close_notify only once
// it has read the client's Finished, and the FIN waits for it: the client reads close_notify,
// then the end of the stream, never a FIN where a truncation would show.
TEST_P(SslHandlerTest, ServerShuttingDownOutputAfterItsEncryptedFlightSendsCloseNotifyThenFin) {
  ServerLog log;
  TestServer server(options(), 1);
  std::unique_ptr<HandDrivenClient> hand;
  auto [channel, ssl] = read_server_flight(server, log, server_ssl, client_ssl, hand);
  ASSERT_TRUE(channel && hand);
  HandDrivenClient& client = *hand;
  std::error_code ec;
  ChannelFuture shutdown = channel->shutdown_output();
  EXPECT_EQ(await_for(ssl->handshake_future()), SslErrc::handshake_canceled);
  EXPECT_FALSE(shutdown.is_done()) << "the FIN left before the close_notify it must follow";

  client.send_engine_output();  // the client's Finished: now OpenSSL says close_notify
  SslEngineResult r = client.unwrap_until([](const SslEngineResult&) { return false; }, ec);
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_EQ(r.status, SslEngineStatus::closed) << "the server's close_notify did not arrive";
  EXPECT_FALSE(await_for(shutdown));
  char byte;
  ssize_t n;
  do {
    n = ::recv(client.socket().fd(), &byte, 1, 0);
  } while (n < 0 && errno == EINTR);
  EXPECT_EQ(n, 0) << "the FIN did not follow the close_notify";
  client.socket().close();
  EXPECT_FALSE(await_for(channel->close_future()));
  log.wait_closed(1);
  const auto errors = log.errors_seen();
  EXPECT_TRUE(errors.empty()) << "the side that shut down reports " << errors.front().message();
}

TEST_P(SslHandlerTest, WrongHostNameFailsTheClientHandshake) {
  ServerLog log;
  TestServer server(options(), 1);
  SocketAddress addr = serve_tls_echo(server, log);
  EventLoopGroup group(TestServer::group_options(options(), 1));
  auto ssl = std::make_shared<SslHandler>(client_ssl.new_engine("example.com"));
  Bootstrap b;
  b.group(group).handler(init([ssl](Channel& ch) {
    ch.pipeline().add_last("ssl", ssl);
    auto h = std::make_shared<LambdaHandler>();
    h->on_exception = [](ChannelHandlerContext&, std::exception_ptr) {};
    ch.pipeline().add_last("app", h);
  }));
  auto f = b.connect(addr);
  ASSERT_FALSE(await_for(f));
  std::error_code ec = await_for(ssl->handshake_future());
  EXPECT_EQ(ec.value(), certificate_verify_failed_base + 62 /* X509_V_ERR_HOSTNAME_MISMATCH */)
      << ec.message();
  await_for(f.channel()->close_future());
  log.wait_closed(1);
  EXPECT_EQ(log.handshakes.load(), 0);
  group.shutdown_gracefully();
}

// Writes "<", the whole file at `path` as a FileRegion, and ">", flushed together.
struct FramedWrites {
  ChannelFuture region;
  ChannelFuture behind;  // the ">"
};
FramedWrites write_framed_file(ChannelHandlerContext& ctx, const std::string& path) {
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  const auto size = static_cast<std::uint64_t>(::lseek(fd.get(), 0, SEEK_END));
  ctx.write(ByteBuffer::wrap(std::string_view("<")));
  ChannelFuture region = ctx.write(FileRegion(std::move(fd), 0, size));
  return {region, ctx.write_and_flush(ByteBuffer::wrap(std::string_view(">")))};
}

TEST_P(SslHandlerTest, FileRegionIsEncryptedPieceByPiece) {
  TempDir dir;
  const auto content = pseudo_random_bytes(3 * 1024 * 1024 + 17, 7);
  const std::string path = (dir / "file.bin").string();
  {
    FileDescriptor fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    ASSERT_EQ(::write(fd.get(), content.data(), content.size()),
              static_cast<ssize_t>(content.size()));
  }
  TestServer server(options(), 1);
  auto region_done = std::make_shared<std::promise<std::error_code>>();
  server.bootstrap().child_handler(init([this, path, region_done](Channel& ch) {
    ch.pipeline().add_last("ssl", std::make_shared<SslHandler>(server_ssl.new_engine()));
    auto h = std::make_shared<LambdaHandler>();
    h->on_event = [path, region_done](ChannelHandlerContext& ctx, std::any e) {
      if (std::any_cast<SslHandshakeCompletionEvent>(&e) == nullptr) return;
      write_framed_file(ctx, path).region.add_listener(
          [region_done](const std::error_code& ec) { region_done->set_value(ec); });
    };
    ch.pipeline().add_last("app", h);
  }));
  SocketAddress addr = server.start(InetSocketAddress::loopback_v4(0));

  EventLoopGroup group(TestServer::group_options(options(), 1));
  auto received = std::make_shared<std::vector<std::byte>>();
  auto all = std::make_shared<std::promise<void>>();
  const std::size_t expect = content.size() + 2;
  auto h = std::make_shared<LambdaHandler>();
  h->on_read = [received, all, expect](ChannelHandlerContext&, Message&& m) {
    auto b = m.get<ByteBuffer>().bytes();
    received->insert(received->end(), b.begin(), b.end());
    if (received->size() == expect) all->set_value();
  };
  Bootstrap b;
  b.group(group).handler(init([this, h](Channel& ch) {
    ch.pipeline().add_last("ssl", std::make_shared<SslHandler>(client_ssl.new_engine("localhost")));
    ch.pipeline().add_last("app", h);
  }));
  auto f = b.connect(addr);
  ASSERT_FALSE(await_for(f));
  auto done = all->get_future();
  wait_for(done);
  auto rd = region_done->get_future();
  EXPECT_FALSE(wait_for(rd));
  ASSERT_EQ(received->size(), expect);
  EXPECT_EQ((*received)[0], std::byte{'<'});
  EXPECT_EQ(received->back(), std::byte{'>'});
  EXPECT_TRUE(std::equal(content.begin(), content.end(), received->begin() + 1));
  await_for(f.channel()->close());
  group.shutdown_gracefully();
}

// In front of the transport: truncates a file when the first write of more than 32 KiB goes
// by, the ciphertext of a FileRegion's first piece. That piece has been read by then, and the
// next one is read only once it has left.
class ShrinkFileOnTheFirstPiece : public ChannelDuplexHandler {
 public:
  ShrinkFileOnTheFirstPiece(std::string path, off_t size) : path_(std::move(path)), size_(size) {}
  void write(ChannelHandlerContext& ctx, Message&& msg, ChannelPromise promise) override {
    if (!shrunk_ && msg.is_byte_buffer() && msg.get<ByteBuffer>().remaining() > 32 * 1024) {
      shrunk_ = true;
      EXPECT_EQ(::truncate(path_.c_str(), size_), 0) << std::strerror(errno);
    }
    ctx.write(std::move(msg), std::move(promise));
  }

 private:
  std::string path_;
  off_t size_;
  bool shrunk_ = false;
};

// How many pooled buffers of `loop`'s thread are alive, asked on that thread.
std::uint64_t pool_outstanding(EventLoop& loop) {
  auto p = std::make_shared<std::promise<std::uint64_t>>();
  auto f = p->get_future();
  loop.execute([p] { p->set_value(BufferPool::for_this_thread().stats().outstanding); });
  return wait_for(f);
}

// A 1 MiB file shrinks to 300 KiB after the first piece (96 KiB) of its FileRegion was read,
// before the next piece is: the peer already has part of the region, so the stream cannot go
// on. As on the plain transport the region's write fails with file_region_truncated, what was
// written behind it fails too, and the connection closes, whether or not the application
// closes it after its writes. The client decrypted an exact prefix of the file and nothing
// else, and sees a truncation, never a clean end; the server holds no pooled buffer after.
TEST_P(SslHandlerTest, FileShrinkingBetweenPiecesFailsTheRegionAndClosesTheConnection) {
  TempDir dir;
  const auto content = pseudo_random_bytes((1 << 20) + 5, 13);
  const std::string path = (dir / "file.bin").string();
  constexpr off_t shrunk = 300 * 1024;
  for (bool close_after_writes : {false, true}) {
    SCOPED_TRACE(close_after_writes ? "closed after the writes" : "left open");
    {
      FileDescriptor fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
      ASSERT_EQ(::write(fd.get(), content.data(), content.size()),
                static_cast<ssize_t>(content.size()));
    }
    ServerLog log;
    TestServer server(options(), 1);
    const std::uint64_t outstanding_before = pool_outstanding(server.workers().loop(0));
    auto region_done = std::make_shared<std::promise<std::error_code>>();
    auto behind_done = std::make_shared<std::promise<std::error_code>>();
    server.bootstrap().child_handler(init([&, region_done, behind_done](Channel& ch) {
      ch.pipeline().add_last("shrink", std::make_shared<ShrinkFileOnTheFirstPiece>(path, shrunk));
      ch.pipeline().add_last("ssl", std::make_shared<SslHandler>(server_ssl.new_engine()));
      auto h = std::make_shared<LambdaHandler>();
      h->on_event = [&, region_done, behind_done](ChannelHandlerContext& ctx, std::any e) {
        if (std::any_cast<SslHandshakeCompletionEvent>(&e) == nullptr) return;
        auto writes = write_framed_file(ctx, path);
        writes.region.add_listener(
            [region_done](const std::error_code& ec) { region_done->set_value(ec); });
        writes.behind.add_listener(
            [behind_done](const std::error_code& ec) { behind_done->set_value(ec); });
        if (close_after_writes) ctx.close();
      };
      h->on_exception = [&log](ChannelHandlerContext&, std::exception_ptr e) { log.error(e); };
      h->on_inactive = [&log](ChannelHandlerContext&) { ++log.closed; };
      ch.pipeline().add_last("app", h);
    }));
    SocketAddress addr = server.start(InetSocketAddress::loopback_v4(0));

    EventLoopGroup group(TestServer::group_options(options(), 1));
    auto received = std::make_shared<std::vector<std::byte>>();
    auto close_event = std::make_shared<std::promise<std::error_code>>();
    auto h = std::make_shared<LambdaHandler>();
    h->on_read = [received](ChannelHandlerContext&, Message&& m) {
      auto b = m.get<ByteBuffer>().bytes();
      received->insert(received->end(), b.begin(), b.end());
    };
    h->on_event = [close_event](ChannelHandlerContext&, std::any e) {
      if (auto* c = std::any_cast<SslCloseCompletionEvent>(&e)) close_event->set_value(c->cause);
    };
    h->on_exception = [](ChannelHandlerContext&, std::exception_ptr) {};
    Bootstrap b;
    b.group(group).handler(init([this, h](Channel& ch) {
      ch.pipeline().add_last("ssl",
                             std::make_shared<SslHandler>(client_ssl.new_engine("localhost")));
      ch.pipeline().add_last("app", h);
    }));
    auto f = b.connect(addr);
    ASSERT_FALSE(await_for(f));
    auto rd = region_done->get_future();
    EXPECT_EQ(wait_for(rd), transport::Errc::file_region_truncated);
    auto bd = behind_done->get_future();
    EXPECT_TRUE(wait_for(bd)) << "the write behind the region went out";
    EXPECT_FALSE(await_for(f.channel()->close_future())) << "the server kept the connection";
    auto ce = close_event->get_future();
    EXPECT_EQ(wait_for(ce), SslErrc::truncated) << "the client saw a clean end";

    ASSERT_GT(received->size(), 1u) << "nothing of the file arrived";
    EXPECT_EQ(received->front(), std::byte{'<'});
    EXPECT_LE(received->size() - 1, static_cast<std::size_t>(shrunk));
    EXPECT_TRUE(std::equal(received->begin() + 1, received->end(), content.begin()))
        << "not a prefix of the file";
    group.shutdown_gracefully();
    log.wait_closed(1);
    {
      std::lock_guard lock(log.mutex);
      ASSERT_EQ(log.errors.size(), 1u);
      EXPECT_EQ(log.errors[0], transport::Errc::file_region_truncated);
    }

    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (pool_outstanding(server.workers().loop(0)) != outstanding_before &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_EQ(pool_outstanding(server.workers().loop(0)), outstanding_before);
  }
}

// What region_and_echo saw: the bytes, and each side's record path once its part was sent.
struct RegionAndEcho {
  bool exact = false;
  RecordPath server_path = RecordPath::user_space;
  RecordPath client_path = RecordPath::user_space;
  // Inbound: the server's when the client's close_notify came, the client's once it closed.
  RecordPath server_rx_path = RecordPath::user_space;
  RecordPath client_rx_path = RecordPath::user_space;
  std::vector<std::error_code> server_close_events;
  std::vector<std::error_code> server_errors;
};

// The server sends "<", a 1 MiB + 5 file as a FileRegion and ">" once the handshake is done,
// then echoes what the client sends (256 KiB); the client closes with close_notify.
RegionAndEcho region_and_echo(const EventLoop::Options& options, const SslContext& server_ssl,
                              const SslContext& client_ssl) {
  TempDir dir;
  const auto content = pseudo_random_bytes((1 << 20) + 5, 11);
  const auto upload = pseudo_random_bytes(256 * 1024, 12);
  const std::string path = (dir / "file.bin").string();
  {
    FileDescriptor fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    EXPECT_EQ(::write(fd.get(), content.data(), content.size()),
              static_cast<ssize_t>(content.size()));
  }
  RegionAndEcho result;
  ServerLog log;
  TestServer server(options, 1);
  auto server_path = std::make_shared<std::promise<RecordPath>>();
  auto server_rx_path = std::make_shared<std::atomic<RecordPath>>(RecordPath::user_space);
  server.bootstrap().child_handler(init([&, server_path](Channel& ch) {
    auto ssl = std::make_shared<SslHandler>(server_ssl.new_engine());
    ch.pipeline().add_last("ssl", ssl);
    auto h = std::make_shared<LambdaHandler>();
    h->on_event = [&log, path, server_path, server_rx_path, weak = std::weak_ptr<SslHandler>(ssl)](
                      ChannelHandlerContext& ctx, std::any e) {
      if (auto* c = std::any_cast<SslCloseCompletionEvent>(&e)) {
        if (auto ssl = weak.lock())
          server_rx_path->store(ssl->record_path(TrafficDirection::inbound));
        std::lock_guard lock(log.mutex);
        log.close_events.push_back(c->cause);
      }
      if (std::any_cast<SslHandshakeCompletionEvent>(&e) == nullptr) return;
      FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
      const auto size = static_cast<std::uint64_t>(::lseek(fd.get(), 0, SEEK_END));
      ctx.write(ByteBuffer::wrap(std::string_view("<")));
      ctx.write(FileRegion(std::move(fd), 0, size))
          .add_listener([server_path, weak](const std::error_code& ec) {
            EXPECT_FALSE(ec) << ec.message();
            if (auto ssl = weak.lock()) server_path->set_value(ssl->record_path());
          });
      ctx.write_and_flush(ByteBuffer::wrap(std::string_view(">")));
    };
    h->on_read = [](ChannelHandlerContext& ctx, Message&& m) { ctx.write(std::move(m)); };
    h->on_read_complete = [](ChannelHandlerContext& ctx) { ctx.flush(); };
    log.watch(*h);
    ch.pipeline().add_last("app", h);
  }));
  SocketAddress addr = server.start(InetSocketAddress::loopback_v4(0));

  EventLoopGroup group(TestServer::group_options(options, 1));
  auto received = std::make_shared<std::vector<std::byte>>();
  auto all = std::make_shared<std::promise<RecordPath>>();
  const std::size_t expect = content.size() + 2 + upload.size();
  auto ssl = std::make_shared<SslHandler>(client_ssl.new_engine("localhost"));
  auto h = std::make_shared<LambdaHandler>();
  h->on_event = [&upload](ChannelHandlerContext& ctx, std::any e) {
    auto* hs = std::any_cast<SslHandshakeCompletionEvent>(&e);
    if (hs == nullptr || !hs->is_success()) return;
    ctx.write_and_flush(ByteBuffer::wrap(std::span<const std::byte>(upload)));
  };
  h->on_read = [received, all, expect, weak = std::weak_ptr<SslHandler>(ssl)](
                   ChannelHandlerContext&, Message&& m) {
    auto b = m.get<ByteBuffer>().bytes();
    received->insert(received->end(), b.begin(), b.end());
    if (received->size() == expect) {
      if (auto s = weak.lock()) all->set_value(s->record_path());
    }
  };
  auto f = connect_tls(group, addr, ssl, h);
  EXPECT_FALSE(await_for(f));
  auto done = all->get_future();
  result.client_path = wait_for(done);
  auto sp = server_path->get_future();
  result.server_path = wait_for(sp);
  EXPECT_FALSE(await_for(f.channel()->close()));
  log.wait_closed(1);
  result.server_rx_path = server_rx_path->load();
  std::promise<RecordPath> client_rx;
  f.channel()->executor().execute(
      [&] { client_rx.set_value(ssl->record_path(TrafficDirection::inbound)); });
  result.client_rx_path = client_rx.get_future().get();
  // The server's part first (its FileRegion was written before any echo), then the echo.
  std::vector<std::byte> want;
  want.push_back(std::byte{'<'});
  want.insert(want.end(), content.begin(), content.end());
  want.push_back(std::byte{'>'});
  want.insert(want.end(), upload.begin(), upload.end());
  result.exact = *received == want;
  result.server_close_events = log.close_events_seen();
  result.server_errors = log.errors_seen();
  group.shutdown_gracefully();
  return result;
}

TEST_P(SslHandlerTest, WithoutTheKernelTlsUlpRecordsStayInUserSpace) {
  if (kernel_tls_available()) GTEST_SKIP() << "this kernel offers the tls ULP: not the fallback";
  RegionAndEcho r = region_and_echo(options(), server_ssl, client_ssl);
  EXPECT_TRUE(r.exact);
  EXPECT_EQ(r.server_path, RecordPath::user_space);
  EXPECT_EQ(r.client_path, RecordPath::user_space);
  EXPECT_EQ(r.server_rx_path, RecordPath::user_space);
  EXPECT_EQ(r.client_rx_path, RecordPath::user_space);
  EXPECT_TRUE(r.server_errors.empty());
  ASSERT_EQ(r.server_close_events.size(), 1u);
  EXPECT_FALSE(r.server_close_events[0]) << r.server_close_events[0].message();
}

// With the kernel's records: plaintext and a sendfile'd FileRegion out, every byte exact,
// and the client's close_notify (a kernel alert record) a clean end for the server.
TEST_P(SslHandlerTest, WithTheKernelTlsUlpRecordsAndTheFileRegionAreTheKernels) {
  if (!kernel_tls_available()) {
    GTEST_SKIP() << "this kernel does not offer the tls ULP (/proc/sys/net/ipv4/tcp_available_ulp)";
  }
  RegionAndEcho r = region_and_echo(options(), server_ssl, client_ssl);
  EXPECT_TRUE(r.exact);
  EXPECT_EQ(r.server_path, RecordPath::ktls);
  EXPECT_EQ(r.client_path, RecordPath::ktls);
  EXPECT_EQ(r.server_rx_path, RecordPath::ktls)
      << "the client's close_notify came as a kernel record";
  EXPECT_EQ(r.client_rx_path, RecordPath::ktls);
  EXPECT_TRUE(r.server_errors.empty());
  ASSERT_EQ(r.server_close_events.size(), 1u);
  EXPECT_FALSE(r.server_close_events[0]) << r.server_close_events[0].message();
}

TEST_P(SslHandlerTest, ThousandConnectionsHandshakeAtOnce) {
  ServerLog log;
  TestServer server(options(), 2);
  // The handshakes and closes queue behind one another: a slow machine (or a sanitizer) must
  // not turn the 10 s handshake and 3 s close_notify defaults into the limits this test
  // measures (a client giving up on the server's close_notify closes with it unread, and the
  // reset can cut the server's read of the client's close_notify short: a truncation). The
  // waits below allow 60 s.
  SslHandler::Options patient;
  patient.handshake_timeout = std::chrono::seconds(60);
  patient.close_notify_read_timeout = std::chrono::seconds(60);
  SocketAddress addr = serve_tls_echo(server, log, patient);
  EventLoopGroup group(TestServer::group_options(options(), 2));
  constexpr int connections = 1000;
  std::vector<std::shared_ptr<SslHandler>> handlers;
  std::vector<BootstrapFuture> connects;
  auto echoed = std::make_shared<std::atomic<int>>(0);
  for (int i = 0; i < connections; ++i) {
    auto ssl = std::make_shared<SslHandler>(client_ssl.new_engine("localhost"), patient);
    handlers.push_back(ssl);
    auto h = std::make_shared<LambdaHandler>();
    h->on_event = [](ChannelHandlerContext& ctx, std::any e) {
      if (auto* hs = std::any_cast<SslHandshakeCompletionEvent>(&e); hs && hs->is_success())
        ctx.write_and_flush(ByteBuffer::wrap(std::string_view("ping")));
    };
    h->on_read = [echoed](ChannelHandlerContext& ctx, Message&& m) {
      if (m.get<ByteBuffer>().string_view() == "ping") {
        ++*echoed;
        ctx.close();
      }
    };
    connects.push_back(connect_tls(group, addr, ssl, h));
  }
  int failed = 0;
  for (int i = 0; i < connections; ++i) {
    if (await_for(connects[static_cast<std::size_t>(i)], 60) ||
        await_for(handlers[static_cast<std::size_t>(i)]->handshake_future(), 60))
      ++failed;
  }
  EXPECT_EQ(failed, 0);
  for (auto& c : connects) {
    if (c.channel()) await_for(c.channel()->close_future(), 60);
  }
  EXPECT_EQ(echoed->load(), connections);
  log.wait_closed(connections);
  EXPECT_EQ(log.handshakes.load(), connections);
  const auto errors = log.errors_seen();
  EXPECT_TRUE(errors.empty()) << errors.size()
                              << " errors, the first: " << errors.front().message();
  connects.clear();
  handlers.clear();
  group.shutdown_gracefully();
}

NIOX_INSTANTIATE_BACKENDS(SslHandlerTest);

// In memory (no I/O): a server SslHandler on an EmbeddedChannel, and a client engine that reads
// what the server wrote, after a completed handshake.
struct EmbeddedTls {
  TestCertificateAuthority ca;
  PemPair leaf = ca.issue();
  SslContext server_ssl =
      SslContextBuilder::for_server(Pem::memory(leaf.certificate), Pem::memory(leaf.private_key))
          .build();
  SslContext client_ssl =
      SslContextBuilder::for_client().trust_manager(Pem::memory(ca.certificate_pem())).build();
  std::shared_ptr<SslHandler> handler = std::make_shared<SslHandler>(server_ssl.new_engine());
  EmbeddedChannel ch{handler};
  SslEngine client = client_ssl.new_engine("localhost");
  ByteBuffer to_client = ByteBuffer::allocate(1 << 22);  // what the server wrote
  std::string plain;                                     // what the client read of it
  bool client_closed = false;                            // the client read close_notify

  EmbeddedTls() {
    for (int i = 0; i < 20 && !handler->handshake_future().is_done(); ++i) {
      while (client.handshake_status() == HandshakeStatus::need_wrap) {
        auto out = ByteBuffer::allocate(SslEngine::packet_buffer_size());
        ByteBuffer none;
        client.wrap(none, out);
        ch.simulate_read(out.flip());
      }
      drain_server();
      client_reads();
    }
    EXPECT_TRUE(handler->handshake_future().is_success());
    ch.run_pending_tasks();
    drain_server();
  }
  int drain_server() {
    int messages = 0;
    while (auto m = ch.read_outbound()) {
      to_client.put(m->get<ByteBuffer>());
      ++messages;
    }
    return messages;
  }
  void client_reads() {
    to_client.flip();
    for (;;) {
      auto app = ByteBuffer::allocate(SslEngine::application_buffer_size());
      SslEngineResult r = client.unwrap(to_client, app);
      plain.append(app.flip().string_view());
      client_closed |= r.status == SslEngineStatus::closed;
      if (r.status != SslEngineStatus::ok || !to_client.has_remaining()) break;
    }
    to_client.compact();
  }
  // What a read of a TLS_RX socket fires for a record that is not application data.
  std::error_code kernel_record(std::uint8_t type, std::vector<std::uint8_t> content) {
    auto b = ByteBuffer::allocate(content.size());
    for (std::uint8_t c : content) b.put(c);
    try {
      ch.write_inbound(Message(detail::KernelTlsRecord{type, std::move(b.flip())}));
    } catch (const std::system_error& e) {
      return e.code();
    }
    return {};
  }
};

TEST(SslHandlerEmbeddedTest, WritesFlushedTogetherLeaveAsOneBufferInOneWrite) {
  EmbeddedTls t;
  // From here the pretend kernel takes every byte and we see each call's iovecs.
  t.ch.set_write_script([&](std::span<const iovec> iovecs, std::size_t bytes) {
    for (const iovec& v : iovecs) {
      t.to_client.put(
          std::span<const std::byte>(static_cast<const std::byte*>(v.iov_base), v.iov_len));
    }
    return static_cast<long>(bytes);
  });
  std::string expected;
  for (int i = 0; i < 10; ++i) {
    std::string piece = fmt::format("piece {} of ten;", i);
    expected += piece;
    auto b = ByteBuffer::allocate(piece.size());
    b.put(piece).flip();
    t.ch.write(b);
  }
  EXPECT_EQ(t.ch.outbound_messages().size(), 0u) << "nothing leaves before the flush";
  t.ch.flush();
  t.ch.run_pending_tasks();
  ASSERT_EQ(t.ch.write_calls().size(), 1u) << "one write for the whole flush";
  EXPECT_EQ(t.ch.write_calls()[0].iovecs, 1u) << "one buffer holding every record";
  t.plain.clear();
  t.client_reads();
  EXPECT_EQ(t.plain, expected);
}

// After the TLS_RX hand-over the kernel decrypts: its plaintext passes as it was read, session
// tickets are dropped, and the peer's close_notify (an alert record) ends the input cleanly and
// is answered.
TEST(SslHandlerEmbeddedTest, WithTheKernelDecryptingPlaintextPassesAndCloseNotifyEndsCleanly) {
  EmbeddedTls t;
  detail::SslHandlerAccess::assume_kernel_receives(*t.handler);
  EXPECT_EQ(t.handler->record_path(TrafficDirection::inbound), RecordPath::ktls);
  t.ch.write_inbound(ByteBuffer::wrap(std::string_view("GET / HTTP/1.1\r\n\r\n")));
  auto got = t.ch.read_inbound();
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->get<ByteBuffer>().string_view(), "GET / HTTP/1.1\r\n\r\n");
  // A NewSessionTicket (type 4, 3 bytes of body): nothing to answer.
  EXPECT_FALSE(t.kernel_record(detail::tls_handshake_record, {4, 0, 0, 3, 1, 2, 3}));
  EXPECT_TRUE(t.ch.is_open());
  EXPECT_FALSE(t.ch.read_inbound().has_value());
  EXPECT_FALSE(t.kernel_record(detail::tls_alert_record, {1, 0}));
  t.ch.run_pending_tasks();
  bool clean_end = false;
  for (const std::any& e : t.ch.user_events()) {
    if (auto* c = std::any_cast<SslCloseCompletionEvent>(&e)) clean_end = c->is_success();
  }
  EXPECT_TRUE(clean_end);
  EXPECT_FALSE(t.ch.is_open());
  t.drain_server();
  t.client_reads();
  EXPECT_TRUE(t.client_closed) << "our close_notify answered the peer's";
}

TEST(SslHandlerEmbeddedTest, WithTheKernelDecryptingOtherAlertsAndKeyUpdatesFailTheConnection) {
  {
    EmbeddedTls t;
    detail::SslHandlerAccess::assume_kernel_receives(*t.handler);
    // A fatal handshake_failure alert.
    EXPECT_EQ(t.kernel_record(detail::tls_alert_record, {2, 40}),
              make_error_code(SslErrc::alert_received));
    EXPECT_FALSE(t.ch.is_open());
  }
  {
    EmbeddedTls t;
    detail::SslHandlerAccess::assume_kernel_receives(*t.handler);
    // A KeyUpdate (type 24, update_not_requested): the kernel holds the keys it would change.
    EXPECT_EQ(t.kernel_record(detail::tls_handshake_record, {24, 0, 0, 1, 0}),
              make_error_code(SslErrc::kernel_tls_unsupported));
    EXPECT_FALSE(t.ch.is_open());
  }
  {
    EmbeddedTls t;
    detail::SslHandlerAccess::assume_kernel_receives(*t.handler);
    EXPECT_EQ(t.kernel_record(99, {1}), make_error_code(SslErrc::not_ssl_record));
  }
}

// The end of the stream without close_notify is a truncation, as with user-space records.
TEST(SslHandlerEmbeddedTest, WithTheKernelDecryptingAnEndWithoutCloseNotifyIsATruncation) {
  EmbeddedTls t;
  detail::SslHandlerAccess::assume_kernel_receives(*t.handler);
  t.ch.write_inbound(ByteBuffer::wrap(std::string_view("partial")));
  std::error_code seen;
  try {
    t.ch.simulate_input_shutdown();
    t.ch.check_exception();
  } catch (const std::system_error& e) {
    seen = e.code();
  }
  t.ch.run_pending_tasks();
  std::error_code event;
  for (const std::any& e : t.ch.user_events()) {
    if (auto* c = std::any_cast<SslCloseCompletionEvent>(&e)) event = c->cause;
  }
  EXPECT_EQ(event, make_error_code(SslErrc::truncated));
  EXPECT_EQ(seen, make_error_code(SslErrc::truncated));
}

}  // namespace
