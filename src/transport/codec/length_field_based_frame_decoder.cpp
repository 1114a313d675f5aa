#include <niox/transport/codec/length_field_based_frame_decoder.hpp>

#include "transport/codec/length_field.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

namespace niox {

LengthFieldBasedFrameDecoder::LengthFieldBasedFrameDecoder(const Options& options)
    : o_(options),
      length_field_end_offset_(options.length_field_offset +
                               static_cast<std::size_t>(options.length_field_length)) {
  if (o_.max_frame_length == 0) {
    throw IllegalArgumentException("max_frame_length must be a positive integer");
  }
  detail::check_length_field_length(o_.length_field_length);
  auto field = static_cast<std::size_t>(o_.length_field_length);
  if (o_.max_frame_length < field || o_.length_field_offset > o_.max_frame_length - field ||
      o_.max_frame_length > static_cast<std::size_t>(INT64_MAX)) {
    throw IllegalArgumentException(fmt::format(
        "max_frame_length ({}) must be equal to or greater than length_field_offset ({}) + "
        "length_field_length ({})",
        o_.max_frame_length, o_.length_field_offset, o_.length_field_length));
  }
}

std::int64_t LengthFieldBasedFrameDecoder::get_unadjusted_frame_length(const ByteBuffer& in,
                                                                       std::size_t offset) const {
  std::uint64_t v = 0;
  int n = o_.length_field_length;
  for (int i = 0; i < n; ++i) {
    std::uint64_t b = in.get(offset + static_cast<std::size_t>(i));
    if (o_.byte_order == ByteOrder::big_endian) {
      v = (v << 8) | b;
    } else {
      v |= b << (8 * i);
    }
  }
  // 1..4 bytes are unsigned; 8 bytes are a signed long, as in Netty.
  return static_cast<std::int64_t>(v);
}

void LengthFieldBasedFrameDecoder::discard(ByteBuffer& in) {
  auto local = static_cast<std::size_t>(std::min<std::uint64_t>(bytes_to_discard_, in.remaining()));
  in.position(in.position() + local);
  bytes_to_discard_ -= local;
  fail_if_necessary(false);
}

void LengthFieldBasedFrameDecoder::exceeded_frame_length(ByteBuffer& in,
                                                         std::uint64_t frame_length) {
  too_long_frame_length_ = frame_length;
  if (frame_length < in.remaining()) {
    // The whole frame is here: skip it now.
    in.position(in.position() + static_cast<std::size_t>(frame_length));
  } else {
    // Discard what arrived and keep discarding the rest as it comes; never buffer it.
    discarding_too_long_frame_ = true;
    bytes_to_discard_ = frame_length - in.remaining();
    in.position(in.limit());
  }
  fail_if_necessary(true);
}

void LengthFieldBasedFrameDecoder::fail_if_necessary(bool first_detection) {
  if (bytes_to_discard_ == 0) {
    auto len = too_long_frame_length_;
    too_long_frame_length_ = 0;
    discarding_too_long_frame_ = false;
    if (!o_.fail_fast || first_detection) {
      throw TooLongFrameException(fmt::format("Adjusted frame length exceeds {}: {} - discarded",
                                              o_.max_frame_length, len));
    }
  } else if (o_.fail_fast && first_detection) {
    throw TooLongFrameException(fmt::format("Adjusted frame length exceeds {}: {} - discarding",
                                            o_.max_frame_length, too_long_frame_length_));
  }
}

void LengthFieldBasedFrameDecoder::decode(ChannelHandlerContext&, ByteBuffer& in,
                                          std::vector<Message>& out) {
  if (discarding_too_long_frame_) {
    discard(in);
  }
  if (in.remaining() < length_field_end_offset_) {
    return;
  }
  std::int64_t raw = get_unadjusted_frame_length(in, in.position() + o_.length_field_offset);
  if (raw < 0) {
    in.position(in.position() + length_field_end_offset_);
    throw CorruptedFrameException(fmt::format("negative pre-adjustment length field: {}", raw));
  }
  // Exact arithmetic: Java wraps a huge 8-byte length plus the adjustment around to a negative
  // value and reports it as corrupted; so does an overflow here.
  // raw >= 0 and the end offset >= 0, so an overflow can only be upwards.
  std::int64_t adjusted = 0;
  std::int64_t frame = 0;
  if (__builtin_add_overflow(raw, o_.length_adjustment, &adjusted) ||
      __builtin_add_overflow(adjusted, static_cast<std::int64_t>(length_field_end_offset_),
                             &frame)) {
    in.position(in.position() + length_field_end_offset_);
    throw CorruptedFrameException(fmt::format("Adjusted frame length overflows: {} + {} + {}", raw,
                                              o_.length_adjustment, length_field_end_offset_));
  }
  if (frame < static_cast<std::int64_t>(length_field_end_offset_)) {
    in.position(in.position() + length_field_end_offset_);
    throw CorruptedFrameException(
        fmt::format("Adjusted frame length ({}) is less than length_field_end_offset: {}", frame,
                    length_field_end_offset_));
  }
  auto frame_length = static_cast<std::uint64_t>(frame);
  if (frame_length > o_.max_frame_length) {
    exceeded_frame_length(in, frame_length);
    return;
  }
  auto length = static_cast<std::size_t>(frame_length);
  if (in.remaining() < length) {
    return;
  }
  if (o_.initial_bytes_to_strip > length) {
    in.position(in.position() + length);
    throw CorruptedFrameException(
        fmt::format("Adjusted frame length ({}) is less than initial_bytes_to_strip: {}", length,
                    o_.initial_bytes_to_strip));
  }
  in.position(in.position() + o_.initial_bytes_to_strip);
  out.emplace_back(extract_frame(in, length - o_.initial_bytes_to_strip));
}

}  // namespace niox
