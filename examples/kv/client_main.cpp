// kv_client: one request to a kv_server.
//   kv_client --to HOST:PORT get KEY | put KEY VALUE | del KEY
#include "kv_client.hpp"

#include <niox/ssl/ssl_context.hpp>

#include <iostream>
#include <string>

int main(int argc, char** argv) {
  using namespace niox;
  const char* usage =
      "usage: kv_client [--tls | --tls-ca FILE] --to ADDR:PORT get KEY | put KEY VALUE | del KEY\n"
      "ADDR is an IPv4 literal. Prints the value of a get on stdout.\n"
      "--tls speaks TLS to a kv_server started with --tls-cert/--tls-key, trusting the system's\n"
      "CAs; --tls-ca FILE trusts the CA certificates in FILE instead. The server's certificate\n"
      "must cover ADDR.\n"
      "Exit status: 0 ok, 1 not found or failed, 2 usage error.\n";
  std::vector<std::string> a(argv + 1, argv + argc);
  if (!a.empty() && (a[0] == "--help" || a[0] == "-h")) {
    std::cout << usage;
    return 0;
  }
  bool tls = false;
  std::string tls_ca;
  while (!a.empty() && (a[0] == "--tls" || a[0] == "--tls-ca")) {
    tls = true;
    if (a[0] == "--tls-ca") {
      if (a.size() < 2) {
        std::cerr << usage;
        return 2;
      }
      tls_ca = a[1];
      a.erase(a.begin());
    }
    a.erase(a.begin());
  }
  if (a.size() < 4 || a[0] != "--to" ||
      !((a[2] == "get" && a.size() == 4) || (a[2] == "del" && a.size() == 4) ||
        (a[2] == "put" && a.size() == 5))) {
    std::cerr << usage;
    return 2;
  }
  auto colon = a[1].rfind(':');
  if (colon == std::string::npos) {
    std::cerr << "kv_client: --to wants ADDR:PORT\n";
    return 2;
  }
  try {
    InetSocketAddress to(a[1].substr(0, colon),
                         static_cast<std::uint16_t>(std::stoul(a[1].substr(colon + 1))));
    SslContext ssl;
    if (tls) {
      auto builder = SslContextBuilder::for_client();
      if (!tls_ca.empty()) {
        builder.trust_manager(Pem::file(tls_ca));
      }
      ssl = builder.build();
    }
    EventLoopGroup group(1);
    kv::KvClient client(group, to, ssl);
    kv::KvClient::Reply r;
    if (a[2] == "get") {
      r = client.get(a[3]).get();
    } else if (a[2] == "del") {
      r = client.del(a[3]).get();
    } else {
      auto v = ByteBuffer::allocate(a[4].size());
      v.put(std::string_view(a[4])).flip();
      r = client.put(a[3], std::move(v)).get();
    }
    if (r.status != kv::Status::ok) {
      std::cerr << "kv_client: " << (r.status == kv::Status::not_found ? "not found" : "refused")
                << "\n";
      return 1;
    }
    auto bytes = r.value.bytes();
    std::cout.write(reinterpret_cast<const char*>(bytes.data()),
                    static_cast<std::streamsize>(bytes.size()));
    if (a[2] == "get") std::cout << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "kv_client: " << e.what() << "\n";
    return 1;
  }
}
