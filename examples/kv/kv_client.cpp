#include "kv_client.hpp"

#include <niox/transport/bootstrap.hpp>
#include <niox/transport/codec/decoder_exception.hpp>
#include <niox/transport/codec/header_body_decoder.hpp>
#include <niox/transport/ssl_handler.hpp>

#include <system_error>

namespace niox::kv {

namespace {

using State = KvClient::State;

void fail_all(State& s, std::error_code ec) {
  std::deque<KvClient::Pending> failed;
  {
    std::lock_guard lock(s.mutex);
    s.broken = true;
    failed.swap(s.pending);
  }
  for (auto& p : failed) {
    p.promise.set_exception(std::make_exception_ptr(std::system_error(ec, "kv: connection")));
  }
}

class KvClientHandler final : public ChannelHandler {
 public:
  explicit KvClientHandler(std::shared_ptr<State> s) : state_(std::move(s)) {}

  void channel_read(ChannelHandlerContext&, Message&& msg) override {
    auto* m = msg.get_if<HeaderBodyMessage>();
    if (m == nullptr) {
      return;
    }
    auto h = decode_response(m->header);
    KvClient::Pending p;
    {
      std::lock_guard lock(state_->mutex);
      if (state_->pending.empty() || state_->pending.front().id != h.id) {
        throw DecoderException("kv: a reply to no request");
      }
      p = std::move(state_->pending.front());
      state_->pending.pop_front();
    }
    KvClient::Reply r;
    r.status = h.status;
    if (!m->body.empty()) {
      r.value = std::move(m->body.front());
    }
    p.promise.set_value(std::move(r));
  }

  void channel_inactive(ChannelHandlerContext& ctx) override {
    fail_all(*state_, std::make_error_code(std::errc::connection_aborted));
    ctx.fire_channel_inactive();
  }

  void exception_caught(ChannelHandlerContext& ctx, std::exception_ptr) override { ctx.close(); }

 private:
  std::shared_ptr<State> state_;
};

}  // namespace

KvClient::KvClient(EventLoopGroup& group, const SocketAddress& server, const SslContext& tls,
                   const std::string& tls_host)
    : state_(std::make_shared<State>()) {
  auto state = state_;
  auto body_length = [](const ByteBuffer& header) -> std::size_t {
    auto h = decode_response(header);
    if (h.value_length > max_value_length) {
      throw DecoderException("kv: value too long");
    }
    return h.value_length;
  };
  // Where a value goes: the caller's buffer when it fits (scattered straight into it), else a
  // buffer of its own.
  auto body_target = [state, body_length](const ByteBuffer& header) {
    auto n = body_length(header);
    HeaderBodyDecoder::BodyTarget t{n, {}};
    if (n == 0) {
      return t;
    }
    std::lock_guard lock(state->mutex);
    if (!state->pending.empty() && state->pending.front().into.remaining() >= n &&
        !state->pending.front().into.is_read_only()) {
      t.buffers.push_back(state->pending.front().into);
    } else {
      t.buffers.push_back(ByteBuffer::allocate(n));
    }
    return t;
  };
  std::shared_ptr<SslHandler> ssl;
  if (tls.is_valid()) {
    const std::string host =
        tls_host.empty() && server.is_inet() ? server.inet().host_string() : tls_host;
    ssl = std::make_shared<SslHandler>(
        tls.new_engine(host, server.is_inet() ? server.inet().port() : std::uint16_t{0}));
  }
  Bootstrap b;
  b.group(group)
      .option(channel_option::tcp_nodelay, true)
      .handler(
          std::make_shared<ChannelInitializer>([state, body_length, body_target, ssl](Channel& ch) {
            if (ssl) {
              ch.pipeline().add_last("ssl", ssl);
            }
            ch.pipeline().add_last(
                "decoder", std::make_shared<HeaderBodyDecoder>(header_size, max_value_length,
                                                               body_length, body_target));
            ch.pipeline().add_last("kv", std::make_shared<KvClientHandler>(state));
          }));
  auto connected = b.connect(server);
  connected.sync();
  channel_ = connected.channel();
  if (ssl) {
    std::error_code ec;
    ssl->handshake_future().sync(ec);
    if (ec) {
      channel_->close();
      throw std::system_error(ec, "kv: TLS handshake");
    }
  }
}

KvClient::~KvClient() {
  if (channel_) {
    std::error_code ignored;
    channel_->close().sync(ignored);
  }
  fail_all(*state_, std::make_error_code(std::errc::connection_aborted));
}

std::future<KvClient::Reply> KvClient::get(const std::string& key, ByteBuffer into) {
  return send(Op::get, key, {}, std::move(into));
}

std::future<KvClient::Reply> KvClient::put(const std::string& key, ByteBuffer value) {
  return send(Op::put, key, std::move(value), {});
}

std::future<KvClient::Reply> KvClient::del(const std::string& key) {
  return send(Op::del, key, {}, {});
}

std::future<KvClient::Reply> KvClient::send(Op op, const std::string& key, ByteBuffer value,
                                            ByteBuffer into) {
  if (key.empty() || key.size() > max_key_length || value.remaining() > max_value_length) {
    throw std::invalid_argument("kv: key must be 1-1024 bytes, value at most 64 MiB");
  }
  RequestHeader h;
  h.op = op;
  h.key_length = static_cast<std::uint32_t>(key.size());
  h.value_length = static_cast<std::uint32_t>(value.remaining());
  auto k = ByteBuffer::allocate(key.size());
  k.put(std::string_view(key)).flip();
  std::future<Reply> f;
  // Under the lock so that the order of the queue is the order on the wire.
  std::lock_guard lock(state_->mutex);
  h.id = state_->next_id++;
  Pending p{h.id, {}, std::move(into)};
  f = p.promise.get_future();
  if (state_->broken) {
    p.promise.set_exception(std::make_exception_ptr(
        std::system_error(std::make_error_code(std::errc::not_connected), "kv: connection")));
    return f;
  }
  state_->pending.push_back(std::move(p));
  channel_->write(encode(h));
  channel_->write(std::move(k));
  if (value.has_remaining()) {
    channel_->write(std::move(value));
  }
  channel_->flush();
  return f;
}

}  // namespace niox::kv
