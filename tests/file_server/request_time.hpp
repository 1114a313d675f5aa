// The time the file server's unit tests pass in as "now": fixed, so that the dates in responses
// and the open-file cache's validity never depend on the wall clock.
#pragma once

#include <ctime>

namespace niox::http {

inline constexpr std::time_t now = 1780000000;

}  // namespace niox::http
