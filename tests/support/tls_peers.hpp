// For the interop tests against real TLS peers (openssl, curl): certificate files made at run
// time; running a command is in run_command.hpp.
#pragma once

#include "support/run_command.hpp"
#include "support/temp_dir.hpp"
#include "support/test_certificates.hpp"

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

}  // namespace niox::test
