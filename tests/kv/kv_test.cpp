// The kv example end to end, in-process: a real server (ServerBootstrap + the kv pipeline) and
// KvClient over loopback, on each backend.
#include "kv_client.hpp"
#include "kv_server.hpp"
#include "support/backends.hpp"

#include <niox/transport/bootstrap.hpp>

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

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
    b.group(*group_).child_handler(std::make_shared<ChannelInitializer>(
        [this](Channel& ch) { kv::init_server_pipeline(ch, store_); }));
    auto bound = b.bind(InetSocketAddress::loopback_v4(0));
    bound.sync();
    server_ = std::static_pointer_cast<LoopServerSocketChannel>(bound.channel());
  }
  void TearDown() override {
    if (server_) await_future(server_->close());
    if (group_) group_->shutdown_gracefully();
  }
  SocketAddress address() const { return *server_->local_address(); }

  kv::KvStore store_;
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
    clients[static_cast<std::size_t>(i)]->put("c" + std::to_string(i), buffer_of(std::string(1000, char('a' + i)))).get();
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
  await_future(server_->close());
  server_.reset();
  group_->shutdown_gracefully();
  group_.reset();
  auto f = c.get("x");
  EXPECT_THROW(f.get(), std::system_error);
}

NIOX_INSTANTIATE_BACKENDS(KvTest);

}  // namespace
