#include "openssl_error.hpp"
#include "ssl_context_impl.hpp"
#include "ssl_engine_impl.hpp"

#include <niox/ssl/record_path.hpp>
#include <niox/ssl/ssl_context.hpp>
#include <niox/ssl/ssl_engine.hpp>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <memory>
#include <optional>

namespace niox {

struct SslContextBuilder::Settings {
  bool server = false;
  std::optional<Pem> cert_chain;
  std::optional<Pem> private_key;
  std::optional<Pem> trust;
  std::filesystem::path trust_directory;
  ClientAuth client_auth = ClientAuth::none;
  std::vector<std::string> alpn;
  bool allow_tls1_2 = true;
  bool allow_tls1_3 = true;
  std::chrono::seconds session_timeout{300};
  std::vector<std::string> ciphers;
  std::vector<std::string> groups;
  std::vector<std::pair<std::string, SslContext>> sni;
  std::optional<bool> export_traffic_keys;  // default: kernel_tls_available()
};

namespace {

using BioPtr = std::unique_ptr<BIO, decltype(&BIO_free)>;

BioPtr memory_bio(const std::string& text) {
  return BioPtr(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())), &BIO_free);
}

bool use_certificate_chain(SSL_CTX* ctx, const Pem& pem) {
  if (pem.is_file()) {
    return SSL_CTX_use_certificate_chain_file(ctx, pem.path().c_str()) == 1;
  }
  BioPtr bio = memory_bio(pem.text());
  X509* leaf = PEM_read_bio_X509_AUX(bio.get(), nullptr, nullptr, nullptr);
  if (leaf == nullptr) {
    return false;
  }
  const bool ok = SSL_CTX_use_certificate(ctx, leaf) == 1;
  X509_free(leaf);
  if (!ok || SSL_CTX_clear_chain_certs(ctx) != 1) {
    return false;
  }
  while (X509* ca = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    if (SSL_CTX_add0_chain_cert(ctx, ca) != 1) {
      X509_free(ca);
      return false;
    }
  }
  ERR_clear_error();  // the end of the PEM text reads as "no start line"
  return true;
}

// A certificate given without its chain is completed from the trust store here, once, as
// nginx fixes its chain at start-up. Left to OpenSSL, it is completed again on every full
// handshake: an issuer lookup in the store (with the system store, a read of its directory)
// and a verification of what was found, about 130 us a handshake here. A chain given with the
// certificate is sent as given, and this does nothing. What the store does not complete (a
// self-signed certificate, an unknown issuer) stays as it is: the error is not the server's.
void complete_certificate_chain(SSL_CTX* ctx) {
  STACK_OF(X509)* given = nullptr;
  if (SSL_CTX_get0_chain_certs(ctx, &given) == 1 && given != nullptr && sk_X509_num(given) > 0) {
    return;
  }
  if (SSL_CTX_build_cert_chain(
          ctx, SSL_BUILD_CHAIN_FLAG_IGNORE_ERROR | SSL_BUILD_CHAIN_FLAG_CLEAR_ERROR) == 0) {
    ERR_clear_error();  // left to OpenSSL's completion at each handshake, as before
  }
}

// The twin SSL_CTX of a context (see SslContext::Impl) presents and trusts exactly what the
// first one loaded: its certificate, key and completed chain, and its very trust store. Nothing
// is read or built twice, and a file replaced in between cannot make the two differ.
bool share_identity(SSL_CTX* from, SSL_CTX* to) {
  SSL_CTX_set1_cert_store(to, SSL_CTX_get_cert_store(from));
  X509* cert = SSL_CTX_get0_certificate(from);
  if (cert == nullptr) {
    return true;  // a client without a certificate of its own
  }
  STACK_OF(X509)* chain = nullptr;
  SSL_CTX_get0_chain_certs(from, &chain);
  return SSL_CTX_use_certificate(to, cert) == 1 &&
         SSL_CTX_use_PrivateKey(to, SSL_CTX_get0_privatekey(from)) == 1 &&
         SSL_CTX_set1_chain(to, chain) == 1;
}

bool use_private_key(SSL_CTX* ctx, const Pem& pem) {
  if (pem.is_file()) {
    return SSL_CTX_use_PrivateKey_file(ctx, pem.path().c_str(), SSL_FILETYPE_PEM) == 1;
  }
  BioPtr bio = memory_bio(pem.text());
  EVP_PKEY* key = PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr);
  if (key == nullptr) {
    return false;
  }
  const bool ok = SSL_CTX_use_PrivateKey(ctx, key) == 1;
  EVP_PKEY_free(key);
  return ok;
}

bool load_trust(SSL_CTX* ctx, const Pem& pem) {
  if (pem.is_file()) {
    return SSL_CTX_load_verify_file(ctx, pem.path().c_str()) == 1;
  }
  BioPtr bio = memory_bio(pem.text());
  X509_STORE* store = SSL_CTX_get_cert_store(ctx);
  int loaded = 0;
  while (X509* ca = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    const bool ok = X509_STORE_add_cert(store, ca) == 1;
    X509_free(ca);
    if (!ok) {
      return false;
    }
    ++loaded;
  }
  if (loaded == 0) {
    return false;  // the queue says why ("no start line")
  }
  ERR_clear_error();
  return true;
}

// "*.example.com" matches exactly one label in front of ".example.com".
bool host_matches(std::string_view pattern, std::string_view host) {
  auto lower_equal = [](std::string_view a, std::string_view b) {
    if (a.size() != b.size()) {
      return false;
    }
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (std::tolower(static_cast<unsigned char>(a[i])) !=
          std::tolower(static_cast<unsigned char>(b[i]))) {
        return false;
      }
    }
    return true;
  };
  if (pattern.starts_with("*.")) {
    const std::size_t dot = host.find('.');
    return dot != std::string_view::npos && dot > 0 &&
           lower_equal(pattern.substr(1), host.substr(dot));
  }
  return lower_equal(pattern, host);
}

int select_server_name(SSL* ssl, int* /*alert*/, void* arg) {
  auto* impl = static_cast<SslContext::Impl*>(arg);
  const char* name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
  if (name == nullptr) {
    return SSL_TLSEXT_ERR_OK;
  }
  for (const auto& [pattern, context] : impl->sni_) {
    if (host_matches(pattern, name)) {
      SslEngine::Impl::switch_context(ssl, context);
      return SSL_TLSEXT_ERR_OK;
    }
  }
  return SSL_TLSEXT_ERR_OK;  // unknown names get the default certificate, like nginx
}

int select_alpn(SSL* /*ssl*/, const unsigned char** out, unsigned char* outlen,
                const unsigned char* in, unsigned int inlen, void* arg) {
  auto* impl = static_cast<SslContext::Impl*>(arg);
  unsigned char* selected = nullptr;
  if (SSL_select_next_proto(&selected, outlen, impl->alpn_wire_.data(),
                            static_cast<unsigned int>(impl->alpn_wire_.size()), in,
                            inlen) != OPENSSL_NPN_NEGOTIATED) {
    return SSL_TLSEXT_ERR_NOACK;  // no common protocol: go on without ALPN
  }
  *out = selected;
  return SSL_TLSEXT_ERR_OK;
}

int remember_session(SSL* ssl, SSL_SESSION* session) {
  return SslEngine::Impl::remember_session(ssl, session) ? 1 : 0;
}

// OpenSSL takes each version's suites apart, as ':'-joined lists. Each name is checked on its
// own, on a scratch context: a cipher list is accepted when some of its names are known, so a
// typo would silently drop a suite someone asked for; and an unknown group's error says only
// "passed invalid argument".
bool apply_ciphers(SSL_CTX* ctx, const std::vector<std::string>& names) {
  std::string tls13;
  std::string tls12;
  for (const std::string& n : names) {
    if (n.empty() || n.find_first_of(":, ") != std::string::npos) {
      ERR_raise_data(ERR_LIB_SSL, SSL_R_NO_CIPHER_MATCH, "cipher name '%s'", n.c_str());
      return false;
    }
    const bool is_tls13 = n.starts_with("TLS_");
    SSL_CTX* probe = SSL_CTX_new(TLS_method());
    const int ok = probe == nullptr ? 0
                   : is_tls13       ? SSL_CTX_set_ciphersuites(probe, n.c_str())
                                    : SSL_CTX_set_cipher_list(probe, n.c_str());
    SSL_CTX_free(probe);
    if (ok != 1) {
      ERR_clear_error();
      ERR_raise_data(ERR_LIB_SSL, SSL_R_NO_CIPHER_MATCH, "unknown cipher '%s'", n.c_str());
      return false;
    }
    std::string& list = is_tls13 ? tls13 : tls12;
    list += (list.empty() ? "" : ":") + n;
  }
  return (tls13.empty() || SSL_CTX_set_ciphersuites(ctx, tls13.c_str()) == 1) &&
         (tls12.empty() || SSL_CTX_set_cipher_list(ctx, tls12.c_str()) == 1);
}

bool apply_groups(SSL_CTX* ctx, const std::vector<std::string>& names) {
  if (names.empty()) return true;
  std::string list;
  for (const std::string& n : names) {
    if (n.empty() || n.find(':') != std::string::npos) {
      ERR_raise_data(ERR_LIB_SSL, SSL_R_NO_SUITABLE_GROUPS, "group name '%s'", n.c_str());
      return false;
    }
    SSL_CTX* probe = SSL_CTX_new(TLS_method());
    const int ok = probe == nullptr ? 0 : SSL_CTX_set1_groups_list(probe, n.c_str());
    SSL_CTX_free(probe);
    if (ok != 1) {
      ERR_clear_error();
      ERR_raise_data(ERR_LIB_SSL, SSL_R_NO_SUITABLE_GROUPS, "unknown group '%s'", n.c_str());
      return false;
    }
    list += (list.empty() ? "" : ":") + n;
  }
  return SSL_CTX_set1_groups_list(ctx, list.c_str()) == 1;
}

std::error_code config_error() {
  return detail::take_openssl_error(nullptr, make_error_code(SslErrc::bad_configuration));
}

}  // namespace

SslContext::Impl::~Impl() {
  for (auto& [key, session] : sessions_) {
    SSL_SESSION_free(session);
  }
  SSL_CTX_free(ctx_);
  SSL_CTX_free(quiet_);
}

void SslContext::Impl::store_session(const std::string& key, SSL_SESSION* session) {
  std::lock_guard lock(sessions_mutex_);
  auto [it, inserted] = sessions_.try_emplace(key, session);
  if (!inserted) {
    SSL_SESSION_free(it->second);
    it->second = session;
  }
}

SSL_SESSION* SslContext::Impl::find_session(const std::string& key) {
  std::lock_guard lock(sessions_mutex_);
  auto it = sessions_.find(key);
  if (it == sessions_.end() || SSL_SESSION_is_resumable(it->second) != 1) {
    return nullptr;
  }
  SSL_SESSION_up_ref(it->second);
  return it->second;
}

SslContextBuilder::SslContextBuilder(bool server) : settings_(std::make_unique<Settings>()) {
  settings_->server = server;
}
SslContextBuilder::SslContextBuilder(SslContextBuilder&&) noexcept = default;
SslContextBuilder& SslContextBuilder::operator=(SslContextBuilder&&) noexcept = default;
SslContextBuilder::SslContextBuilder(const SslContextBuilder& other)
    : settings_(std::make_unique<Settings>(*other.settings_)) {}
SslContextBuilder& SslContextBuilder::operator=(const SslContextBuilder& other) {
  settings_ = std::make_unique<Settings>(*other.settings_);
  return *this;
}
SslContextBuilder::~SslContextBuilder() = default;

SslContextBuilder SslContextBuilder::for_client() { return SslContextBuilder(false); }

SslContextBuilder SslContextBuilder::for_server(Pem cert_chain, Pem private_key) {
  SslContextBuilder b(true);
  b.settings_->cert_chain = std::move(cert_chain);
  b.settings_->private_key = std::move(private_key);
  return b;
}

SslContextBuilder& SslContextBuilder::trust_manager(Pem ca_certificates) {
  settings_->trust = std::move(ca_certificates);
  return *this;
}
SslContextBuilder& SslContextBuilder::trust_manager_directory(std::filesystem::path dir) {
  settings_->trust_directory = std::move(dir);
  return *this;
}
SslContextBuilder& SslContextBuilder::key_manager(Pem cert_chain, Pem private_key) {
  settings_->cert_chain = std::move(cert_chain);
  settings_->private_key = std::move(private_key);
  return *this;
}
SslContextBuilder& SslContextBuilder::client_auth(ClientAuth mode) {
  settings_->client_auth = mode;
  return *this;
}
SslContextBuilder& SslContextBuilder::application_protocols(std::vector<std::string> protocols) {
  settings_->alpn = std::move(protocols);
  return *this;
}
SslContextBuilder& SslContextBuilder::protocols(std::initializer_list<SslProtocol> versions) {
  settings_->allow_tls1_2 = false;
  settings_->allow_tls1_3 = false;
  for (SslProtocol v : versions) {
    (v == SslProtocol::tls1_2 ? settings_->allow_tls1_2 : settings_->allow_tls1_3) = true;
  }
  return *this;
}
SslContextBuilder& SslContextBuilder::ciphers(std::vector<std::string> names) {
  settings_->ciphers = std::move(names);
  return *this;
}
SslContextBuilder& SslContextBuilder::named_groups(std::vector<std::string> names) {
  settings_->groups = std::move(names);
  return *this;
}
SslContextBuilder& SslContextBuilder::session_timeout(std::chrono::seconds timeout) {
  settings_->session_timeout = timeout;
  return *this;
}
SslContextBuilder& SslContextBuilder::export_traffic_keys(bool on) {
  settings_->export_traffic_keys = on;
  return *this;
}
SslContextBuilder& SslContextBuilder::sni(std::string host_name, SslContext context) {
  settings_->sni.emplace_back(std::move(host_name), std::move(context));
  return *this;
}

SslContext SslContextBuilder::build() const {
  std::error_code ec;
  SslContext context = build(ec);
  if (ec) {
    throw std::system_error(ec, "SslContextBuilder::build");
  }
  return context;
}

SslContext SslContextBuilder::build(std::error_code& ec) const {
  ec.clear();
  ERR_clear_error();
  const Settings& s = *settings_;
  if (!s.allow_tls1_2 && !s.allow_tls1_3) {
    ec = make_error_code(SslErrc::bad_configuration);
    return {};
  }
  for (const auto& [name, context] : s.sni) {
    if (!context.is_server()) {
      ec = make_error_code(SslErrc::bad_configuration);
      return {};
    }
  }
  SSL_CTX* raw = SSL_CTX_new(s.server ? TLS_server_method() : TLS_client_method());
  if (raw == nullptr) {
    ec = config_error();
    return {};
  }
  auto impl = std::make_shared<SslContext::Impl>(raw, !s.server);
  for (const std::string& p : s.alpn) {
    if (p.empty() || p.size() > 255) {
      ec = make_error_code(SslErrc::bad_configuration);
      return {};
    }
    impl->alpn_wire_.push_back(static_cast<unsigned char>(p.size()));
    impl->alpn_wire_.insert(impl->alpn_wire_.end(), p.begin(), p.end());
  }
  impl->alpn_ = s.alpn;
  impl->sni_ = s.sni;
  impl->exports_traffic_keys_ = s.export_traffic_keys.value_or(kernel_tls_available());

  // Everything an SSL_CTX of this context is set up with; false with `ec` set on a failure.
  auto configure = [&s, &ec](SSL_CTX* ctx, SslContext::Impl& impl, bool with_keys) {
    SSL_CTX_set_min_proto_version(ctx, s.allow_tls1_2 ? TLS1_2_VERSION : TLS1_3_VERSION);
    SSL_CTX_set_max_proto_version(ctx, s.allow_tls1_3 ? TLS1_3_VERSION : TLS1_2_VERSION);
    // Renegotiation is how old attacks (and CPU exhaustion) get in; TLS 1.3 dropped it.
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
    // An idle connection holds no record buffers (the design's memory-per-connection figure).
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
    if (!apply_ciphers(ctx, s.ciphers) || !apply_groups(ctx, s.groups)) {
      ec = config_error();
      return false;
    }
    if (with_keys) {
      // The TLS 1.3 traffic secrets reach the engine here (nothing is written anywhere): its
      // record sealer encrypts our application data with them, and a kTLS hand-over
      // (SslEngine::export_traffic_keys) gives them to the kernel where the context allows it.
      SSL_CTX_set_keylog_callback(ctx, &SslEngine::Impl::on_keylog);
    }

    if (!with_keys) {
      if (!share_identity(impl.ctx(), ctx)) {
        ec = config_error();
        return false;
      }
    } else {
      if (s.cert_chain && s.private_key) {
        if (!use_certificate_chain(ctx, *s.cert_chain) || !use_private_key(ctx, *s.private_key) ||
            SSL_CTX_check_private_key(ctx) != 1) {
          ec = config_error();
          return false;
        }
      }
      if (s.trust) {
        if (!load_trust(ctx, *s.trust)) {
          ec = config_error();
          return false;
        }
      }
      if (!s.trust_directory.empty() &&
          SSL_CTX_load_verify_dir(ctx, s.trust_directory.c_str()) != 1) {
        ec = config_error();
        return false;
      }
      if (!s.trust && s.trust_directory.empty() && SSL_CTX_set_default_verify_paths(ctx) != 1) {
        ec = config_error();
        return false;
      }
      if (s.cert_chain && s.private_key) {
        complete_certificate_chain(ctx);
      }
    }

    const auto timeout = s.session_timeout.count();
    if (s.server) {
      int verify = SSL_VERIFY_NONE;
      if (s.client_auth == ClientAuth::optional) {
        verify = SSL_VERIFY_PEER;
      } else if (s.client_auth == ClientAuth::require) {
        verify = SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
      }
      SSL_CTX_set_verify(ctx, verify, nullptr);
      static constexpr unsigned char session_id_context[] = "niox";
      SSL_CTX_set_session_id_context(ctx, session_id_context, sizeof session_id_context - 1);
      if (timeout > 0) {
        SSL_CTX_set_timeout(ctx, static_cast<long>(timeout));
      } else {
        SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
        SSL_CTX_set_num_tickets(ctx, 0);
        SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
      }
      if (!impl.alpn_wire_.empty()) {
        SSL_CTX_set_alpn_select_cb(ctx, select_alpn, &impl);
      }
      if (!impl.sni_.empty()) {
        SSL_CTX_set_tlsext_servername_callback(ctx, select_server_name);
        SSL_CTX_set_tlsext_servername_arg(ctx, &impl);
      }
    } else {
      SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
      if (!impl.alpn_wire_.empty() &&
          SSL_CTX_set_alpn_protos(ctx, impl.alpn_wire_.data(),
                                  static_cast<unsigned int>(impl.alpn_wire_.size())) != 0) {
        ec = config_error();
        return false;
      }
      if (timeout > 0) {
        SSL_CTX_set_timeout(ctx, static_cast<long>(timeout));
        // Sessions live in our per-peer map, not OpenSSL's id-keyed client store.
        SSL_CTX_set_session_cache_mode(ctx,
                                       SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
        SSL_CTX_sess_set_new_cb(ctx, remember_session);
      } else {
        SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
      }
    }
    return true;
  };

  if (!configure(impl->ctx(), *impl, true)) {
    return {};
  }
  // The twin without the key-log callback (see SslContext::Impl), where keys are optional.
  if (!impl->exports_traffic_keys_) {
    SSL_CTX* quiet = SSL_CTX_new(s.server ? TLS_server_method() : TLS_client_method());
    if (quiet == nullptr) {
      ec = config_error();
      return {};
    }
    impl->set_quiet(quiet);
    if (!configure(quiet, *impl, false)) {
      return {};
    }
    // One set of ticket keys: a session either gave out resumes on either.
    unsigned char keys[80];
    if (s.server && (SSL_CTX_get_tlsext_ticket_keys(impl->ctx(), keys, sizeof keys) != 1 ||
                     SSL_CTX_set_tlsext_ticket_keys(quiet, keys, sizeof keys) != 1)) {
      OPENSSL_cleanse(keys, sizeof keys);
      ec = config_error();
      return {};
    }
    OPENSSL_cleanse(keys, sizeof keys);
  }
  return SslContext(std::move(impl));
}

bool SslContext::is_client() const noexcept { return impl_ != nullptr && impl_->is_client(); }

const std::vector<std::string>& SslContext::application_protocols() const noexcept {
  static const std::vector<std::string> none;
  return impl_ != nullptr ? impl_->alpn_ : none;
}

SslEngine SslContext::new_engine() const { return new_engine({}, 0); }

SslEngine SslContext::new_engine(std::string_view peer_host, std::uint16_t peer_port) const {
  if (impl_ == nullptr) {
    throw std::system_error(make_error_code(SslErrc::bad_configuration),
                            "SslContext::new_engine on an empty context");
  }
  return SslEngine(std::make_unique<SslEngine::Impl>(impl_, peer_host, peer_port));
}

}  // namespace niox
