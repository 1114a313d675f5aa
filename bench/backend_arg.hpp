// The --backend value of the bench servers: "io_uring", "epoll", anything else automatic.
#pragma once

#include <niox/loop/event_loop.hpp>

#include <string_view>

inline niox::BackendKind backend_arg(std::string_view v) {
  return v == "io_uring" ? niox::BackendKind::io_uring
         : v == "epoll"  ? niox::BackendKind::epoll
                         : niox::BackendKind::automatic;
}
