// libFuzzer: LengthFieldBasedFrameDecoder with fuzzed parameters must never crash, never keep
// more than its maximum, and give the same frames and errors however the stream is split.
#include <niox/transport/codec/length_field_based_frame_decoder.hpp>

#include "fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  niox::fuzz::FuzzInput in(data, size);
  static constexpr int widths[] = {1, 2, 3, 4, 8};
  niox::LengthFieldBasedFrameDecoder::Options o;
  auto flags = in.byte();
  o.byte_order = flags & 1 ? niox::ByteOrder::little_endian : niox::ByteOrder::big_endian;
  o.fail_fast = (flags & 2) != 0;
  bool close_on_error = (flags & 4) == 0;
  o.length_field_length = widths[in.byte() % 5];
  o.max_frame_length = 1 + in.u16() % 512;
  o.length_field_offset = in.byte() % 8;
  o.length_adjustment = static_cast<std::int8_t>(in.byte());
  if (flags & 8) {
    o.length_adjustment *= 0x1000000000000LL;  // near the overflow edges
  }
  o.initial_bytes_to_strip = in.byte() % 16;
  if (o.max_frame_length <
      o.length_field_offset + static_cast<std::size_t>(o.length_field_length)) {
    o.max_frame_length = o.length_field_offset + static_cast<std::size_t>(o.length_field_length);
  }
  niox::fuzz::check_split_independence(in, [&] {
    auto d = std::make_shared<niox::LengthFieldBasedFrameDecoder>(o);
    d->set_close_on_decode_error(close_on_error);
    return d;
  });
  return 0;
}
