// Certificates made at run time for the TLS tests: a CA and the leaves it signs, self-signed
// and expired ones. Nothing here is committed as a secret; every key lives for one test run.
#pragma once

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace niox::test {

struct PemPair {
  std::string certificate;  // the leaf (then its chain, when there is one)
  std::string private_key;
};

struct CertificateSpec {
  std::string common_name = "localhost";
  std::vector<std::string> dns_names{"localhost"};
  std::vector<std::string> ip_addresses{"127.0.0.1"};
  long valid_from_seconds = -3600;  // relative to now
  long valid_to_seconds = 86400;
};

class TestCertificateAuthority {
 public:
  explicit TestCertificateAuthority(const std::string& name = "niox test CA")
      : key_(generate_key()),
        cert_(make_certificate(name, key_.get(), nullptr, nullptr, true, {})) {}

  // PEM of the CA certificate: what a client trusts.
  std::string certificate_pem() const { return to_pem(cert_.get()); }

  PemPair issue(const CertificateSpec& spec = {}) const {
    Key key = generate_key();
    Cert cert = make_certificate(spec.common_name, key.get(), key_.get(), cert_.get(), false, spec);
    return {to_pem(cert.get()), to_pem(key.get())};
  }

  static PemPair self_signed(const CertificateSpec& spec = {}) {
    Key key = generate_key();
    Cert cert = make_certificate(spec.common_name, key.get(), nullptr, nullptr, false, spec);
    return {to_pem(cert.get()), to_pem(key.get())};
  }

 private:
  using Key = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;
  using Cert = std::unique_ptr<X509, decltype(&X509_free)>;

  static Key generate_key() {
    Key key(EVP_EC_gen("P-256"), &EVP_PKEY_free);
    if (!key) {
      throw std::runtime_error("EVP_EC_gen failed");
    }
    return key;
  }

  static void add_extension(X509* cert, X509* issuer, int nid, const std::string& value) {
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
    if (ext == nullptr) {
      throw std::runtime_error("X509V3_EXT_conf_nid failed for " + value);
    }
    X509_add_ext(cert, ext, -1);
    X509_EXTENSION_free(ext);
  }

  // issuer_key/issuer null: self-signed. A CA gets basicConstraints CA:TRUE.
  static Cert make_certificate(const std::string& cn, EVP_PKEY* key, EVP_PKEY* issuer_key,
                               X509* issuer, bool ca, const CertificateSpec& spec) {
    Cert cert(X509_new(), &X509_free);
    X509_set_version(cert.get(), 2);
    static long serial = 1;
    ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), ++serial);
    X509_gmtime_adj(X509_getm_notBefore(cert.get()), ca ? -86400 : spec.valid_from_seconds);
    X509_gmtime_adj(X509_getm_notAfter(cert.get()), ca ? 86400 * 30 : spec.valid_to_seconds);
    X509_set_pubkey(cert.get(), key);
    X509_NAME* name = X509_get_subject_name(cert.get());
    X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>("niox tests"), -1, -1, 0);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
    X509* signer = issuer != nullptr ? issuer : cert.get();
    X509_set_issuer_name(cert.get(), X509_get_subject_name(signer));
    if (ca) {
      add_extension(cert.get(), signer, NID_basic_constraints, "critical,CA:TRUE");
      add_extension(cert.get(), signer, NID_key_usage, "critical,keyCertSign,cRLSign");
    } else {
      add_extension(cert.get(), signer, NID_basic_constraints, "critical,CA:FALSE");
      std::string san;
      for (const auto& d : spec.dns_names) {
        san += (san.empty() ? "" : ",") + std::string("DNS:") + d;
      }
      for (const auto& ip : spec.ip_addresses) {
        san += (san.empty() ? "" : ",") + std::string("IP:") + ip;
      }
      if (!san.empty()) {
        add_extension(cert.get(), signer, NID_subject_alt_name, san);
      }
      add_extension(cert.get(), signer, NID_ext_key_usage, "serverAuth,clientAuth");
    }
    add_extension(cert.get(), signer, NID_subject_key_identifier, "hash");
    if (X509_sign(cert.get(), issuer_key != nullptr ? issuer_key : key, EVP_sha256()) == 0) {
      throw std::runtime_error("X509_sign failed");
    }
    return cert;
  }

  static std::string to_pem(X509* cert) {
    BIO* bio = BIO_new(BIO_s_mem());
    PEM_write_bio_X509(bio, cert);
    return drain(bio);
  }
  static std::string to_pem(EVP_PKEY* key) {
    BIO* bio = BIO_new(BIO_s_mem());
    PEM_write_bio_PrivateKey(bio, key, nullptr, nullptr, 0, nullptr, nullptr);
    return drain(bio);
  }
  static std::string drain(BIO* bio) {
    char* data = nullptr;
    const long n = BIO_get_mem_data(bio, &data);
    std::string text(data, static_cast<std::size_t>(n));
    BIO_free(bio);
    return text;
  }

  Key key_;
  Cert cert_;
};

}  // namespace niox::test
