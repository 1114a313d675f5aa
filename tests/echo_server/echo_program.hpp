// The echo server programs end to end, on each backend: a test starts one as a child process on
// a free loopback port and learns the port from the first line it prints.
#pragma once

#include <niox/loop/event_loop.hpp>

#include "support/backends.hpp"
#include "support/child_process.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace niox::test {

// The port in an echo server's first line, "listening on 127.0.0.1:PORT (backend ...)"; 0 if
// the line is not that.
inline std::uint16_t port_in(const std::string& line) {
  const std::string prefix = "listening on 127.0.0.1:";
  if (line.rfind(prefix, 0) != 0) return 0;
  return static_cast<std::uint16_t>(std::stoi(line.substr(prefix.size())));
}

class EchoProgramTest : public ::testing::TestWithParam<BackendKind> {
 protected:
  void SetUp() override {
    if (auto why = backend_skip_reason(GetParam())) GTEST_SKIP() << *why;
  }
  // Starts `program` on 127.0.0.1, a port the kernel chooses and this backend, with `extra`
  // arguments; returns the port it listens on, or 0 (the test failed) if its first line does not
  // say so. The first line names the backend.
  std::uint16_t start(const char* program, std::vector<std::string> extra = {}) {
    const std::string backend(to_string(GetParam()));
    std::vector<std::string> argv{program,     "--port",    "0",    "--bind",
                                  "127.0.0.1", "--backend", backend};
    argv.insert(argv.end(), extra.begin(), extra.end());
    server_.emplace(argv);
    const std::string line = server_->read_line(std::chrono::seconds(20)).value_or("");
    const std::uint16_t port = port_in(line);
    if (port == 0) {
      ADD_FAILURE() << "unexpected first line: '" << line << "'";
      return 0;
    }
    EXPECT_NE(line.find(backend), std::string::npos) << line;
    return port;
  }
  std::optional<ChildProcess> server_;
};

}  // namespace niox::test
