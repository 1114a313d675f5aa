// Private: what tests do to an SslHandler that no caller may.
#pragma once

#include <niox/transport/ssl_handler.hpp>

namespace niox::detail {

struct SslHandlerAccess {
  // The handler as after a TLS_RX hand-over, for tests of what it does with the kernel's
  // reads on a machine whose kernel has no kTLS.
  static void assume_kernel_receives(SslHandler& handler) noexcept {
    handler.rx_hand_over_pending_ = false;
    handler.rx_path_ = RecordPath::ktls;
  }
};

}  // namespace niox::detail
