// Transport-internal diagnostics: lines go to the log sink (niox/base/log.hpp).
#pragma once

#include <niox/base/log.hpp>

#include <exception>
#include <string>

namespace niox::detail {

// what() of an exception_ptr, for log lines and error codes.
std::string describe(const std::exception_ptr& e);

}  // namespace niox::detail
