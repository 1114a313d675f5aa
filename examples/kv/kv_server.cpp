#include "kv_server.hpp"

#include "backpressure_handler.hpp"

#include <niox/transport/codec/decoder_exception.hpp>
#include <niox/transport/codec/header_body_decoder.hpp>

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

// One request in, one response out. Responses to everything one read brought are flushed
// together (channel_read_complete), so pipelined replies share gathering writes, each reply's
// header and value being two buffers of the same write. A client that pipelines without
// reading its replies is not read from until they drain (BackpressureHandler).
class KvServerHandler final : public BackpressureHandler {
 public:
  explicit KvServerHandler(KvStore& store) : store_(store) {}

  void channel_read(ChannelHandlerContext& ctx, Message msg) override {
    auto* m = msg.get_if<HeaderBodyMessage>();
    if (m == nullptr) {
      return;
    }
    auto req = decode_request(m->header);
    ByteBuffer body = m->body.empty() ? ByteBuffer() : m->body.front();
    std::string key(reinterpret_cast<const char*>(body.bytes().data()), req.key_length);
    ResponseHeader resp;
    resp.id = req.id;
    ByteBuffer value;
    switch (req.op) {
      case Op::get:
        if (auto v = store_.get(key)) {
          value = std::move(*v);
          resp.value_length = static_cast<std::uint32_t>(value.remaining());
        } else {
          resp.status = Status::not_found;
        }
        break;
      case Op::put:
        store_.put(std::move(key), body.slice(body.position() + req.key_length, req.value_length));
        break;
      case Op::del:
        resp.status = store_.erase(key) ? Status::ok : Status::not_found;
        break;
      default:
        resp.status = Status::bad_request;
        break;
    }
    ctx.write(encode(resp));
    if (value.has_remaining()) {
      ctx.write(std::move(value));
    }
  }

 private:
  KvStore& store_;
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

void init_server_pipeline(Channel& channel, KvStore& store) {
  channel.pipeline().add_last(
      "decoder", std::make_shared<HeaderBodyDecoder>(
                     header_size, max_key_length + max_value_length, request_body_length,
                     [](const ByteBuffer& header) {
                       // One buffer per request body: key and value are slices of it, and the
                       // value is stored as it is.
                       auto n = request_body_length(header);
                       return HeaderBodyDecoder::BodyTarget{n, {ByteBuffer::allocate(n)}};
                     }));
  channel.pipeline().add_last("kv", std::make_shared<KvServerHandler>(store));
}

}  // namespace niox::kv
