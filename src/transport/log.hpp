// Transport-internal diagnostics: one line on stderr. Kept tiny on purpose; a logging facility
// for the whole library can replace it without touching callers.
#pragma once

#include <cstdio>
#include <exception>
#include <string>

#include <fmt/format.h>

namespace niox::detail {

template <class... Args>
void log_warn(fmt::format_string<Args...> f, Args&&... args) {
  auto line = fmt::format(f, std::forward<Args>(args)...);
  std::fprintf(stderr, "niox: %s\n", line.c_str());
}

// what() of an exception_ptr, for log lines and error codes.
std::string describe(const std::exception_ptr& e);

}  // namespace niox::detail
