// LineBasedFrameDecoder: splits a stream at "\n" or "\r\n" (Netty's).
//
// A line longer than max_length (not counting the delimiter) is a TooLongFrameException: its
// bytes are discarded as they arrive, never buffered; with fail_fast the error comes as soon as
// max_length is exceeded, otherwise once the end of the line arrived. Frames are ByteBuffers
// sharing the received memory, with or without the delimiter (strip_delimiter).
//
// One deliberate difference from Netty: a '\r' at the very end of the received bytes is not
// counted against max_length while its '\n' may still come, so a line of exactly max_length
// ending in "\r\n" is accepted however the stream is split (Netty rejects it when the split
// falls between '\r' and '\n').
#pragma once

#include <niox/transport/codec/byte_to_message_decoder.hpp>

namespace niox {

class LineBasedFrameDecoder : public ByteToMessageDecoder {
 public:
  explicit LineBasedFrameDecoder(std::size_t max_length, bool strip_delimiter = true,
                                 bool fail_fast = false);

 protected:
  void decode(ChannelHandlerContext& ctx, ByteBuffer& in, std::vector<Message>& out) override;
  std::size_t cumulation_limit_hint() const noexcept override { return max_length_ + 2; }

 private:
  // Absolute index of the line end ('\r' of "\r\n" or '\n'), or -1.
  std::ptrdiff_t find_end_of_line(const ByteBuffer& in);

  std::size_t max_length_;
  bool strip_delimiter_;
  bool fail_fast_;
  bool discarding_ = false;
  std::size_t discarded_bytes_ = 0;
  std::size_t offset_ = 0;  // bytes of `in` already scanned for '\n'
};

}  // namespace niox
