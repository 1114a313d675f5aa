// libFuzzer: LineBasedFrameDecoder must give the same lines and errors however the stream is
// split, and never crash.
#include <niox/transport/codec/line_based_frame_decoder.hpp>

#include "fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  niox::fuzz::FuzzInput in(data, size);
  auto flags = in.byte();
  std::size_t max_length = 1 + in.byte() % 64;
  bool strip = (flags & 1) != 0;
  bool fail_fast = (flags & 2) != 0;
  bool close_on_error = (flags & 4) == 0;
  niox::fuzz::check_split_independence(in, [&] {
    auto d = std::make_shared<niox::LineBasedFrameDecoder>(max_length, strip, fail_fast);
    d->set_close_on_decode_error(close_on_error);
    return d;
  });
  return 0;
}
