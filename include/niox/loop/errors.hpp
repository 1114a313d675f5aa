// Error codes the event loop reports besides plain errno values.
//
// Asynchronous operations complete with a std::error_code: errno values in the generic
// category (ECONNRESET, EPIPE, ...), operation_aborted when the operation was cancelled or its
// descriptor or loop closed, and the niox.loop codes below.
#pragma once

#include <system_error>
#include <type_traits>

namespace niox {

enum class LoopError {
  // A transfer_to() asked for bytes beyond the end of the file, or the stream of a
  // transfer_from() ended before its count.
  end_of_file = 1,
};

const std::error_category& loop_category() noexcept;
inline std::error_code make_error_code(LoopError e) noexcept {
  return {static_cast<int>(e), loop_category()};
}

// What a cancelled operation completes with (ECANCELED, Asio's operation_aborted).
inline std::error_code operation_aborted() noexcept {
  return std::make_error_code(std::errc::operation_canceled);
}

}  // namespace niox

template <>
struct std::is_error_code_enum<niox::LoopError> : std::true_type {};
