#include <niox/async/detail/loop_descriptor.hpp>

namespace niox::detail {

void LoopDescriptor::close_soon() noexcept {
  if (!link_ || !fd_.valid()) return;
  if (link_->in_event_loop()) {
    loop_->close(std::move(fd_));
    return;
  }
  try {
    Runnable r([loop = loop_, f = std::move(fd_)]() mutable { loop->close(std::move(f)); });
    link_->execute(r);  // false: the loop is gone, and the Runnable closes f as it dies
  } catch (...) {
    // Out of memory for the hand-over: fd_ (if not yet moved) closes with this object.
  }
}

}  // namespace niox::detail
