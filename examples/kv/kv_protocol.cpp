#include "kv_protocol.hpp"

namespace niox::kv {

namespace {

void put_u32(ByteBuffer& b, std::size_t at, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) {
    b.put(at + static_cast<std::size_t>(i), static_cast<std::uint8_t>(v >> (24 - 8 * i)));
  }
}

std::uint32_t get_u32(const ByteBuffer& b, std::size_t at) {
  std::uint32_t v = 0;
  for (std::size_t i = 0; i < 4; ++i) {
    v = (v << 8) | b.get(b.position() + at + i);
  }
  return v;
}

}  // namespace

ByteBuffer encode(const RequestHeader& h) {
  auto b = ByteBuffer::allocate(header_size);
  b.put(0, static_cast<std::uint8_t>(h.op));
  put_u32(b, 4, h.key_length);
  put_u32(b, 8, h.value_length);
  put_u32(b, 12, h.id);
  return b;
}

ByteBuffer encode(const ResponseHeader& h) {
  auto b = ByteBuffer::allocate(header_size);
  b.put(0, static_cast<std::uint8_t>(h.status));
  put_u32(b, 4, h.value_length);
  put_u32(b, 12, h.id);
  return b;
}

RequestHeader decode_request(const ByteBuffer& b) {
  RequestHeader h;
  h.op = static_cast<Op>(b.get(b.position()));
  h.key_length = get_u32(b, 4);
  h.value_length = get_u32(b, 8);
  h.id = get_u32(b, 12);
  return h;
}

ResponseHeader decode_response(const ByteBuffer& b) {
  ResponseHeader h;
  h.status = static_cast<Status>(b.get(b.position()));
  h.value_length = get_u32(b, 4);
  h.id = get_u32(b, 12);
  return h;
}

}  // namespace niox::kv
