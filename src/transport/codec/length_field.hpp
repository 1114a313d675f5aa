// Private: what the length-field codecs agree on, so a prepender and a decoder configured alike
// accept and refuse the same settings.
#pragma once

#include <niox/buffer/buffer_exceptions.hpp>

#include <fmt/format.h>

namespace niox::detail {

// Throws IllegalArgumentException unless the field is 1, 2, 3, 4 or 8 bytes long (Netty's set).
inline void check_length_field_length(int length_field_length) {
  switch (length_field_length) {
    case 1:
    case 2:
    case 3:
    case 4:
    case 8: return;
    default:
      throw IllegalArgumentException(fmt::format(
          "length_field_length must be either 1, 2, 3, 4, or 8: {}", length_field_length));
  }
}

}  // namespace niox::detail
