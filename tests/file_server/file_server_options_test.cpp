#include "file_server_options.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace niox::http {
namespace {

std::optional<FileServerOptions> parse(std::vector<std::string_view> args, std::string& error) {
  return parse_file_server_args(args, error);
}

TEST(FileServerOptions, Defaults) {
  std::string error;
  auto o = parse({}, error);
  ASSERT_TRUE(o);
  EXPECT_EQ(o->port, 8080);
  EXPECT_EQ(o->bind, "0.0.0.0");
  EXPECT_EQ(o->backend, BackendKind::automatic);
  EXPECT_TRUE(o->root.empty());
  EXPECT_EQ(o->threads, 0u);
  EXPECT_EQ(o->idle_timeout_seconds, 60.0);
  EXPECT_FALSE(o->help);
  EXPECT_FALSE(o->reuseport);
}

TEST(FileServerOptions, AllOptionsBothSpellings) {
  std::string error;
  auto o = parse({"--root", "site", "--port=9090", "--bind", "::1", "--threads", "4",
                  "--backend=epoll", "--max-header-bytes", "16384", "--idle-timeout", "2.5"},
                 error);
  ASSERT_TRUE(o) << error;
  EXPECT_EQ(o->root, "site");
  EXPECT_EQ(o->port, 9090);
  EXPECT_EQ(o->bind, "::1");
  EXPECT_EQ(o->threads, 4u);
  EXPECT_EQ(o->backend, BackendKind::epoll);
  EXPECT_EQ(o->max_header_bytes, 16384u);
  EXPECT_EQ(o->idle_timeout_seconds, 2.5);
  EXPECT_TRUE(parse({"--help"}, error)->help);
  EXPECT_NE(file_server_usage().find("--root DIR"), std::string::npos);
  EXPECT_NE(file_server_usage().find("--reuseport"), std::string::npos);
  EXPECT_TRUE(parse({"--reuseport", "--port", "0"}, error)->reuseport);
}

TEST(FileServerOptions, ClearErrors) {
  struct Case {
    std::vector<std::string_view> args;
    const char* message;
  };
  for (const auto& c : std::vector<Case>{
           {{"--port", "70000"}, "invalid --port '70000': expected 0-65535"},
           {{"--port=-1"}, "invalid --port '-1': expected 0-65535"},
           {{"--port", "80x"}, "invalid --port '80x': expected 0-65535"},
           {{"--port"}, "--port needs a value"},
           {{"--backend", "kqueue"},
            "invalid --backend 'kqueue': expected auto, io_uring or epoll"},
           {{"--root="}, "invalid --root '': empty path"},
           {{"--verbose"}, "unknown argument '--verbose' (see --help)"},
           {{"site"}, "unknown argument 'site' (see --help)"},
           {{"--max-header-bytes", "10"}, "invalid --max-header-bytes '10': expected 256-1048576"},
           {{"--idle-timeout", "-1"}, "invalid --idle-timeout '-1': expected seconds, 0-86400"},
           {{"--idle-timeout=nan"}, "invalid --idle-timeout 'nan': expected seconds, 0-86400"},
       }) {
    std::string error;
    EXPECT_FALSE(parse(c.args, error));
    EXPECT_EQ(error, c.message);
  }
}

}  // namespace
}  // namespace niox::http
