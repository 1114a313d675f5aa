// Setups several transport tests share: a server with one handler in every accepted pipeline,
// and a connection with many writes pending when it fails.
#pragma once

#include "transport_sockets.hpp"

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <thread>

namespace niox::test {

// Starts `server` with `handler`, the same one, in every accepted pipeline; returns the
// address to connect to.
inline SocketAddress serve(TestServer& server, std::shared_ptr<ChannelHandler> handler,
                           const SocketAddress& where = InetSocketAddress::loopback_v4(0)) {
  server.bootstrap().child_handler(
      init([handler](Channel& ch) { ch.pipeline().add_last(handler); }));
  return server.start(where);
}

// Starts `server` echoing: every accepted pipeline gets an EchoHandler of its own.
inline SocketAddress serve_echo(TestServer& server) {
  server.bootstrap().child_handler(
      init([](Channel& ch) { ch.pipeline().add_last(std::make_shared<EchoHandler>()); }));
  return server.start(InetSocketAddress::loopback_v4(0));
}

// A server handler that, once its channel is active, queues `writes` flushed 64 KiB writes at
// once and counts how they complete; the test then breaks the connection under them.
class PendingWrites {
 public:
  explicit PendingWrites(int writes) : writes_(writes) {
    handler_->on_active = [this](ChannelHandlerContext& ctx) {
      auto payload = ByteBuffer::allocate(64 * 1024);
      for (int i = 0; i < writes_; ++i) {
        ctx.write_and_flush(payload.duplicate()).add_listener([this](const std::error_code& ec) {
          ++completions_;
          if (ec) ++failures_;
        });
      }
      ctx.channel().close_future().add_listener(
          [this](const std::error_code&) { closed_.set_value(); });
      queued_.set_value();
    };
    handler_->on_exception = [](ChannelHandlerContext&, std::exception_ptr) {};
  }

  const std::shared_ptr<LambdaHandler>& handler() const { return handler_; }
  void wait_queued() {
    auto f = queued_.get_future();
    wait_for(f);
  }
  // Until the channel has closed and every write completed (20 s at most), then a little
  // longer: long enough for a write completed twice to show.
  void wait_closed_and_completed() {
    auto f = closed_.get_future();
    wait_for(f);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (completions_.load() < writes_ && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  int completions() const { return completions_.load(); }
  int failures() const { return failures_.load(); }

 private:
  const int writes_;
  std::atomic<int> completions_{0}, failures_{0};
  std::promise<void> queued_, closed_;
  std::shared_ptr<LambdaHandler> handler_ = std::make_shared<LambdaHandler>();
};

}  // namespace niox::test
