// Private: configuration and pipeline changes made from another thread than the channel's loop.
#pragma once

#include <functional>

namespace niox {
class Channel;
namespace detail {
// Runs `f` on the channel's loop thread and waits for it, rethrowing what it threw: at once
// when called there. Refused with BlockingOperationException on another loop's thread (a wait
// there could deadlock two loops), with IllegalStateException once the loop is gone.
void run_on_loop_and_wait(Channel& channel, const std::function<void()>& f);
// Whether a change made now on this thread must go through run_on_loop_and_wait().
bool must_hop(const Channel& channel) noexcept;
}  // namespace detail
}  // namespace niox
