// The kv example end to end, in-process: a real server (ServerBootstrap + the kv pipeline) and
// KvClient over loopback, on each backend; and the same over TLS.
#include "kv_client.hpp"
#include "kv_server.hpp"
#include "support/backends.hpp"
#include "support/child_process.hpp"
#include "support/test_certificates.hpp"
#include "support/transport_sockets.hpp"

#include <niox/ssl/ssl_context.hpp>
#include <niox/transport/bootstrap.hpp>
#include <niox/transport/ssl_handler.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <future>
#include <string>
#include <vector>

#include <poll.h>
#include <sys/socket.h>

namespace {

using namespace niox;

std::string text(const ByteBuffer& b) {
  auto s = b.bytes();
  return std::string(reinterpret_cast<const char*>(s.data()), s.size());
}

ByteBuffer buffer_of(const std::string& s) {
  auto b = ByteBuffer::allocate(s.size());
  b.put(std::string_view(s)).flip();
  return b;
}

class KvTest : public test::BackendTest {
 protected:
  void SetUp() override {
    test::BackendTest::SetUp();
    if (IsSkipped()) return;
    EventLoopGroup::Options o;
    o.threads = 2;
    o.loop = options();
    group_ = std::make_unique<EventLoopGroup>(o);
    ServerBootstrap b;
    b.group(*group_).child_handler(
        std::make_shared<ChannelInitializer>([this](Channel& ch) { init_child(ch); }));
    auto bound = b.bind(InetSocketAddress::loopback_v4(0));
    bound.sync();
    server_ = std::static_pointer_cast<LoopServerSocketChannel>(bound.channel());
  }
  void TearDown() override {
    std::error_code ignored;
    if (server_) server_->close().sync(ignored);
    if (group_) group_->shutdown_gracefully();
  }
  SocketAddress address() const { return *server_->local_address(); }
  // Each accepted connection's pipeline.
  virtual void init_child(Channel& ch) {
    kv::KvServerConfig config;
    config.idle_timeout = std::chrono::nanoseconds(idle_timeout_ns_.load());
    kv::init_server_pipeline(ch, store_, config);
  }

  kv::KvStore store_;
  // The idle timeout of the connections accepted from then on (0: none).
  std::atomic<std::int64_t> idle_timeout_ns_{0};
  std::unique_ptr<EventLoopGroup> group_;
  std::shared_ptr<LoopServerSocketChannel> server_;
};

TEST_P(KvTest, PutGetDelete) {
  kv::KvClient c(*group_, address());
  EXPECT_EQ(c.put("a", buffer_of("alpha")).get().status, kv::Status::ok);
  auto r = c.get("a").get();
  EXPECT_EQ(r.status, kv::Status::ok);
  EXPECT_EQ(text(r.value), "alpha");
  EXPECT_EQ(c.del("a").get().status, kv::Status::ok);
  EXPECT_EQ(c.get("a").get().status, kv::Status::not_found);
  EXPECT_EQ(c.del("a").get().status, kv::Status::not_found);
}

TEST_P(KvTest, PipelinedRequestsAnsweredInOrder) {
  kv::KvClient c(*group_, address());
  std::vector<std::future<kv::KvClient::Reply>> puts, gets;
  for (int i = 0; i < 200; ++i) {
    puts.push_back(c.put("k" + std::to_string(i), buffer_of("v" + std::to_string(i * i))));
  }
  for (int i = 0; i < 200; ++i) gets.push_back(c.get("k" + std::to_string(i)));
  for (auto& f : puts) EXPECT_EQ(f.get().status, kv::Status::ok);
  for (int i = 0; i < 200; ++i) {
    auto r = gets[static_cast<std::size_t>(i)].get();
    ASSERT_EQ(r.status, kv::Status::ok);
    EXPECT_EQ(text(r.value), "v" + std::to_string(i * i));
  }
  EXPECT_EQ(store_.size(), 200u);
}

TEST_P(KvTest, LargeValueLandsInTheCallersBuffer) {
  kv::KvClient c(*group_, address());
  std::string big(6 * 1024 * 1024 + 7, '\0');
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>((i * 131) >> 3);
  EXPECT_EQ(c.put("big", buffer_of(big)).get().status, kv::Status::ok);
  std::vector<std::byte> mine(8 * 1024 * 1024);
  auto into = ByteBuffer::wrap(std::span<std::byte>(mine));
  auto r = c.get("big", into).get();
  ASSERT_EQ(r.status, kv::Status::ok);
  // The reply is a view over the caller's own memory: nothing was copied elsewhere first.
  EXPECT_EQ(r.value.bytes().data(), mine.data());
  ASSERT_EQ(r.value.remaining(), big.size());
  EXPECT_TRUE(std::memcmp(mine.data(), big.data(), big.size()) == 0);
  // Too small a buffer: the value still arrives, in a buffer of its own.
  std::vector<std::byte> small(16);
  auto r2 = c.get("big", ByteBuffer::wrap(std::span<std::byte>(small))).get();
  EXPECT_NE(r2.value.bytes().data(), small.data());
  EXPECT_TRUE(text(r2.value) == big);
}

TEST_P(KvTest, ManyClientsShareTheStore) {
  std::vector<std::unique_ptr<kv::KvClient>> clients;
  for (int i = 0; i < 4; ++i) clients.push_back(std::make_unique<kv::KvClient>(*group_, address()));
  for (int i = 0; i < 4; ++i) {
    clients[static_cast<std::size_t>(i)]
        ->put("c" + std::to_string(i), buffer_of(std::string(1000, char('a' + i))))
        .get();
  }
  for (int i = 0; i < 4; ++i) {
    auto r = clients[static_cast<std::size_t>((i + 1) % 4)]->get("c" + std::to_string(i)).get();
    EXPECT_EQ(text(r.value), std::string(1000, char('a' + i)));
  }
}

TEST_P(KvTest, ServerGoneFailsPendingRequests) {
  EventLoopGroup::Options o;
  o.threads = 1;
  o.loop = options();
  EventLoopGroup client_group(o);
  kv::KvClient c(client_group, address());
  EXPECT_EQ(c.put("x", buffer_of("y")).get().status, kv::Status::ok);
  // Closing the server's loops closes its connections: the client sees the end of the stream,
  // and whatever it asks afterwards fails instead of waiting forever.
  server_->close().sync();
  server_.reset();
  group_->shutdown_gracefully();
  group_.reset();
  auto f = c.get("x");
  EXPECT_THROW(f.get(), std::system_error);
}

// The bytes of requests, as a client writes them.
void append(std::vector<std::byte>& out, const ByteBuffer& b) {
  auto s = b.bytes();
  out.insert(out.end(), s.begin(), s.end());
}
void append(std::vector<std::byte>& out, std::string_view s) {
  auto b = std::as_bytes(std::span(s));
  out.insert(out.end(), b.begin(), b.end());
}
std::vector<std::byte> request(kv::Op op, std::uint32_t id, std::string_view key,
                               std::string_view value = {}) {
  std::vector<std::byte> out;
  append(out, kv::encode(kv::RequestHeader{op, static_cast<std::uint32_t>(key.size()),
                                           static_cast<std::uint32_t>(value.size()), id}));
  append(out, key);
  append(out, value);
  return out;
}
std::vector<std::byte> response(kv::Status status, std::uint32_t id, std::string_view value = {}) {
  std::vector<std::byte> out;
  append(out, kv::encode(kv::ResponseHeader{status, static_cast<std::uint32_t>(value.size()), id}));
  append(out, value);
  return out;
}

// A bad frame (a key length of 0) after valid requests in the same write: the requests before it
// are answered, then the connection is closed.
TEST_P(KvTest, RequestsBeforeABadFrameAreAnsweredThenTheConnectionCloses) {
  test::PeerSocket peer(address());
  std::vector<std::byte> bytes = request(kv::Op::put, 1, "a", "alpha");
  auto get = request(kv::Op::get, 2, "a");
  bytes.insert(bytes.end(), get.begin(), get.end());
  append(bytes, kv::encode(kv::RequestHeader{kv::Op::get, 0, 0, 3}));
  peer.send_all(bytes);
  auto expected = response(kv::Status::ok, 1);
  auto second = response(kv::Status::ok, 2, "alpha");
  expected.insert(expected.end(), second.begin(), second.end());
  EXPECT_EQ(peer.recv_to_eof(), expected);
  EXPECT_EQ(store_.size(), 1u);
}

// VmRSS or VmHWM of this process, in bytes (0 if unknown).
std::size_t status_bytes(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field, 0) == 0) return std::stoull(line.substr(std::strlen(field))) * 1024;
  }
  return 0;
}

// Clients that pipeline tiny GETs of a large value and never read their replies: the server
// stops executing requests (and reading) when a connection's replies pass the high water mark,
// so its memory stays near the high water mark + 64 KiB per connection (docs/reliability.md, and the
// not yet executed requests of one read) instead of growing with every request it decoded.
// Once the clients read, every reply arrives intact and in order.
TEST_P(KvTest, ClientsThatPipelineAndNeverReadKeepTheServersMemoryBounded) {
  constexpr std::size_t clients = 20;
  constexpr std::size_t value_size = 1024;
  constexpr std::uint32_t requests = 40000;
  constexpr std::size_t reply_size = kv::header_size + value_size;
  std::string value(value_size, '\0');
  for (std::size_t i = 0; i < value_size; ++i) value[i] = static_cast<char>('A' + i % 53);
  store_.put("v", buffer_of(value));
  std::vector<std::byte> stream;
  for (std::uint32_t i = 0; i < requests; ++i) {
    auto r = request(kv::Op::get, i, "v");
    stream.insert(stream.end(), r.begin(), r.end());
  }
  // Reply i: the header (status ok, the value's length, id i), then the value.
  auto expected_byte = [&](std::size_t offset) {
    std::size_t i = offset / reply_size, k = offset % reply_size;
    if (k >= kv::header_size) return static_cast<std::uint8_t>(value[k - kv::header_size]);
    auto word = [&](std::size_t v) { return static_cast<std::uint8_t>(v >> (8 * (3 - k % 4))); };
    if (k >= 12) return word(i);
    if (k >= 4 && k < 8) return word(value_size);
    return std::uint8_t{0};
  };

  std::vector<std::unique_ptr<test::PeerSocket>> peers;
  // Reset the peak to the current RSS where the kernel allows it; else sample VmRSS.
  bool hwm = false;
  if (FILE* f = std::fopen("/proc/self/clear_refs", "w")) {
    hwm = std::fputs("5", f) >= 0;
    hwm = (std::fclose(f) == 0) && hwm;
  }
  const std::size_t before = status_bytes(hwm ? "VmHWM:" : "VmRSS:");
  std::size_t peak = before;
  for (std::size_t c = 0; c < clients; ++c)
    peers.push_back(std::make_unique<test::PeerSocket>(address()));
  std::vector<std::size_t> sent(clients, 0), received(clients, 0);
  auto send_some = [&](std::size_t c) {
    ssize_t n = ::send(peers[c]->fd(), stream.data() + sent[c], stream.size() - sent[c],
                       MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) sent[c] += static_cast<std::size_t>(n);
    return n > 0;
  };
  // Phase 1: write, never read, until every client has written everything or none can go on.
  for (;;) {
    bool progress = false, all_sent = true;
    for (std::size_t c = 0; c < clients; ++c) {
      if (sent[c] < stream.size()) progress = send_some(c) || progress;
      all_sent = all_sent && sent[c] == stream.size();
    }
    if (!hwm) peak = std::max(peak, status_bytes("VmRSS:"));
    if (all_sent) break;
    if (!progress) {
      std::vector<pollfd> p;
      for (std::size_t c = 0; c < clients; ++c) {
        if (sent[c] < stream.size()) p.push_back({peers[c]->fd(), POLLOUT, 0});
      }
      if (::poll(p.data(), p.size(), 1000) == 0) break;
    }
  }
  // Phase 2: read every reply (sending the rest meanwhile).
  std::vector<std::uint8_t> buf(1 << 16);
  std::size_t mismatches = 0, done = 0;
  const std::size_t total = std::size_t{requests} * reply_size;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (done < clients && std::chrono::steady_clock::now() < deadline) {
    std::vector<pollfd> p;
    for (std::size_t c = 0; c < clients; ++c) {
      short events = static_cast<short>((received[c] < total ? POLLIN : 0) |
                                        (sent[c] < stream.size() ? POLLOUT : 0));
      p.push_back({events ? peers[c]->fd() : -1, events, 0});
    }
    if (::poll(p.data(), p.size(), 1000) <= 0) continue;
    for (std::size_t c = 0; c < clients; ++c) {
      if ((p[c].revents & POLLOUT) && sent[c] < stream.size()) send_some(c);
      if (!(p[c].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t n = ::recv(peers[c]->fd(), buf.data(), buf.size(), MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        ADD_FAILURE() << "client " << c << ": connection ended after " << received[c] << " bytes";
        received[c] = total;
        ++done;
        continue;
      }
      for (ssize_t i = 0; i < n; ++i) {
        if (buf[static_cast<std::size_t>(i)] !=
            expected_byte(received[c] + static_cast<std::size_t>(i)))
          ++mismatches;
      }
      if (n > 0) received[c] += static_cast<std::size_t>(n);
      if (received[c] == total) ++done;
    }
    if (!hwm) peak = std::max(peak, status_bytes("VmRSS:"));
  }
  EXPECT_EQ(done, clients) << "not every reply arrived";
  EXPECT_EQ(mismatches, 0u);
  if (hwm) peak = status_bytes("VmHWM:");
  const std::size_t growth = peak > before ? peak - before : 0;
  // Per connection: the high water mark + 64 KiB of queued replies, the requests of one read
  // not executed yet, buffers and bookkeeping; generously.
  const std::size_t bound =
      clients * (WriteBufferWaterMark{}.high + (64u << 10) + (1u << 20)) + (16u << 20);
  RecordProperty("rss_growth_kib", std::to_string(growth / 1024));
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // A sanitizer's allocator keeps freed blocks in quarantine (hundreds of MB for the replies
  // written here): RSS says nothing about the server's own memory, only the replies are checked.
  (void)bound;
#else
  EXPECT_LT(growth, bound) << "RSS grew by " << growth / 1024 << " KiB for " << clients
                           << " connections";
#endif
}

// A connection on which nothing happens is closed after the idle timeout.
TEST_P(KvTest, AnIdleConnectionIsClosedAfterTheIdleTimeout) {
  idle_timeout_ns_ = std::chrono::nanoseconds(std::chrono::milliseconds(200)).count();
  test::PeerSocket peer(address());
  peer.send_all(request(kv::Op::put, 1, "k", "v"));
  EXPECT_EQ(peer.recv_exact(kv::header_size), response(kv::Status::ok, 1));
  // Then silence: the server closes (recv_to_eof throws after its 20 s timeout otherwise).
  EXPECT_TRUE(peer.recv_to_eof().empty());
}

// The client shuts its output down right after its requests and only then reads: it still gets
// every reply, then EOF. The replies are far more than the socket buffers hold, so the server
// still has requests to execute and replies to send after the last request arrived; the
// requests fill whole 64 KiB reads, so the EOF may come in the same read batch as the last ones.
TEST_P(KvTest, RequestsBeforeTheClientsEofAreAnsweredThenTheConnectionCloses) {
  const std::string key(16, 'k');  // a GET is then 32 bytes: 2048 of them fill 64 KiB
  const std::string value(1024, 'v');
  constexpr std::uint32_t gets = 16 * 2048;
  test::PeerSocket peer(address());
  peer.send_all(request(kv::Op::put, 0, key, value));
  ASSERT_EQ(peer.recv_exact(kv::header_size), response(kv::Status::ok, 0));
  std::vector<std::byte> bytes;
  for (std::uint32_t i = 1; i <= gets; ++i) {
    auto get = request(kv::Op::get, i, key);
    bytes.insert(bytes.end(), get.begin(), get.end());
  }
  auto sender = std::async(std::launch::async, [&] {
    peer.send_all(bytes);
    return ::shutdown(peer.fd(), SHUT_WR);
  });
  // Reading starts once everything is sent, or when the sender is blocked by what the server
  // holds back (it then goes on as the replies are read).
  sender.wait_for(std::chrono::seconds(2));
  auto got = peer.recv_to_eof();
  EXPECT_EQ(test::wait_for(sender), 0);
  std::vector<std::byte> expected;
  for (std::uint32_t i = 1; i <= gets; ++i) {
    auto r = response(kv::Status::ok, i, value);
    expected.insert(expected.end(), r.begin(), r.end());
  }
  ASSERT_EQ(got.size(), expected.size());
  EXPECT_TRUE(got == expected);
}

TEST(KvServerArgs, DefaultsEveryOptionAndBadValues) {
  auto parse = [](std::vector<std::string_view> args) { return kv::parse_server_args(args); };
  auto r = parse({});
  ASSERT_TRUE(r.options);
  EXPECT_EQ(r.options->port, 7070);
  EXPECT_EQ(r.options->bind, "127.0.0.1");
  EXPECT_EQ(r.options->idle_timeout_seconds, 60.0);
  r = parse({"--port", "0", "--idle-timeout=2.5", "--threads", "2", "--backend", "epoll"});
  ASSERT_TRUE(r.options) << r.error;
  EXPECT_EQ(r.options->port, 0);
  EXPECT_EQ(r.options->idle_timeout_seconds, 2.5);
  EXPECT_EQ(r.options->threads, 2u);
  EXPECT_TRUE(parse({"--help"}).help);
  EXPECT_NE(kv::server_usage().find("--idle-timeout"), std::string::npos);
  r = parse({"--idle-timeout", "-1"});
  EXPECT_FALSE(r.options);
  EXPECT_EQ(r.error, "invalid --idle-timeout '-1': expected seconds, 0-86400");
  for (auto args : std::vector<std::vector<std::string_view>>{
           {"--idle-timeout"}, {"--idle-timeout", "soon"}, {"--port", "70000"}, {"--verbose"}}) {
    r = parse(args);
    EXPECT_FALSE(r.options) << args[0];
    EXPECT_FALSE(r.error.empty()) << args[0];
  }
}

NIOX_INSTANTIATE_BACKENDS(KvTest);

// The kv example over TLS: an SslHandler in front of the kv pipeline on both sides.
class KvTlsTest : public KvTest {
 protected:
  void init_child(Channel& ch) override {
    ch.pipeline().add_last("ssl", std::make_shared<SslHandler>(server_ssl_.new_engine()));
    kv::init_server_pipeline(ch, store_);
  }
  SslContext client_ssl() const {
    return SslContextBuilder::for_client()
        .trust_manager(Pem::memory(ca_.certificate_pem()))
        .build();
  }

  test::TestCertificateAuthority ca_;
  test::PemPair leaf_ = ca_.issue();  // for localhost and 127.0.0.1
  SslContext server_ssl_ =
      SslContextBuilder::for_server(Pem::memory(leaf_.certificate), Pem::memory(leaf_.private_key))
          .build();
};

TEST_P(KvTlsTest, PutGetDeleteOverTls) {
  kv::KvClient c(*group_, address(), client_ssl());
  const std::string big(300'000, 'v');
  EXPECT_EQ(c.put("a", buffer_of("alpha")).get().status, kv::Status::ok);
  EXPECT_EQ(c.put("big", buffer_of(big)).get().status, kv::Status::ok);
  auto r = c.get("a").get();
  ASSERT_EQ(r.status, kv::Status::ok);
  EXPECT_EQ(text(r.value), "alpha");
  r = c.get("big").get();
  ASSERT_EQ(r.status, kv::Status::ok);
  EXPECT_TRUE(text(r.value) == big);
  EXPECT_EQ(c.del("a").get().status, kv::Status::ok);
  EXPECT_EQ(c.get("a").get().status, kv::Status::not_found);
}

TEST_P(KvTlsTest, UntrustedServerOrWrongNameIsRefused) {
  auto system_trust = SslContextBuilder::for_client().build();
  EXPECT_THROW(kv::KvClient(*group_, address(), system_trust), std::system_error);
  try {
    kv::KvClient c(*group_, address(), client_ssl(), "kv.example.com");
    FAIL() << "a certificate for localhost passed for kv.example.com";
  } catch (const std::system_error& e) {
    EXPECT_TRUE(is_certificate_verify_error(e.code())) << e.what();
  }
  // The server is unharmed.
  kv::KvClient ok(*group_, address(), client_ssl(), "localhost");
  EXPECT_EQ(ok.put("k", buffer_of("v")).get().status, kv::Status::ok);
}

NIOX_INSTANTIATE_BACKENDS(KvTlsTest);

}  // namespace

#ifdef NIOX_COROUTINE_KV_CLIENT_PROGRAM
// niox-coroutine-kv-client against the same server: a value it puts is read back by KvClient,
// and its `check` pipelines hundreds of puts and gets with when_all and verifies each value.
TEST_P(KvTest, TheCoroutineClientPipelinesAgainstTheServer) {
  const std::string to = "127.0.0.1:" + std::to_string(address().inet().port());
  test::ChildProcess put({NIOX_COROUTINE_KV_CLIENT_PROGRAM, "--to", to, "put", "co", "routine"});
  EXPECT_EQ(put.wait(), 0) << put.read_stderr();
  kv::KvClient client(*group_, address());
  EXPECT_EQ(text(client.get("co").get().value), "routine");
  test::ChildProcess get({NIOX_COROUTINE_KV_CLIENT_PROGRAM, "--to", to, "get", "co"});
  EXPECT_EQ(get.read_line().value_or(""), "routine");
  EXPECT_EQ(get.wait(), 0);
  test::ChildProcess missing({NIOX_COROUTINE_KV_CLIENT_PROGRAM, "--to", to, "get", "nothing"});
  EXPECT_EQ(missing.wait(), 1);
  test::ChildProcess check({NIOX_COROUTINE_KV_CLIENT_PROGRAM, "--to", to, "check", "500"});
  EXPECT_EQ(check.read_line().value_or(""),
            "500 puts and 500 gets pipelined, every value verified");
  EXPECT_EQ(check.wait(), 0) << check.read_stderr();
  EXPECT_EQ(text(client.get("key-499").get().value), "value-499");
}
#endif
