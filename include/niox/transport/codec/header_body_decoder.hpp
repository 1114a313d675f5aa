// HeaderBodyDecoder: fixed-size header, then a body scattered straight into buffers the
// application supplies — no cumulation copy of the body (something Netty lacks).
//
//   stream:   [ header (header_length) ][ body (length from the header) ][ header ] ...
//                     |                            |
//        cumulated only while it is          copied once, from each received
//        split across reads                  buffer into the caller's buffers
//                     v                            v
//   body_target(header) -> { length, buffers }     HeaderBodyMessage{ header, filled buffers }
//
// For each header the decoder calls body_target(header): the callback reads the header (a
// ByteBuffer over exactly header_length bytes; valid for the call) and answers the body length
// and the destination buffers, whose [position, limit) must hold at least that many bytes.
// Body bytes are copied from the incoming data directly into those buffers, advancing their
// positions; nothing of the body is buffered in the decoder. When the body is complete a
// HeaderBodyMessage is fired: the header (its own bytes), and one view per destination buffer
// over exactly the bytes written into it — the same memory the callback gave.
//
// Errors (DecoderException family; the channel is closed, like the other decoders):
//  - TooLongFrameException: a body length above max_body_length (nothing is asked or allocated);
//  - DecoderException: the callback threw, or its buffers are read-only or too small.
// Ownership: the decoder holds the destination buffers (and so their memory, unless wrapped)
// until it fires the message, which then owns them.
#pragma once

#include <niox/buffer/byte_buffer.hpp>
#include <niox/transport/channel_handler.hpp>
#include <niox/transport/codec/decoder_exception.hpp>

#include <cstddef>
#include <functional>
#include <vector>

namespace niox {

struct HeaderBodyMessage {
  ByteBuffer header;
  std::vector<ByteBuffer> body;
  std::size_t body_length = 0;
};

class HeaderBodyDecoder : public ChannelInboundHandlerAdapter {
 public:
  struct BodyTarget {
    std::size_t length = 0;
    std::vector<ByteBuffer> buffers;
  };
  using BodyTargetFunction = std::function<BodyTarget(const ByteBuffer& header)>;
  // The body length alone, read from the header, checked against max_body_length before
  // body_target is asked for buffers (so no buffer is ever requested for an oversized body).
  using BodyLengthFunction = std::function<std::size_t(const ByteBuffer& header)>;

  // Throws IllegalArgumentException if header_length is 0.
  HeaderBodyDecoder(std::size_t header_length, std::size_t max_body_length,
                    BodyLengthFunction body_length, BodyTargetFunction body_target);

  void channel_read(ChannelHandlerContext& ctx, Message&& msg) override;
  void channel_inactive(ChannelHandlerContext& ctx) override;

  bool is_close_on_decode_error() const noexcept { return close_on_error_; }
  void set_close_on_decode_error(bool on) noexcept { close_on_error_ = on; }
  // Header bytes held while a header is split across reads.
  std::size_t header_bytes_buffered() const noexcept { return header_.position(); }

 private:
  void decode(ChannelHandlerContext& ctx, ByteBuffer& in);
  void start_body(ChannelHandlerContext& ctx, ByteBuffer header);
  void fire_message(ChannelHandlerContext& ctx);
  void fail(ChannelHandlerContext& ctx, std::exception_ptr cause);

  std::size_t header_length_;
  std::size_t max_body_length_;
  BodyLengthFunction body_length_;
  BodyTargetFunction body_target_;
  bool close_on_error_ = true;
  bool failed_ = false;

  ByteBuffer header_;  // partial header across reads (only header bytes are copied)
  bool in_body_ = false;
  ByteBuffer current_header_;
  std::vector<ByteBuffer> targets_;
  std::vector<std::size_t> starts_;  // positions of targets_ when the body began
  std::size_t target_index_ = 0;
  std::size_t body_left_ = 0;
  std::size_t body_length_value_ = 0;
};

}  // namespace niox
