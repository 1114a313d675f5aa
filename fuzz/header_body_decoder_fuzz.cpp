// libFuzzer: HeaderBodyDecoder (header: 1 byte of flags, then a 1/2/4-byte length) must give the
// same messages and errors however the stream is split, and never write outside the buffers
// its callback supplied.
#include <niox/transport/codec/header_body_decoder.hpp>

#include "fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  niox::fuzz::FuzzInput in(data, size);
  static constexpr std::size_t widths[] = {1, 2, 4};
  std::size_t width = widths[in.byte() % 3];
  std::size_t header_length = 1 + width;
  std::size_t max_body = in.u16() % 1024;
  std::size_t pieces = 1 + in.byte() % 4;  // destination buffers per body
  auto length_of = [width](const niox::ByteBuffer& h) {
    std::size_t v = 0;
    for (std::size_t i = 0; i < width; ++i) {
      v = v << 8 | h.get(h.position() + 1 + i);
    }
    return v;
  };
  niox::fuzz::check_split_independence(in, [&] {
    return std::make_shared<niox::HeaderBodyDecoder>(
        header_length, max_body, length_of, [&, pieces](const niox::ByteBuffer& h) {
          niox::HeaderBodyDecoder::BodyTarget t;
          t.length = length_of(h);
          std::size_t left = t.length;
          for (std::size_t i = 0; i < pieces; ++i) {
            std::size_t n = i + 1 == pieces ? left : left / 2;
            t.buffers.push_back(niox::ByteBuffer::allocate(n));  // exact: ASan sees overruns
            left -= n;
          }
          return t;
        });
  });
  return 0;
}
