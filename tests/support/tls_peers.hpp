// For the interop tests against real TLS peers (openssl, curl): certificate files made at run
// time, and running a command.
#pragma once

#include "support/temp_dir.hpp"
#include "support/test_certificates.hpp"

#include <cstdio>
#include <fstream>
#include <string>

namespace niox::test {

// A CA, and a leaf for localhost and 127.0.0.1 signed by it, as PEM files in a private folder.
struct TlsFiles {
  TempDir dir;
  std::string ca = (dir / "ca.pem").string();
  std::string cert = (dir / "cert.pem").string();
  std::string key = (dir / "key.pem").string();

  TlsFiles() {
    TestCertificateAuthority authority;
    PemPair leaf = authority.issue();
    std::ofstream(ca) << authority.certificate_pem();
    std::ofstream(cert) << leaf.certificate;
    std::ofstream(key) << leaf.private_key;
  }
};

// Runs `cmd` with sh; its standard output (stderr too when the command says 2>&1). `status`
// gets the exit status.
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
