// Command line of niox-file-server, parsed without side effects so that the program's main is
// only "parse, print usage or error, run".
//
//   niox-file-server [--root DIR] [--port P] [--bind ADDR] [--threads N]
//                    [--backend auto|io_uring|epoll] [--max-header-bytes N]
//                    [--idle-timeout SECONDS] [--help]
//
// Options take their value as the next argument or after '=' ("--port=8080").
#pragma once

#include "server_program.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace niox::http {

struct FileServerOptions : examples::ServerOptions {  // port (8080), bind, threads, backend
  std::string root;                                   // empty: the program's built-in site
  std::size_t max_header_bytes = 8192;
  // A connection that moves no byte either way for this long, or whose request head is not
  // complete this long after it began (a slowloris client), is closed. 0 disables.
  double idle_timeout_seconds = 60;
  bool help = false;
};

// Parses the arguments after the program name. On error returns nullopt and sets `error` to a
// one-line message naming the offending argument.
std::optional<FileServerOptions> parse_file_server_args(std::span<const std::string_view> args,
                                                        std::string& error);

// The --help text.
std::string file_server_usage();

}  // namespace niox::http
