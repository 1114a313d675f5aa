// The kv example's wire format: every message is a fixed 16-byte header and a body whose length
// the header gives, decoded by HeaderBodyDecoder (the body lands straight in buffers chosen for
// it) and written as two buffers that leave in one gathering write.
//
//   request   op u8 | 0 0 0 | key length u32 | value length u32 | request id u32 | key | value
//   response  status u8 | 0 0 0 | value length u32 | 0 u32 | request id u32       | value
//
// Integers are big-endian. Requests may be pipelined; responses come back in request order.
#pragma once

#include <niox/buffer/byte_buffer.hpp>

#include <cstdint>
#include <string_view>

namespace niox::kv {

inline constexpr std::size_t header_size = 16;
inline constexpr std::size_t max_key_length = 1024;
inline constexpr std::size_t max_value_length = 64 * 1024 * 1024;

enum class Op : std::uint8_t { get = 1, put = 2, del = 3 };
enum class Status : std::uint8_t { ok = 0, not_found = 1, bad_request = 2 };

struct RequestHeader {
  Op op = Op::get;
  std::uint32_t key_length = 0;
  std::uint32_t value_length = 0;
  std::uint32_t id = 0;
};

struct ResponseHeader {
  Status status = Status::ok;
  std::uint32_t value_length = 0;
  std::uint32_t id = 0;
};

// A fresh 16-byte buffer ready to write (position 0, limit 16).
ByteBuffer encode(const RequestHeader& h);
ByteBuffer encode(const ResponseHeader& h);
// From a buffer whose [position, position + 16) holds the header (position not moved).
RequestHeader decode_request(const ByteBuffer& b);
ResponseHeader decode_response(const ByteBuffer& b);

}  // namespace niox::kv
