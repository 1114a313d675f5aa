// niox-file-server's transport handler on an EmbeddedChannel (manual clock, scripted writes),
// and the idle lists its loop sweeps. The same handler on real sockets and every backend:
// file_server_program_test.cpp.
#include "http_server_handler.hpp"
#include "idle_connections.hpp"
#include "temp_tree.hpp"

#include <niox/transport/embedded_channel.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace niox::http {
namespace {

using namespace std::chrono_literals;
using Verdict = IdleConnections::Verdict;
using List = IdleConnections::List;

// ---- IdleConnections ---------------------------------------------------------------------------

struct Conn : IdleConnections::Entry {
  int id = 0;
};

// Sweeps at `now`, answering for each entry from `answers` (close by default, as an idle
// connection would be), and returns the ids asked about, in order.
std::vector<std::pair<int, bool>> sweep(IdleConnections& idle, std::uint32_t now,
                                        std::map<int, Verdict> answers = {}) {
  std::vector<std::pair<int, bool>> asked;
  idle.sweep(now, [&](IdleConnections::Entry& e, bool expired) {
    auto& c = static_cast<Conn&>(e);
    asked.emplace_back(c.id, expired);
    auto it = answers.find(c.id);
    Verdict v = it == answers.end() ? Verdict::close : it->second;
    if (v == Verdict::close) idle.remove(c);
    return v;
  });
  return asked;
}

TEST(IdleConnections, WaitingConnectionsExpireInTheOrderOfTheirLastActivity) {
  IdleConnections idle(100);
  Conn a, b, c;
  a.id = 1, b.id = 2, c.id = 3;
  idle.touch(a, 0);
  idle.touch(b, 10);
  idle.touch(c, 20);
  idle.touch(a, 30);  // active again: now the newest
  EXPECT_TRUE(sweep(idle, 109).empty());
  using Asked = std::vector<std::pair<int, bool>>;
  EXPECT_EQ(sweep(idle, 110), (Asked{{2, true}}));
  EXPECT_EQ(sweep(idle, 200), (Asked{{3, true}, {1, true}}));
  EXPECT_EQ(idle.size(List::waiting), 0u);
}

TEST(IdleConnections, TimesWrapAroundTheirThirtyTwoBits) {
  IdleConnections idle(100);
  Conn a;
  a.id = 1;
  idle.touch(a, 0xFFFFFFF0u);
  EXPECT_TRUE(sweep(idle, 50).empty());   // 66 ms later
  EXPECT_EQ(sweep(idle, 90).size(), 1u);  // 106 ms later
}

TEST(IdleConnections, AWritingConnectionIsAskedEverySweepAndIdleOnlyOnceDrained) {
  IdleConnections idle(100);
  Conn a;
  a.id = 1;
  idle.writing(a, 0);
  idle.touch(a, 50);  // a read while writing: still writing
  EXPECT_EQ(a.list, List::writing);
  using Asked = std::vector<std::pair<int, bool>>;
  EXPECT_EQ(sweep(idle, 60, {{1, Verdict::writing}}), (Asked{{1, false}}));
  // Drained at 120: idle from then, not from its last read.
  EXPECT_EQ(sweep(idle, 120, {{1, Verdict::drained}}), (Asked{{1, false}}));
  EXPECT_EQ(a.list, List::waiting);
  EXPECT_TRUE(sweep(idle, 219).empty());
  EXPECT_EQ(sweep(idle, 220), (Asked{{1, true}}));
}

TEST(IdleConnections, AWritingConnectionWhosePeerTakesBytesIsKept) {
  IdleConnections idle(100);
  Conn a;
  a.id = 1;
  idle.writing(a, 0);
  using Asked = std::vector<std::pair<int, bool>>;
  EXPECT_EQ(sweep(idle, 100, {{1, Verdict::progress}}), (Asked{{1, true}}));
  EXPECT_EQ(sweep(idle, 150, {{1, Verdict::writing}}), (Asked{{1, false}}));  // 50 since
  EXPECT_EQ(sweep(idle, 200), (Asked{{1, true}}));                            // closed
  EXPECT_EQ(idle.size(List::writing), 0u);
}

TEST(IdleConnections, ARemovedConnectionIsNeverAsked) {
  IdleConnections idle(100);
  Conn a, b;
  a.id = 1, b.id = 2;
  idle.touch(a, 0);
  idle.writing(b, 0);
  idle.remove(a);
  idle.remove(b);
  idle.remove(b);  // twice: harmless
  EXPECT_TRUE(sweep(idle, 1000).empty());
}

// ---- HttpServerHandler -------------------------------------------------------------------------

constexpr auto kTimeout = 800ms;

class HttpServerHandlerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tree_.write("a.txt", "0123456789abcdefghij");
    root_ = std::make_unique<FileRoot>(tree_.path().string());
    responder_ = std::make_unique<StaticFileResponder>(*root_);
    ch_ = std::make_shared<EmbeddedChannel>();  // shared: a closing handler locks a weak_ptr to it
    loop_ = std::make_unique<HttpServerLoop>(ch_->event_loop(), *responder_, HttpDecoderConfig{},
                                             nullptr, kTimeout);
    handler_ = std::make_shared<HttpServerHandler>(*loop_);
    // The pretend kernel takes everything, unless a test holds the writes back.
    ch_->set_write_script([this](std::span<const iovec>, std::size_t bytes) -> long {
      return accept_writes_ ? static_cast<long>(bytes) : 0;
    });
    ch_->pipeline().add_last("http", handler_);
  }
  void TearDown() override {
    ch_.reset();  // the handler leaves its loop's lists before the loop goes
    handler_.reset();
    loop_.reset();
  }

  std::string written() const {
    const auto& w = ch_->written_bytes();
    return {reinterpret_cast<const char*>(w.data()), w.size()};
  }
  void receive(std::string_view bytes) { ch_->simulate_read(ByteBuffer::wrap(bytes)); }

  testing::TempTree tree_;
  std::unique_ptr<FileRoot> root_;
  std::unique_ptr<StaticFileResponder> responder_;
  std::shared_ptr<EmbeddedChannel> ch_;
  std::unique_ptr<HttpServerLoop> loop_;
  std::shared_ptr<HttpServerHandler> handler_;
  bool accept_writes_ = true;
};

// Between keep-alive requests a connection holds the handler alone: no request state, no
// decoder, no buffer, no timer.
TEST_F(HttpServerHandlerTest, AnAnsweredRequestLeavesNothingButTheHandler) {
  static_assert(sizeof(HttpServerHandler) <= 56);
  EXPECT_FALSE(handler_->holds_exchange());
  receive("GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n");
  EXPECT_TRUE(written().starts_with("HTTP/1.1 200 OK")) << written();
  EXPECT_TRUE(written().ends_with("0123456789abcdefghij")) << written();
  EXPECT_FALSE(handler_->holds_exchange());
  EXPECT_TRUE(ch_->is_open());
}

// A client that asks to close after a bodiless request, with nothing behind it, sends nothing
// more: the connection closes once the response is written, without a lingering close (no
// FIN first, no reading until the client's, no timer). A response the flush wrote whole is
// followed by the close in the same call, as nginx does: a turn later the client has often
// closed first, and its side keeps the TIME_WAIT.
TEST_F(HttpServerHandlerTest, AConnectionCloseRequestIsClosedOnceAnswered) {
  // Looks at the channel as the read event returns, before any task of the loop runs.
  struct OpenAfterRead : ChannelInboundHandlerAdapter {
    void channel_read(ChannelHandlerContext& ctx, Message&& msg) override {
      ctx.fire_channel_read(std::move(msg));
      open = ctx.channel().is_open();
    }
    bool open = true;
  };
  auto probe = std::make_shared<OpenAfterRead>();
  ch_->pipeline().add_first("probe", probe);
  receive("GET /a.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
  EXPECT_TRUE(written().ends_with("0123456789abcdefghij")) << written();
  EXPECT_FALSE(probe->open) << "written within the flush, but closed only a turn later";
  EXPECT_FALSE(ch_->is_open());
  EXPECT_FALSE(ch_->output_shutdown_done())
      << "a lingering close for a request that asked to close";
}

// The same response, when the socket takes it later: nothing is read meanwhile, and the close
// comes once it is written.
TEST_F(HttpServerHandlerTest, AConnectionCloseResponseStillLeavingIsClosedOnceWritten) {
  accept_writes_ = false;
  receive("GET /a.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
  ch_->run_pending_tasks();
  EXPECT_TRUE(ch_->is_open());
  EXPECT_FALSE(ch_->config().is_auto_read()) << "still reading while the last response leaves";
  accept_writes_ = true;
  ch_->signal_writable();
  ch_->run_pending_tasks();
  EXPECT_TRUE(written().ends_with("0123456789abcdefghij")) << written();
  EXPECT_FALSE(ch_->is_open());
  EXPECT_FALSE(ch_->output_shutdown_done())
      << "a lingering close for a request that asked to close";
}

// When the client may still send, the close lingers (its output is shut down first): bytes
// behind the request, a request body, or a response the server ends the connection with.
TEST_F(HttpServerHandlerTest, AConnectionCloseWithInputStillToComeLingers) {
  for (std::string_view request :
       {std::string_view("GET /a.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\nGET /"),
        std::string_view("GET /a.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n"
                         "Content-Length: 5\r\n\r\n12"),
        std::string_view("GET /a.txt HTTP/1.1\r\nHost: t\r\nX: \x01\r\n\r\n")}) {
    SCOPED_TRACE(request);
    TearDown();
    SetUp();
    receive(request);
    ch_->run_pending_tasks();
    EXPECT_TRUE(written().starts_with("HTTP/1.1 ")) << written();
    EXPECT_TRUE(ch_->output_shutdown_done()) << "closed without a lingering close";
    EXPECT_TRUE(ch_->config().is_auto_read()) << "a lingering close that does not read";
  }
}

// A lingering close whose client ends its side while the response still leaves: the response
// is written whole, then the FIN, then the close; nothing is cut off.
TEST_F(HttpServerHandlerTest, AClientEndingItsSideDuringALingeringCloseGetsTheWholeResponse) {
  ch_->config().set_allow_half_closure(true);
  accept_writes_ = false;
  receive("GET /a.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\nContent-Length: 5\r\n\r\n12");
  ch_->simulate_input_shutdown();
  ch_->run_pending_tasks();
  EXPECT_TRUE(ch_->is_open()) << "closed with the response still unwritten";
  accept_writes_ = true;
  ch_->signal_writable();
  ch_->run_pending_tasks();
  EXPECT_TRUE(written().ends_with("0123456789abcdefghij")) << written();
  EXPECT_TRUE(ch_->output_shutdown_done());
  EXPECT_FALSE(ch_->is_open());
}

TEST_F(HttpServerHandlerTest, AHalfReadRequestHoldsItsStateUntilAnswered) {
  receive("GET /a.txt HTTP/1.1\r\nHo");
  EXPECT_TRUE(handler_->holds_exchange());
  EXPECT_TRUE(written().empty());
  receive("st: t\r\n\r\n");
  EXPECT_TRUE(written().starts_with("HTTP/1.1 200 OK")) << written();
  EXPECT_FALSE(handler_->holds_exchange());
}

TEST_F(HttpServerHandlerTest, AnIdleKeepAliveConnectionIsClosedAtItsTimeout) {
  receive("GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n");
  ch_->advance_time(kTimeout - 50ms);
  EXPECT_TRUE(ch_->is_open());
  receive("GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n");  // active again: the timeout restarts
  ch_->advance_time(kTimeout - 50ms);
  EXPECT_TRUE(ch_->is_open());
  ch_->advance_time(kTimeout / 4);  // past the timeout and one sweep period
  EXPECT_FALSE(ch_->is_open());
}

TEST_F(HttpServerHandlerTest, AConnectionThatNeverSendsIsClosedAtTheTimeout) {
  ch_->advance_time(kTimeout + kTimeout / 4);
  EXPECT_FALSE(ch_->is_open());
  EXPECT_TRUE(written().empty());
}

// The timeout starts when the response has gone out, not when the request came in.
TEST_F(HttpServerHandlerTest, TheIdleTimeStartsWhenTheResponseHasDrained) {
  accept_writes_ = false;
  receive("GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n");
  EXPECT_TRUE(handler_->holds_exchange());  // writing: it keeps what it checks progress with
  ch_->advance_time(kTimeout / 2);
  accept_writes_ = true;
  ch_->signal_writable();
  ch_->advance_time(kTimeout / 4);  // a sweep sees it drained
  EXPECT_TRUE(written().ends_with("0123456789abcdefghij")) << written();
  EXPECT_FALSE(handler_->holds_exchange());
  ch_->advance_time(kTimeout - kTimeout / 4);
  EXPECT_TRUE(ch_->is_open()) << "closed before a whole timeout had passed since it drained";
  ch_->advance_time(kTimeout / 2);
  EXPECT_FALSE(ch_->is_open());
}

// A response the peer stops taking: nothing moves for the whole timeout (an EmbeddedChannel has
// no TCP progress to show), so the connection is closed although it still has bytes to write.
TEST_F(HttpServerHandlerTest, AResponseThePeerStopsTakingIsClosedAtTheTimeout) {
  accept_writes_ = false;
  receive("GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n");
  ch_->advance_time(kTimeout - 50ms);
  EXPECT_TRUE(ch_->is_open());
  ch_->advance_time(kTimeout / 4 + 50ms);
  EXPECT_FALSE(ch_->is_open());
}

// A head trickling in a byte at a time is never idle, but it is closed once it has been
// incomplete for the timeout.
TEST_F(HttpServerHandlerTest, AHeadStillIncompleteAfterTheTimeoutIsClosed) {
  const std::string head = "GET /a.txt HTTP/1.1\r\nHost: t\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaa";
  std::size_t sent = 0;
  for (; sent < head.size() && ch_->is_open(); ++sent) {
    receive(head.substr(sent, 1));
    ch_->advance_time(100ms);
  }
  EXPECT_FALSE(ch_->is_open());
  EXPECT_LT(sent, head.size());
  EXPECT_GE(sent, 8u);  // not before the timeout: 8 bytes took 800 ms
  EXPECT_TRUE(written().empty());
}

TEST_F(HttpServerHandlerTest, NoTimeoutMeansNeverClosedForIdleness) {
  ch_.reset();
  handler_.reset();
  loop_.reset();
  ch_ = std::make_unique<EmbeddedChannel>();
  loop_ = std::make_unique<HttpServerLoop>(ch_->event_loop(), *responder_, HttpDecoderConfig{},
                                           nullptr, std::chrono::nanoseconds::zero());
  handler_ = std::make_shared<HttpServerHandler>(*loop_);
  ch_->set_write_script(
      [](std::span<const iovec>, std::size_t bytes) -> long { return static_cast<long>(bytes); });
  ch_->pipeline().add_last("http", handler_);
  receive("GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n");
  ch_->advance_time(24h);
  EXPECT_TRUE(ch_->is_open());
  EXPECT_EQ(ch_->event_loop().scheduled_tasks(), 0u);
}

}  // namespace
}  // namespace niox::http
