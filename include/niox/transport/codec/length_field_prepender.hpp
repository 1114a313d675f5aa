// LengthFieldPrepender: writes a length header in front of each outbound ByteBuffer (Netty's).
//
//   write(body)  ----->  write(header) + write(body)      (two messages, one flush)
//                        +--------+   +----------------+
//                        | 0x000C |   | "HELLO, WORLD" |   <- the very same memory as given
//                        +--------+   +----------------+
//
// Unlike Netty, the header is its own small ByteBuffer and the body is passed on untouched, so
// both leave in one gathering write without copying the body.
//
// length = body.remaining() + length_adjustment (+ length_field_length when
// length_includes_length_field_length). A length that is negative or does not fit the field
// fails the write's promise with Errc::handler_failed (the handler threw
// IllegalArgumentException) and nothing is written.
//
// Completion: the write's promise completes when the body's write does. If the header was
// accepted but the body refused (e.g. the outbound buffer's hard limit), the stream would carry
// a header without its body, so the channel is closed.
// Non-ByteBuffer messages pass through untouched.
#pragma once

#include <niox/transport/channel_handler.hpp>

#include <cstdint>

namespace niox {

class LengthFieldPrepender : public ChannelOutboundHandlerAdapter {
 public:
  // Throws IllegalArgumentException unless length_field_length is 1, 2, 3, 4 or 8.
  explicit LengthFieldPrepender(int length_field_length, std::int64_t length_adjustment = 0,
                                bool length_includes_length_field_length = false,
                                ByteOrder byte_order = ByteOrder::big_endian);

  void write(ChannelHandlerContext& ctx, Message&& msg, ChannelPromise promise) override;

  // The header for a body of `body_length` bytes. Throws IllegalArgumentException when the
  // adjusted length is negative or does not fit the field.
  ByteBuffer encode_header(std::size_t body_length) const;

 private:
  int length_field_length_;
  std::int64_t length_adjustment_;
  bool includes_field_;
  ByteOrder byte_order_;
};

}  // namespace niox
