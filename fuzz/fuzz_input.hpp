// Turns a fuzzer's bytes into decoder parameters, cut points and the stream to decode, and
// checks that decoding does not depend on where the stream was cut.
#pragma once

#include "support/decoder_harness.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <span>
#include <vector>

namespace niox::fuzz {

class FuzzInput {
 public:
  FuzzInput(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}

  // The next byte of the parameter prefix (0 once the input is exhausted).
  std::uint8_t byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  std::uint16_t u16() {
    auto hi = byte();
    return static_cast<std::uint16_t>(hi << 8 | byte());
  }
  // Everything not consumed as parameters.
  std::span<const std::byte> rest() const {
    return {reinterpret_cast<const std::byte*>(data_) + pos_, size_ - pos_};
  }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

// Reads up to 8 cut points, then checks whole == cut == byte-by-byte (short inputs).
inline void check_split_independence(FuzzInput& in, const testing::DecoderFactory& make) {
  std::size_t ncuts = in.byte() % 9;
  std::vector<std::uint16_t> raw;
  for (std::size_t i = 0; i < ncuts; ++i) {
    raw.push_back(in.u16());
  }
  auto stream = in.rest();
  std::vector<std::size_t> cuts;
  for (auto r : raw) {
    if (!stream.empty()) {
      cuts.push_back(r % stream.size());
    }
  }
  std::sort(cuts.begin(), cuts.end());
  auto whole = testing::run_decoder(make, stream);
  auto split = testing::run_decoder(make, stream, cuts);
  if (!(whole == split)) {
    std::fprintf(stderr, "decoder output depends on the split (%zu vs %zu events)\n",
                 whole.events.size(), split.events.size());
    std::abort();
  }
  if (stream.size() <= 256) {
    std::vector<std::size_t> every;
    for (std::size_t i = 1; i < stream.size(); ++i) {
      every.push_back(i);
    }
    if (!(testing::run_decoder(make, stream, every) == whole)) {
      std::fprintf(stderr, "decoder output differs when fed byte by byte\n");
      std::abort();
    }
  }
}

}  // namespace niox::fuzz
