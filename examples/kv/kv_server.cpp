#include "kv_server.hpp"

#include "command_line.hpp"

#include <niox/transport/codec/decoder_exception.hpp>
#include <niox/transport/codec/header_body_decoder.hpp>
#include <niox/transport/idle_state_handler.hpp>

#include <any>
#include <deque>
#include <exception>
#include <memory>

namespace niox::kv {

void KvStore::put(std::string key, ByteBuffer value) {
  std::lock_guard lock(mutex_);
  map_.insert_or_assign(std::move(key), std::move(value));
}

std::optional<ByteBuffer> KvStore::get(const std::string& key) const {
  std::lock_guard lock(mutex_);
  auto it = map_.find(key);
  if (it == map_.end()) {
    return std::nullopt;
  }
  return it->second.duplicate();
}

bool KvStore::erase(const std::string& key) {
  std::lock_guard lock(mutex_);
  return map_.erase(key) > 0;
}

std::size_t KvStore::size() const {
  std::lock_guard lock(mutex_);
  return map_.size();
}

namespace {

// A decoded request while it waits to be executed: a few bytes (short keys need no allocation;
// a PUT's value is a slice of the buffer its body was scattered into).
struct Request {
  RequestHeader header;
  std::string key;
  ByteBuffer value;
};

// One request in, one response out, in order. Responses to everything one read brought are
// flushed together (channel_read_complete), so pipelined replies share gathering writes, each
// reply's header and value being two buffers of the same write.
//
// Flow control per request (the idea of Netty's FlowControlHandler): a request is executed only
// while the channel is writable. Once the replies queued pass the high water mark, the requests
// decoded after it wait here and reading stops; when the channel is writable again they are
// executed and reading resumes. So a client that pipelines without reading makes the server
// queue replies up to the high water mark (plus one reply), and hold at most the requests of
// one read, whatever the number of requests a read decodes.
//
// The end of the input — a bad frame, or the client's EOF (half-closure is allowed) — is not
// the end of the replies: every request decoded before it is answered and flushed, then the
// connection closes.
class KvServerHandler final : public ChannelHandler {
 public:
  explicit KvServerHandler(KvStore& store) : store_(store) {}

  void channel_read(ChannelHandlerContext& ctx, Message&& msg) override {
    auto* m = msg.get_if<HeaderBodyMessage>();
    if (m == nullptr || input_ended_) {
      return;  // after a bad frame nothing more is taken
    }
    Request r;
    r.header = decode_request(m->header);
    if (!m->body.empty()) {
      const ByteBuffer& body = m->body.front();
      r.key.assign(reinterpret_cast<const char*>(body.bytes().data()), r.header.key_length);
      if (r.header.op == Op::put) {
        r.value = body.slice(body.position() + r.header.key_length, r.header.value_length);
      }
    }
    waiting_.push_back(std::move(r));
    execute_waiting(ctx);
    if (!waiting_.empty()) {
      ctx.channel().config().set_auto_read(false);
    }
  }

  void channel_read_complete(ChannelHandlerContext& ctx) override {
    ctx.flush();
    if (!ctx.channel().is_writable() || !waiting_.empty()) {
      ctx.channel().config().set_auto_read(false);
    }
  }

  void channel_writability_changed(ChannelHandlerContext& ctx) override {
    if (ctx.channel().is_writable()) {
      execute_waiting(ctx);
      ctx.flush();
      if (waiting_.empty()) {
        if (input_ended_) {
          finish(ctx);
        } else {
          ctx.channel().config().set_auto_read(true);
        }
      }
    }
    ctx.fire_channel_writability_changed();
  }

  void user_event_triggered(ChannelHandlerContext& ctx, std::any event) override {
    if (std::any_cast<IdleStateEvent>(&event) != nullptr) {
      ctx.close();  // nothing read and no write completed for the idle timeout
      return;
    }
    if (std::any_cast<ChannelInputShutdownEvent>(&event) != nullptr) {
      end_input(ctx);
      return;
    }
    ctx.fire_user_event_triggered(std::move(event));
  }

  void exception_caught(ChannelHandlerContext& ctx, std::exception_ptr cause) override {
    try {
      std::rethrow_exception(cause);
    } catch (const DecoderException&) {
      end_input(ctx);  // a bad frame: answer what came before it, then close
      return;
    } catch (...) {
    }
    ctx.close();
  }

 private:
  void execute_waiting(ChannelHandlerContext& ctx) {
    while (!waiting_.empty() && ctx.channel().is_writable()) {
      Request r = std::move(waiting_.front());
      waiting_.pop_front();
      execute(ctx, std::move(r));
    }
  }

  void execute(ChannelHandlerContext& ctx, Request r) {
    ResponseHeader resp;
    resp.id = r.header.id;
    ByteBuffer value;
    switch (r.header.op) {
      case Op::get:
        if (auto v = store_.get(r.key)) {
          value = std::move(*v);
          resp.value_length = static_cast<std::uint32_t>(value.remaining());
        } else {
          resp.status = Status::not_found;
        }
        break;
      case Op::put: store_.put(std::move(r.key), std::move(r.value)); break;
      case Op::del: resp.status = store_.erase(r.key) ? Status::ok : Status::not_found; break;
      default: resp.status = Status::bad_request; break;
    }
    ctx.write(encode(resp));
    if (value.has_remaining()) {
      ctx.write(std::move(value));
    }
  }

  // No more input will come: stop reading; close once every waiting request is answered.
  void end_input(ChannelHandlerContext& ctx) {
    input_ended_ = true;
    ctx.channel().config().set_auto_read(false);
    execute_waiting(ctx);
    if (waiting_.empty()) {
      finish(ctx);
    } else {
      ctx.flush();
    }
  }

  // Flushes every reply, then closes.
  void finish(ChannelHandlerContext& ctx) {
    if (finishing_) {
      return;
    }
    finishing_ = true;
    ctx.channel().close_after_flush();
  }

  KvStore& store_;
  std::deque<Request> waiting_;
  bool input_ended_ = false;
  bool finishing_ = false;
};

std::size_t request_body_length(const ByteBuffer& header) {
  auto h = decode_request(header);
  if (h.key_length == 0 || h.key_length > max_key_length || h.value_length > max_value_length ||
      (h.op != Op::put && h.value_length != 0)) {
    throw DecoderException("kv: bad request header");
  }
  return std::size_t{h.key_length} + h.value_length;
}

}  // namespace

void init_server_pipeline(Channel& channel, KvStore& store, const KvServerConfig& config) {
  channel.config().set_allow_half_closure(true);
  if (config.idle_timeout.count() > 0) {
    channel.pipeline().add_last("idle", std::make_shared<IdleStateHandler>(
                                            std::chrono::nanoseconds::zero(),
                                            std::chrono::nanoseconds::zero(), config.idle_timeout));
  }
  auto decoder = std::make_shared<HeaderBodyDecoder>(
      header_size, max_key_length + max_value_length, request_body_length,
      [](const ByteBuffer& header) {
        // One buffer per request body: key and value are slices of it, and the value is stored
        // as it is.
        auto n = request_body_length(header);
        return HeaderBodyDecoder::BodyTarget{n, {ByteBuffer::allocate(n)}};
      });
  // A bad frame goes to KvServerHandler, which answers what came before it and then closes.
  decoder->set_close_on_decode_error(false);
  channel.pipeline().add_last("decoder", std::move(decoder));
  channel.pipeline().add_last("kv", std::make_shared<KvServerHandler>(store));
}

std::string server_usage() {
  return "usage: kv_server [--port P] [--bind ADDR] [--threads N] [--backend auto|io_uring|epoll]\n"
         "                 [--idle-timeout S]\n"
         "\n"
         "An in-memory key-value store: 16-byte header + body per message, pipelined.\n"
         "\n" +
         examples::server_options_usage(KvServerOptions{}, 20) +
         "  --idle-timeout S  close a connection on which nothing was read and no reply went\n"
         "                    out for S seconds, 0 never (default: 60)\n"
         "  --help            this text\n"
         "\n"
         "Prints 'kv_server listening on ADDRESS' once bound; stops on SIGINT or SIGTERM.\n"
         "Exit status: 0 after a signal, 1 when the server cannot start, 2 on a usage error.\n";
}

KvServerArgs parse_server_args(std::span<const std::string_view> args) {
  KvServerArgs r;
  KvServerOptions o;
  examples::OptionReader reader(args);
  while (reader.next()) {
    if (reader.is_help()) {
      r.help = true;
      return r;
    }
    const bool idle = reader.name() == "--idle-timeout";
    if (!idle && !examples::is_server_option(reader.name())) {
      r.error = reader.unknown();
      return r;
    }
    auto value = reader.value(r.error);
    if (!value) {
      return r;
    }
    if (idle) {
      if (!examples::parse_number<double>(*value, 0.0, 86400.0, o.idle_timeout_seconds)) {
        r.error = examples::invalid_value(reader.name(), *value, "expected seconds, 0-86400");
        return r;
      }
    } else if (examples::parse_server_option(reader.name(), *value, o, r.error) !=
               examples::OptionResult::ok) {
      return r;
    }
  }
  r.options = o;
  return r;
}

}  // namespace niox::kv
