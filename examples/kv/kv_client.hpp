// The kv example's client: one connection, requests from any thread, pipelined (each call
// returns at once with a future), replies matched in order.
//
//   EventLoopGroup group(1);
//   KvClient client(group, InetSocketAddress::loopback_v4(7070));
//   client.put("k", ByteBuffer::wrap(text)).get();
//   auto big = ByteBuffer::allocate(8 << 20);
//   KvClient::Reply r = client.get("k", big).get();   // value scattered straight into `big`
//
// Buffers: put()'s value is written as it is (no copy); the caller keeps its memory alive and
// unchanged until the future is ready (an allocated ByteBuffer does so by itself). get()'s `into`
// receives the value directly from the socket's receive buffers — no intermediate copy — when
// its [position, limit) is large enough, else the value gets a buffer of its own; the reply's
// `value` is a view over the bytes written, in `into` or in that buffer.
//
// TLS: given a client SslContext, the connection is TLS (an SslHandler first in its pipeline)
// and the constructor returns once the handshake is done, throwing if it failed (an
// untrusted certificate, a name or address the certificate does not cover).
#pragma once

#include "kv_protocol.hpp"

#include <niox/channels/socket_address.hpp>
#include <niox/loop/event_loop_group.hpp>
#include <niox/ssl/ssl_context.hpp>
#include <niox/transport/channel.hpp>

#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <string>

namespace niox::kv {

class KvClient {
 public:
  struct Reply {
    Status status = Status::ok;
    ByteBuffer value;  // GET: the value's bytes ([position, limit)); empty otherwise
  };

  // Connects (blocking; not on one of `group`'s loops). Throws std::system_error. `group` must
  // outlive the client.
  // With a valid `tls` context the connection is TLS, verified for `tls_host` (a name or an
  // address; empty: the server's address).
  KvClient(EventLoopGroup& group, const SocketAddress& server, const SslContext& tls = {},
           const std::string& tls_host = {});
  // Closes the connection; replies still pending fail.
  ~KvClient();
  KvClient(const KvClient&) = delete;
  KvClient& operator=(const KvClient&) = delete;

  // A broken connection fails the futures with std::system_error.
  std::future<Reply> get(const std::string& key, ByteBuffer into = {});
  std::future<Reply> put(const std::string& key, ByteBuffer value);
  std::future<Reply> del(const std::string& key);

  struct Pending {
    std::uint32_t id;
    std::promise<Reply> promise;
    ByteBuffer into;
  };
  // Shared with the connection's handler, which may outlive the client by a little.
  struct State {
    std::mutex mutex;
    std::deque<Pending> pending;
    std::uint32_t next_id = 1;
    bool broken = false;
  };

 private:
  std::future<Reply> send(Op op, const std::string& key, ByteBuffer value, ByteBuffer into);

  std::shared_ptr<State> state_;
  std::shared_ptr<Channel> channel_;
};

}  // namespace niox::kv
