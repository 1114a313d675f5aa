// LengthFieldBasedFrameDecoder: splits a stream into frames by a length field in each frame's
// header — Netty's decoder with the same parameters and the same semantics:
//
//   frame length = (length field value) + length_adjustment + length_field_offset
//                                                            + length_field_length
//
//   BEFORE (offset 0, length 2, adjustment 0, strip 2)      AFTER
//   +--------+----------------+                             +----------------+
//   | 0x000C | "HELLO, WORLD" |          ----->             | "HELLO, WORLD" |
//   +--------+----------------+                             +----------------+
//
// The length field is 1, 2, 3, 4 (unsigned) or 8 (signed) bytes in byte_order. Errors, each a
// decode error that (by default) closes the connection:
//  - CorruptedFrameException: a negative 8-byte length; an adjusted length below the end of the
//    length field, or one that overflows; initial_bytes_to_strip larger than the frame.
//  - TooLongFrameException: an adjusted length above max_frame_length. The decoder never
//    allocates or waits for such a frame: it discards its bytes as they come (discarding mode)
//    and, with fail_fast (the default), reports at once; without, after the last discarded byte.
// Frames are ByteBuffers sharing the memory of the received bytes (see ByteToMessageDecoder).
#pragma once

#include <niox/transport/codec/byte_to_message_decoder.hpp>

#include <cstdint>

namespace niox {

class LengthFieldBasedFrameDecoder : public ByteToMessageDecoder {
 public:
  struct Options {
    ByteOrder byte_order = ByteOrder::big_endian;
    std::size_t max_frame_length = 0;
    std::size_t length_field_offset = 0;
    int length_field_length = 4;
    std::int64_t length_adjustment = 0;
    std::size_t initial_bytes_to_strip = 0;
    bool fail_fast = true;
  };

  // Throws IllegalArgumentException like Netty: max_frame_length 0, a field length other than
  // 1/2/3/4/8, or offset + field length above max_frame_length.
  explicit LengthFieldBasedFrameDecoder(const Options& options);
  LengthFieldBasedFrameDecoder(std::size_t max_frame_length, std::size_t length_field_offset,
                               int length_field_length, std::int64_t length_adjustment = 0,
                               std::size_t initial_bytes_to_strip = 0, bool fail_fast = true)
      : LengthFieldBasedFrameDecoder(
            Options{ByteOrder::big_endian, max_frame_length, length_field_offset,
                    length_field_length, length_adjustment, initial_bytes_to_strip, fail_fast}) {}
  LengthFieldBasedFrameDecoder(ByteOrder byte_order, std::size_t max_frame_length,
                               std::size_t length_field_offset, int length_field_length,
                               std::int64_t length_adjustment, std::size_t initial_bytes_to_strip,
                               bool fail_fast)
      : LengthFieldBasedFrameDecoder(Options{byte_order, max_frame_length, length_field_offset,
                                             length_field_length, length_adjustment,
                                             initial_bytes_to_strip, fail_fast}) {}

  const Options& options() const noexcept { return o_; }

 protected:
  void decode(ChannelHandlerContext& ctx, ByteBuffer& in, std::vector<Message>& out) override;
  std::size_t cumulation_limit_hint() const noexcept override { return o_.max_frame_length; }
  // The raw length field at `offset` of `in` (absolute index). Override for other encodings.
  virtual std::int64_t get_unadjusted_frame_length(const ByteBuffer& in, std::size_t offset) const;

 private:
  void discard(ByteBuffer& in);
  void exceeded_frame_length(ByteBuffer& in, std::uint64_t frame_length);
  void fail_if_necessary(bool first_detection);

  Options o_;
  std::size_t length_field_end_offset_;
  bool discarding_too_long_frame_ = false;
  std::uint64_t too_long_frame_length_ = 0;
  std::uint64_t bytes_to_discard_ = 0;
};

}  // namespace niox
