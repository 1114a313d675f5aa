#include <niox/channels/pipe.hpp>
#include <niox/channels/selector.hpp>
#include <niox/channels/server_socket_channel.hpp>

#include "support/channels_support.hpp"

#include <thread>

namespace niox {
namespace {

class SelectorTest : public test::FdLeakCheck {};

TEST_F(SelectorTest, AcceptAndReadReadiness) {
  auto selector = Selector::open();
  auto server = ServerSocketChannel::open();
  server.bind(InetSocketAddress::loopback_v4(0));
  server.configure_blocking(false);
  int tag = 7;
  auto& skey = server.register_with(selector, SelectionKey::OP_ACCEPT, &tag);
  EXPECT_EQ(skey.attachment_as<int>(), &tag);
  EXPECT_EQ(server.key_for(selector), &skey);
  EXPECT_EQ(selector.select_now(), 0);
  EXPECT_TRUE(selector.selected_keys().empty());

  auto client = SocketChannel::open(*server.local_address());
  ASSERT_EQ(selector.select(std::chrono::milliseconds(5000)), 1);
  ASSERT_EQ(selector.selected_keys().size(), 1u);
  EXPECT_EQ(selector.selected_keys()[0], &skey);
  EXPECT_TRUE(skey.is_acceptable());
  EXPECT_FALSE(skey.is_readable());
  selector.selected_keys().clear();
  auto peer = server.accept();
  ASSERT_TRUE(peer);
  peer->configure_blocking(false);
  auto& pkey = peer->register_with(selector, SelectionKey::OP_READ);
  EXPECT_EQ(selector.select_now(), 0);
  auto msg = ByteBuffer::wrap(std::string_view("hey"));
  client.write(msg);
  ASSERT_EQ(selector.select(std::chrono::milliseconds(5000)), 1);
  EXPECT_EQ(selector.selected_keys()[0], &pkey);
  EXPECT_EQ(pkey.ready_ops(), SelectionKey::OP_READ);
  // Level-triggered and not removed: selecting again does not count it as updated.
  EXPECT_EQ(selector.select_now(), 0);
  EXPECT_EQ(selector.selected_keys().size(), 1u);
  // Adding write interest updates the ready set of the still-selected key (or-ed, like Java).
  pkey.interest_ops_or(SelectionKey::OP_WRITE);
  EXPECT_EQ(selector.select_now(), 1);
  EXPECT_EQ(pkey.ready_ops(), SelectionKey::OP_READ | SelectionKey::OP_WRITE);
  EXPECT_EQ(selector.selected_keys().size(), 1u);
  EXPECT_EQ(selector.keys().size(), 2u);
  EXPECT_THROW(peer->configure_blocking(true), IllegalBlockingModeException);
  EXPECT_THROW(pkey.interest_ops(SelectionKey::OP_ACCEPT), IllegalArgumentException);
}

TEST_F(SelectorTest, RegisterNeedsNonBlocking) {
  auto selector = Selector::open();
  auto pipe = Pipe::open();
  EXPECT_THROW(pipe.source().register_with(selector, SelectionKey::OP_READ),
               IllegalBlockingModeException);
  pipe.source().configure_blocking(false);
  auto& k1 = pipe.source().register_with(selector, SelectionKey::OP_READ);
  int a = 1;
  auto& k2 = selector.register_channel(pipe.source(), SelectionKey::OP_READ, &a);
  EXPECT_EQ(&k1, &k2);  // one key per channel and selector
  EXPECT_EQ(k1.attachment(), &a);
}

TEST_F(SelectorTest, TimeoutAndWakeupFromAnotherThread) {
  auto selector = Selector::open();
  EXPECT_EQ(selector.select(std::chrono::milliseconds(1)), 0);
  std::thread waker([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    selector.wakeup();
  });
  EXPECT_EQ(selector.select(), 0);  // returns because of wakeup, nothing selected
  waker.join();
  // A wakeup before the select makes the next one return at once.
  selector.wakeup();
  selector.wakeup();
  EXPECT_EQ(selector.select(), 0);
  EXPECT_EQ(selector.select_now(), 0);
}

TEST_F(SelectorTest, CancelCloseAndInterestZero) {
  auto selector = Selector::open();
  auto pipe = Pipe::open();
  pipe.source().configure_blocking(false);
  pipe.sink().configure_blocking(false);
  auto& rk = pipe.source().register_with(selector, SelectionKey::OP_READ);
  auto& wk = pipe.sink().register_with(selector, SelectionKey::OP_WRITE);
  EXPECT_EQ(selector.select_now(), 1);  // the sink is writable
  EXPECT_TRUE(wk.is_writable());
  selector.selected_keys().clear();
  wk.interest_ops(0);
  EXPECT_EQ(selector.select_now(), 0);
  wk.cancel();
  EXPECT_FALSE(wk.is_valid());
  EXPECT_THROW(wk.interest_ops(), CancelledKeyException);
  EXPECT_FALSE(pipe.sink().is_registered());
  EXPECT_EQ(selector.keys().size(), 1u);
  // The source's peer closes: readable (end of stream), and closing the source cancels its key.
  pipe.sink().close();
  EXPECT_EQ(selector.select_now(), 1);
  EXPECT_TRUE(rk.is_readable());
  pipe.source().close();
  EXPECT_FALSE(rk.is_valid());
  EXPECT_EQ(selector.select_now(), 0);
  EXPECT_TRUE(selector.selected_keys().empty());  // cancelled keys leave the selected set
  EXPECT_TRUE(selector.keys().empty());
  selector.close();
  selector.close();
  EXPECT_FALSE(selector.is_open());
  EXPECT_THROW(selector.select_now(), ClosedSelectorException);
}

TEST_F(SelectorTest, ChannelMovesWithItsKeyAndSelectorOutlivedByChannel) {
  auto pipe = Pipe::open();
  Pipe::SourceChannel moved;
  {
    auto selector = Selector::open();
    pipe.source().configure_blocking(false);
    auto& key = pipe.source().register_with(selector, SelectionKey::OP_READ);
    moved = std::move(pipe.source());
    EXPECT_EQ(&key.channel(), &moved);
    auto msg = ByteBuffer::wrap(std::string_view("m"));
    pipe.sink().write(msg);
    ASSERT_EQ(selector.select_now(), 1);
    EXPECT_EQ(&selector.selected_keys()[0]->channel(), &moved);
  }
  // The selector is gone: the channel is no longer registered and can block again.
  EXPECT_FALSE(moved.is_registered());
  moved.configure_blocking(true);
  auto dst = ByteBuffer::allocate(1);
  EXPECT_EQ(moved.read(dst), 1);
}

}  // namespace
}  // namespace niox
