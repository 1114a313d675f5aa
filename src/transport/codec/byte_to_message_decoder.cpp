#include <niox/transport/channel.hpp>
#include <niox/transport/codec/byte_to_message_decoder.hpp>

#include "transport/log.hpp"

#include <algorithm>
#include <cstring>

namespace niox {

ByteBuffer ByteToMessageDecoder::extract_frame(ByteBuffer& in, std::size_t length) {
  auto frame = in.slice(in.position(), length);
  in.position(in.position() + length);
  if (&in == &cumulation_) {
    shared_ = true;
  }
  return frame;
}

void ByteToMessageDecoder::cumulate(ByteBuffer in) {
  std::size_t n = in.remaining();
  if (!cumulation_.has_remaining()) {
    // Nothing pending: the read buffer itself becomes the cumulation, frames will slice it.
    cumulation_ = std::move(in);
    owned_ = false;
    shared_ = false;
    return;
  }
  if (n == 0) {
    return;
  }
  std::size_t pending = cumulation_.remaining();
  if (owned_ && cumulation_.capacity() - cumulation_.limit() >= n) {
    // Room behind the unread bytes: frames only view bytes before limit, so this is safe.
    auto lim = cumulation_.limit();
    cumulation_.limit(lim + n);
    cumulation_.put(lim, in.bytes());
    return;
  }
  if (owned_ && !shared_ && cumulation_.capacity() >= pending + n) {
    // Discard read bytes in place: no frame views this memory.
    cumulation_.compact();
    cumulation_.put(in.bytes());
    cumulation_.flip();
    return;
  }
  std::size_t need = pending + n;
  std::size_t cap = std::max<std::size_t>(need < 2048 ? 4096 : need + need / 2, need);
  cap = std::max(need, std::min(cap, cumulation_limit_hint()));
  auto fresh = ByteBuffer::allocate(cap);
  fresh.put(cumulation_.bytes());
  fresh.put(in.bytes());
  fresh.flip();
  cumulation_ = std::move(fresh);
  owned_ = true;
  shared_ = false;
}

void ByteToMessageDecoder::release_if_drained() noexcept {
  if (cumulation_.has_remaining()) {
    return;
  }
  cumulation_ = ByteBuffer();
  owned_ = false;
  shared_ = false;
}

void ByteToMessageDecoder::channel_read(ChannelHandlerContext& ctx, Message&& msg) {
  auto* bytes = msg.get_if<ByteBuffer>();
  if (bytes == nullptr) {
    ctx.fire_channel_read(std::move(msg));
    return;
  }
  if (failed_) {
    return;  // the channel is closing after a decode error: drop the rest
  }
  cumulate(std::move(*bytes));
  call_decode(ctx, false);
}

void ByteToMessageDecoder::call_decode(ChannelHandlerContext& ctx, bool last) {
  if (decoding_) {
    return;  // re-entered from a handler behind us: the outer loop picks the bytes up
  }
  decoding_ = true;
  while (!failed_ && (cumulation_.has_remaining() || last)) {
    std::size_t before = cumulation_.remaining();
    std::exception_ptr error;
    out_.clear();
    try {
      if (last) {
        last = false;
        decode_last(ctx, cumulation_, out_);
      } else {
        decode(ctx, cumulation_, out_);
      }
    } catch (const DecoderException&) {
      error = std::current_exception();
    } catch (const std::exception& e) {
      error = std::make_exception_ptr(DecoderException(e.what()));
    }
    // Frames decoded before an error still go first.
    std::size_t produced = out_.size();
    for (auto& m : out_) {
      ctx.fire_channel_read(std::move(m));
    }
    out_.clear();
    bool progressed = before != cumulation_.remaining();
    if (!error && produced != 0 && !progressed) {
      error = std::make_exception_ptr(
          DecoderException("decode() produced a frame without consuming input"));
    }
    if (error) {
      fail(ctx, error);
      if (!progressed) {
        break;
      }
      continue;  // not closing: go on after the bytes the decoder skipped, like a new read would
    }
    if (ctx.is_removed() || (produced == 0 && !progressed)) {
      break;  // removed, or needs more input
    }
  }
  decoding_ = false;
  release_if_drained();
}

void ByteToMessageDecoder::fail(ChannelHandlerContext& ctx, std::exception_ptr cause) {
  if (close_on_error_) {
    failed_ = true;
    cumulation_ = ByteBuffer();
    owned_ = shared_ = false;
  }
  ctx.fire_exception_caught(std::move(cause));
  if (close_on_error_) {
    ctx.close();
  }
}

void ByteToMessageDecoder::channel_read_complete(ChannelHandlerContext& ctx) {
  ctx.fire_channel_read_complete();
}

void ByteToMessageDecoder::decode_last(ChannelHandlerContext& ctx, ByteBuffer& in,
                                       std::vector<Message>& out) {
  if (in.has_remaining()) {
    decode(ctx, in, out);
  }
}

void ByteToMessageDecoder::channel_inactive(ChannelHandlerContext& ctx) {
  if (!failed_) {
    call_decode(ctx, true);
  }
  // What decode_last() left is a frame the end of the stream truncated: nothing can complete
  // it, and no handler behind a decoder expects raw bytes. Dropped, not forwarded.
  cumulation_ = ByteBuffer();
  owned_ = shared_ = false;
  ctx.fire_channel_read_complete();
  ctx.fire_channel_inactive();
}

void ByteToMessageDecoder::handler_removed(ChannelHandlerContext& ctx) {
  // Like Netty: bytes not decoded yet go to the next handler rather than vanish.
  if (cumulation_.has_remaining() && !failed_) {
    auto rest = cumulation_.slice();
    cumulation_ = ByteBuffer();
    ctx.fire_channel_read(std::move(rest));
    ctx.fire_channel_read_complete();
  }
  cumulation_ = ByteBuffer();
  owned_ = shared_ = false;
}

}  // namespace niox
