#include <niox/transport/channel.hpp>
#include <niox/transport/codec/length_field_prepender.hpp>

#include "transport/codec/length_field.hpp"

#include <fmt/format.h>

namespace niox {

LengthFieldPrepender::LengthFieldPrepender(int length_field_length, std::int64_t length_adjustment,
                                           bool length_includes_length_field_length,
                                           ByteOrder byte_order)
    : length_field_length_(length_field_length),
      length_adjustment_(length_adjustment),
      includes_field_(length_includes_length_field_length),
      byte_order_(byte_order) {
  detail::check_length_field_length(length_field_length);
}

ByteBuffer LengthFieldPrepender::encode_header(std::size_t body_length) const {
  std::int64_t length = 0;
  if (body_length > static_cast<std::size_t>(INT64_MAX) ||
      __builtin_add_overflow(static_cast<std::int64_t>(body_length), length_adjustment_, &length) ||
      (includes_field_ && __builtin_add_overflow(length, length_field_length_, &length))) {
    throw IllegalArgumentException("Adjusted frame length overflows");
  }
  if (length < 0) {
    throw IllegalArgumentException(
        fmt::format("Adjusted frame length ({}) is less than zero", length));
  }
  auto n = static_cast<std::size_t>(length_field_length_);
  if (n < 8 && static_cast<std::uint64_t>(length) >= (std::uint64_t{1} << (8 * n))) {
    throw IllegalArgumentException(
        fmt::format("length does not fit into a {}-byte length field: {}", n, length));
  }
  auto header = ByteBuffer::allocate(n);
  auto v = static_cast<std::uint64_t>(length);
  for (std::size_t i = 0; i < n; ++i) {
    std::size_t shift = byte_order_ == ByteOrder::big_endian ? 8 * (n - 1 - i) : 8 * i;
    header.put(i, static_cast<std::uint8_t>(v >> shift));
  }
  return header;
}

void LengthFieldPrepender::write(ChannelHandlerContext& ctx, Message&& msg,
                                 ChannelPromise promise) {
  auto* body = msg.get_if<ByteBuffer>();
  if (body == nullptr) {
    ctx.write(std::move(msg), std::move(promise));
    return;
  }
  ByteBuffer header = encode_header(body->remaining());  // throws: promise fails, nothing written
  auto header_promise = ctx.new_promise();
  auto body_promise = ctx.new_promise();
  ctx.write(std::move(header), header_promise);
  ctx.write(std::move(msg), body_promise);
  // A refusal is known synchronously (hard limit, closed, shut down): with only one of the two
  // queued the framing of the stream is lost.
  bool header_failed = header_promise.is_done() && !header_promise.is_success();
  bool body_failed = body_promise.is_done() && !body_promise.is_success();
  std::error_code refused = header_failed ? header_promise.cause()
                            : body_failed ? body_promise.cause()
                                          : std::error_code();
  if (header_failed != body_failed) {
    ctx.close();
  }
  // The first failure is the one to report (the close above fails the other part too).
  body_promise.add_listener([promise, header_promise, refused](const std::error_code& ec) mutable {
    std::error_code cause = refused                  ? refused
                            : header_promise.cause() ? header_promise.cause()
                                                     : ec;
    if (cause) {
      promise.try_failure(cause);
    } else {
      promise.try_success();
    }
  });
}

}  // namespace niox
