// The exceptions decoders deliver through exception_caught (Netty's DecoderException family).
// Each is a std::system_error, so code() gives a niox.transport error code (Errc::frame_too_long,
// Errc::corrupted_frame, Errc::decoder_failed) and what() the details.
#pragma once

#include <niox/transport/transport_error.hpp>

#include <string>
#include <system_error>

namespace niox {

class DecoderException : public std::system_error {
 public:
  explicit DecoderException(const std::string& what)
      : std::system_error(transport::Errc::decoder_failed, what) {}
  DecoderException(std::error_code code, const std::string& what) : std::system_error(code, what) {}
};

// A frame (or its declared length) above the decoder's maximum.
class TooLongFrameException : public DecoderException {
 public:
  explicit TooLongFrameException(const std::string& what)
      : DecoderException(transport::Errc::frame_too_long, what) {}
};

// A length field that is negative, overflows, or contradicts the frame layout.
class CorruptedFrameException : public DecoderException {
 public:
  explicit CorruptedFrameException(const std::string& what)
      : DecoderException(transport::Errc::corrupted_frame, what) {}
};

}  // namespace niox
