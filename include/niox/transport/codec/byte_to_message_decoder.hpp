// ByteToMessageDecoder: the base of stream decoders (Netty's). It accumulates incoming
// ByteBuffers in a cumulation and calls decode() until no more frames come out.
//
// Cumulation, and why frames are zero-copy: when nothing is pending, an incoming buffer becomes
// the cumulation as is (no copy). Frames are slices of the cumulation (extract_frame()), so a
// frame that arrived in one read is never copied. Only bytes of an incomplete frame are copied,
// once, when more data arrives. The cumulation memory is never rewritten under a frame handed
// out: discarding read bytes compacts in place only while no frame shares the memory, and
// otherwise moves the unread rest into a fresh buffer. Its size is bounded by what is pending
// plus one read, and a decoder may cap its growth (cumulation_limit_hint()).
//
// Errors: decode() throws a DecoderException (any other exception is wrapped in one). The frames
// decoded before it are passed on, then the exception goes to exception_caught, and — with
// close_on_decode_error (the default) — the channel is closed and later input dropped. With it
// off the decoder goes on after the bad bytes, like Netty.
//
// Frames: each frame handed to channel_read() is a writable ByteBuffer of its own (a slice of
// the cumulation, which this decoder never rewrites under it): the next handler may change it
// in place and write it back.
//
// End of stream and removal: when the channel goes inactive, decode_last() gets one more call;
// what it leaves is a frame truncated by the end of the stream and is dropped. A decoder
// removed from a live pipeline (a protocol switch) hands the bytes it has not decoded yet to
// the next handler as one ByteBuffer, then channel_read_complete, like Netty.
//
// Non-ByteBuffer messages pass through untouched.
#pragma once

#include <niox/buffer/byte_buffer.hpp>
#include <niox/transport/channel_handler.hpp>
#include <niox/transport/codec/decoder_exception.hpp>

#include <cstddef>
#include <limits>
#include <vector>

namespace niox {

class ByteToMessageDecoder : public ChannelInboundHandlerAdapter {
 public:
  void channel_read(ChannelHandlerContext& ctx, Message&& msg) override;
  void channel_read_complete(ChannelHandlerContext& ctx) override;
  void channel_inactive(ChannelHandlerContext& ctx) override;
  void handler_removed(ChannelHandlerContext& ctx) override;

  bool is_close_on_decode_error() const noexcept { return close_on_error_; }
  void set_close_on_decode_error(bool on) noexcept { close_on_error_ = on; }
  // Bytes received and not decoded yet.
  std::size_t actual_readable_bytes() const noexcept { return cumulation_.remaining(); }
  // True once a decode error closed the channel: input is dropped from then on.
  bool has_failed() const noexcept { return failed_; }

 protected:
  // Decode from `in` (the cumulation: [position, limit) unread): consume bytes by moving
  // in.position(), append frames to `out`. Return having consumed nothing when more input is
  // needed. Throw a DecoderException on bad input (after skipping the bad bytes).
  virtual void decode(ChannelHandlerContext& ctx, ByteBuffer& in, std::vector<Message>& out) = 0;
  // Called once more when the channel goes inactive; defaults to decode() if bytes remain.
  virtual void decode_last(ChannelHandlerContext& ctx, ByteBuffer& in, std::vector<Message>& out);
  // The largest cumulation this decoder can need (beyond it, a frame would be too long anyway).
  virtual std::size_t cumulation_limit_hint() const noexcept {
    return std::numeric_limits<std::size_t>::max();
  }

  // The next `length` bytes of `in` as a frame sharing its memory; advances in.position().
  ByteBuffer extract_frame(ByteBuffer& in, std::size_t length);

 private:
  void cumulate(ByteBuffer in);
  void call_decode(ChannelHandlerContext& ctx, bool last);
  void fail(ChannelHandlerContext& ctx, std::exception_ptr cause);
  void release_if_drained() noexcept;

  ByteBuffer cumulation_;
  bool owned_ = false;   // cumulation_ was allocated here: its [limit, capacity) may be written
  bool shared_ = false;  // a frame handed out views cumulation_'s memory
  bool close_on_error_ = true;
  bool failed_ = false;
  bool decoding_ = false;
  std::vector<Message> out_;
};

}  // namespace niox
