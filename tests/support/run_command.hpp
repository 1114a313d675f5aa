// Running a real peer (curl, openssl) from a test: its output and exit status.
#pragma once

#include <cstdio>
#include <string>

#include <sys/wait.h>

namespace niox::test {

// Runs `cmd` with sh; its standard output (stderr too when the command says 2>&1). `status`
// gets the exit status (-1 when it did not exit normally).
inline std::string run_command(const std::string& cmd, int* status = nullptr) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int st = ::pclose(p);
  if (status != nullptr) *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

inline bool have_command(const std::string& name) {
  int status = 0;
  run_command("command -v " + name + " >/dev/null 2>&1", &status);
  return status == 0;
}

}  // namespace niox::test
