// Error codes of the transport layer ("niox.transport" category), carried by failed
// ChannelFutures and by the decoder exceptions. System errors (ECONNRESET, EPIPE, ...) keep
// std::system_category; these name what the kernel has no errno for.
#pragma once

#include <string>
#include <system_error>

namespace niox::transport {

enum class Errc {
  channel_closed = 1,     // the channel was closed before this operation could complete
  outbound_buffer_full,   // a write would take the queued bytes above the hard limit
  output_shutdown,        // a write after shutdown_output()
  unsupported_message,    // the transport cannot write this message type
  frame_too_long,         // a decoder saw a frame length above its maximum
  corrupted_frame,        // a decoder saw a negative, overflowing or inconsistent length
  decoder_failed,         // a decoder threw something that is not a decode error
  handler_failed,         // a handler threw while processing an outbound operation
  file_region_truncated,  // the file is shorter than position + count of a FileRegion
  write_would_block,      // reserved: the transport could not take the bytes now
  handler_removed,        // a write from another thread reached a context no longer in the pipeline
};

const std::error_category& transport_category() noexcept;

inline std::error_code make_error_code(Errc e) noexcept {
  return {static_cast<int>(e), transport_category()};
}

}  // namespace niox::transport

template <>
struct std::is_error_code_enum<niox::transport::Errc> : std::true_type {};
