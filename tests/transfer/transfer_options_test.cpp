#include "transfer_options.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace niox::transfer {
namespace {

std::optional<TransferOptions> parse(std::vector<std::string_view> args, std::string& error) {
  return parse_transfer_args(args, error);
}

TEST(HostPort, Forms) {
  std::string error;
  auto v4 = parse_host_port("127.0.0.1:9000", error);
  ASSERT_TRUE(v4);
  EXPECT_EQ(v4->host, "127.0.0.1");
  EXPECT_EQ(v4->port, 9000);
  auto v6 = parse_host_port("[::1]:9000", error);
  ASSERT_TRUE(v6);
  EXPECT_EQ(v6->host, "::1");
  auto name = parse_host_port("example.com:65535", error);
  ASSERT_TRUE(name);
  EXPECT_EQ(name->host, "example.com");
  EXPECT_EQ(name->port, 65535);
}

TEST(HostPort, Errors) {
  std::string error;
  for (const char* bad : {"host", ":80", "host:", "host:0", "host:65536", "host:8x", "[::1]",
                          "[::1]9000", "[]:80", "[::1:80"}) {
    EXPECT_FALSE(parse_host_port(bad, error)) << bad;
    EXPECT_FALSE(error.empty());
  }
  EXPECT_FALSE(parse_host_port("::1:9000", error));
  EXPECT_EQ(error, "put an IPv6 address in brackets: [::1]:9000");
}

TEST(TransferOptions, Send) {
  std::string error;
  auto o = parse({"send", "big.iso", "--to", "[::1]:7000"}, error);
  ASSERT_TRUE(o) << error;
  EXPECT_EQ(o->mode, TransferOptions::Mode::send);
  EXPECT_EQ(o->file, "big.iso");
  EXPECT_EQ(o->to.host, "::1");
  EXPECT_EQ(o->to.port, 7000);
  auto swapped = parse({"send", "--to=h:1", "f", "--backend", "epoll"}, error);
  ASSERT_TRUE(swapped) << error;
  EXPECT_EQ(swapped->file, "f");
  EXPECT_EQ(swapped->backend, "epoll");
}

TEST(TransferOptions, Recv) {
  std::string error;
  auto o =
      parse({"recv", "--port", "7000", "--out", "dir", "--bind=::", "--max-size", "1000"}, error);
  ASSERT_TRUE(o) << error;
  EXPECT_EQ(o->mode, TransferOptions::Mode::recv);
  EXPECT_EQ(o->port, 7000);
  EXPECT_EQ(o->out, "dir");
  EXPECT_EQ(o->bind, "::");
  EXPECT_EQ(o->max_size, 1000u);
}

TEST(TransferOptions, RecvTimeouts) {
  std::string error;
  auto defaults = parse({"recv", "--port", "1", "--out", "d"}, error);
  ASSERT_TRUE(defaults) << error;
  EXPECT_EQ(defaults->header_timeout_seconds, 30.0);
  EXPECT_EQ(defaults->idle_timeout_seconds, 60.0);
  auto o = parse(
      {"recv", "--port", "1", "--out", "d", "--header-timeout", "0.5", "--idle-timeout=0"}, error);
  ASSERT_TRUE(o) << error;
  EXPECT_EQ(o->header_timeout_seconds, 0.5);
  EXPECT_EQ(o->idle_timeout_seconds, 0.0);  // never
  EXPECT_FALSE(parse({"recv", "--port", "1", "--out", "d", "--idle-timeout", "-1"}, error));
  EXPECT_EQ(error, "invalid --idle-timeout '-1': expected seconds, 0-86400");
  EXPECT_FALSE(parse({"recv", "--port", "1", "--out", "d", "--header-timeout", "soon"}, error));
  EXPECT_EQ(error, "invalid --header-timeout 'soon': expected seconds, 0-86400");
  EXPECT_FALSE(parse({"send", "f", "--to", "h:1", "--idle-timeout", "5"}, error));
  EXPECT_EQ(error, "unknown option '--idle-timeout' for send");
  for (const char* text : {"--header-timeout S", "--idle-timeout S", "3 no header in time",
                           "4 the sender went silent", "5 no room"}) {
    EXPECT_NE(transfer_usage().find(text), std::string::npos) << text;
  }
}

TEST(TransferOptions, ClearErrors) {
  struct Case {
    std::vector<std::string_view> args;
    const char* message;
  };
  for (const auto& c : std::vector<Case>{
           {{}, "expected 'send' or 'recv' (see --help)"},
           {{"copy"}, "expected 'send' or 'recv', got 'copy' (see --help)"},
           {{"send", "--to", "h:1"}, "send needs a FILE"},
           {{"send", "f"}, "send needs --to HOST:PORT"},
           {{"send", "f", "g", "--to", "h:1"}, "unexpected argument 'g'"},
           {{"send", "f", "--port", "1"}, "unknown option '--port' for send"},
           {{"recv", "--out", "x"}, "recv needs --port P"},
           {{"recv", "--port", "1"}, "recv needs --out PATH"},
           {{"recv", "--port", "99999", "--out", "x"}, "invalid --port '99999': expected 0-65535"},
           {{"recv", "--port", "1", "--out"}, "--out needs a value"},
           {{"recv", "--to", "h:1"}, "unknown option '--to' for recv"},
       }) {
    std::string error = "stale";
    EXPECT_FALSE(parse(c.args, error));
    EXPECT_EQ(error, c.message);
  }
  std::string error = "stale";
  EXPECT_TRUE(parse({"--help"}, error)->help);
  EXPECT_TRUE(parse({"send", "--help"}, error)->help);
  EXPECT_NE(transfer_usage().find("Exit status"), std::string::npos);
}

}  // namespace
}  // namespace niox::transfer
