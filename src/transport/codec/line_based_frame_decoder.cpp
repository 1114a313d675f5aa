#include <niox/transport/codec/line_based_frame_decoder.hpp>

#include <fmt/format.h>

#include <cstring>

namespace niox {

LineBasedFrameDecoder::LineBasedFrameDecoder(std::size_t max_length, bool strip_delimiter,
                                             bool fail_fast)
    : max_length_(max_length), strip_delimiter_(strip_delimiter), fail_fast_(fail_fast) {
  if (max_length == 0) {
    throw IllegalArgumentException("max_length must be a positive integer");
  }
}

std::ptrdiff_t LineBasedFrameDecoder::find_end_of_line(const ByteBuffer& in) {
  auto bytes = in.bytes();
  if (offset_ > bytes.size()) {
    offset_ = 0;
  }
  const void* hit = std::memchr(bytes.data() + offset_, '\n', bytes.size() - offset_);
  if (hit == nullptr) {
    offset_ = bytes.size();
    return -1;
  }
  offset_ = 0;
  auto i = static_cast<std::size_t>(static_cast<const std::byte*>(hit) - bytes.data());
  if (i > 0 && bytes[i - 1] == std::byte{'\r'}) {
    --i;
  }
  return static_cast<std::ptrdiff_t>(in.position() + i);
}

void LineBasedFrameDecoder::decode(ChannelHandlerContext&, ByteBuffer& in,
                                   std::vector<Message>& out) {
  auto eol = find_end_of_line(in);
  if (!discarding_) {
    if (eol >= 0) {
      auto end = static_cast<std::size_t>(eol);
      std::size_t length = end - in.position();
      std::size_t delim = in.get(end) == '\r' ? 2 : 1;
      if (length > max_length_) {
        in.position(end + delim);
        throw TooLongFrameException(
            fmt::format("frame length ({}) exceeds the allowed maximum ({})", length, max_length_));
      }
      if (strip_delimiter_) {
        out.emplace_back(extract_frame(in, length));
        in.position(in.position() + delim);
      } else {
        out.emplace_back(extract_frame(in, length + delim));
      }
      return;
    }
    std::size_t length = in.remaining();
    // A trailing '\r' may be half of the delimiter: don't count it yet.
    if (length != 0 && in.get(in.limit() - 1) == '\r') {
      --length;
    }
    if (length > max_length_) {
      discarded_bytes_ = in.remaining();
      in.position(in.limit());
      discarding_ = true;
      offset_ = 0;
      if (fail_fast_) {
        throw TooLongFrameException(
            fmt::format("frame length (over {}) exceeds the allowed maximum ({})", discarded_bytes_,
                        max_length_));
      }
    }
    return;
  }
  if (eol >= 0) {
    auto end = static_cast<std::size_t>(eol);
    std::size_t length = discarded_bytes_ + end - in.position();
    std::size_t delim = in.get(end) == '\r' ? 2 : 1;
    in.position(end + delim);
    discarded_bytes_ = 0;
    discarding_ = false;
    if (!fail_fast_) {
      throw TooLongFrameException(
          fmt::format("frame length ({}) exceeds the allowed maximum ({})", length, max_length_));
    }
  } else {
    discarded_bytes_ += in.remaining();
    in.position(in.limit());
    offset_ = 0;
  }
}

}  // namespace niox
