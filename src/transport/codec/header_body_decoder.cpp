#include <niox/transport/channel.hpp>
#include <niox/transport/codec/header_body_decoder.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace niox {

HeaderBodyDecoder::HeaderBodyDecoder(std::size_t header_length, std::size_t max_body_length,
                                     BodyLengthFunction body_length, BodyTargetFunction body_target)
    : header_length_(header_length),
      max_body_length_(max_body_length),
      body_length_(std::move(body_length)),
      body_target_(std::move(body_target)) {
  if (header_length == 0) {
    throw IllegalArgumentException("header_length must be positive");
  }
  if (!body_length_ || !body_target_) {
    throw IllegalArgumentException("HeaderBodyDecoder needs both callbacks");
  }
}

void HeaderBodyDecoder::channel_read(ChannelHandlerContext& ctx, Message&& msg) {
  auto* in = msg.get_if<ByteBuffer>();
  if (in == nullptr) {
    ctx.fire_channel_read(std::move(msg));
    return;
  }
  if (failed_) {
    return;
  }
  try {
    decode(ctx, *in);
  } catch (const DecoderException&) {
    fail(ctx, std::current_exception());
  } catch (const std::exception& e) {
    fail(ctx, std::make_exception_ptr(DecoderException(e.what())));
  }
}

void HeaderBodyDecoder::decode(ChannelHandlerContext& ctx, ByteBuffer& in) {
  while (in.has_remaining() && !failed_ && !ctx.is_removed()) {
    if (in_body_) {
      // Scatter straight from the received bytes into the caller's buffers.
      while (body_left_ != 0 && in.has_remaining()) {
        ByteBuffer& dst = targets_[target_index_];
        std::size_t n = std::min({dst.remaining(), in.remaining(), body_left_});
        if (n == 0) {
          ++target_index_;
          continue;
        }
        std::memcpy(dst.writable_bytes().data(), in.bytes().data(), n);
        dst.position(dst.position() + n);
        in.position(in.position() + n);
        body_left_ -= n;
      }
      if (body_left_ == 0) {
        fire_message(ctx);
      }
      continue;
    }
    if (header_.position() == 0 && in.remaining() >= header_length_) {
      // The whole header is in this read: a view, no copy.
      auto h = in.slice(in.position(), header_length_);
      in.position(in.position() + header_length_);
      start_body(ctx, std::move(h));
      continue;
    }
    if (header_.capacity() == 0) {
      header_ = ByteBuffer::allocate(header_length_);
    }
    std::size_t n = std::min(header_.remaining(), in.remaining());
    header_.put(in.bytes().first(n));
    in.position(in.position() + n);
    if (!header_.has_remaining()) {
      auto h = ByteBuffer::allocate(header_length_);
      header_.flip();
      h.put(header_);
      h.flip();
      header_.clear();
      start_body(ctx, std::move(h));
    }
  }
}

void HeaderBodyDecoder::start_body(ChannelHandlerContext& ctx, ByteBuffer header) {
  std::size_t length = body_length_(header);
  if (length > max_body_length_) {
    throw TooLongFrameException(
        fmt::format("body length {} exceeds the maximum {}", length, max_body_length_));
  }
  targets_.clear();
  starts_.clear();
  if (length != 0) {
    BodyTarget t = body_target_(header);
    if (t.length != length) {
      throw DecoderException(fmt::format(
          "body_target answered length {} for a header announcing {}", t.length, length));
    }
    std::size_t room = 0;
    for (auto& b : t.buffers) {
      if (b.is_read_only() && b.has_remaining()) {
        throw DecoderException("body_target returned a read-only buffer");
      }
      room += b.remaining();
    }
    if (room < length) {
      throw DecoderException(
          fmt::format("body_target buffers hold {} bytes, the body needs {}", room, length));
    }
    targets_ = std::move(t.buffers);
    for (auto& b : targets_) {
      starts_.push_back(b.position());
    }
  }
  current_header_ = std::move(header);
  body_length_value_ = length;
  body_left_ = length;
  target_index_ = 0;
  in_body_ = true;
  if (length == 0) {
    fire_message(ctx);
  }
}

void HeaderBodyDecoder::fire_message(ChannelHandlerContext& ctx) {
  HeaderBodyMessage m;
  m.header = std::move(current_header_);
  m.body_length = body_length_value_;
  for (std::size_t i = 0; i < targets_.size(); ++i) {
    auto& b = targets_[i];
    if (b.position() == starts_[i]) {
      continue;  // untouched: not part of this body
    }
    // A view over exactly the bytes written: position = where writing began.
    auto view = b.duplicate();
    view.limit(b.position());
    view.position(starts_[i]);
    m.body.push_back(std::move(view));
  }
  targets_.clear();
  starts_.clear();
  in_body_ = false;
  current_header_ = ByteBuffer();
  ctx.fire_channel_read(std::move(m));
}

void HeaderBodyDecoder::fail(ChannelHandlerContext& ctx, std::exception_ptr cause) {
  targets_.clear();
  starts_.clear();
  in_body_ = false;
  header_.clear();
  if (close_on_error_) {
    failed_ = true;
  }
  ctx.fire_exception_caught(std::move(cause));
  if (close_on_error_) {
    ctx.close();
  }
}

void HeaderBodyDecoder::channel_inactive(ChannelHandlerContext& ctx) {
  targets_.clear();
  starts_.clear();
  ctx.fire_channel_inactive();
}

}  // namespace niox
