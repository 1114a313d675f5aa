// The kernel paths a zero-copy transfer can take, shared by FileChannel::transfer_to/transfer_from
// and the loop's EventLoop::transfer_to/transfer_from, which report the one they used.
#pragma once

#include <string_view>

namespace niox {

// Which kernel path moved the bytes of a transfer, cheapest first.
enum class TransferPath : unsigned {
  copy_file_range = 1u << 0,  // file to file inside the kernel (reflink where the fs can)
  sendfile = 1u << 1,         // file to socket/file/pipe, no user copy
  splice = 1u << 2,           // through a pipe, no user copy (sockets and pipes to files)
  copy = 1u << 3,             // read into a user buffer, write it out
};
std::string_view to_string(TransferPath path) noexcept;

// A set of TransferPath bits; transfers try the allowed ones in the order above.
using TransferPaths = unsigned;
inline constexpr TransferPaths all_transfer_paths = 0xF;

}  // namespace niox
