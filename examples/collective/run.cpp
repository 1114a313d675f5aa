// niox-collective-run: starts N ranks of a program on this machine, the way torchrun
// --standalone does, for programs that join with Communicator::from_environment().
//
//   niox-collective-run -n 4 ./train --epochs 10
//
// Each rank gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT
// (a free port of MASTER_ADDR unless --master-port is given). Output is the ranks' own (not
// prefixed). When a rank fails, the others are left --grace seconds to fail on their own (a
// communicator's error names the rank at fault, which is what a user wants to read), then
// terminated. The exit status is 0 when every rank exits 0, else that of the first rank that
// failed (128 + the signal for one that was killed). SIGINT and SIGTERM are passed on.
#include <command_line.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

constexpr std::string_view kUsage =
    "usage: niox-collective-run -n N [options] PROGRAM [ARGS...]\n"
    "\n"
    "Starts N ranks of PROGRAM on this machine with RANK, WORLD_SIZE, LOCAL_RANK,\n"
    "LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT set (torchrun's variables).\n"
    "\n"
    "  -n, --nproc N        ranks to start (1-1024)\n"
    "  --master-addr HOST   where rank 0 listens (default 127.0.0.1)\n"
    "  --master-port PORT   its port (default: a free one)\n"
    "  --grace SECONDS      after a rank fails, how long the others may take to end on their\n"
    "                       own before they are terminated (default 60)\n";

volatile sig_atomic_t g_signal = 0;
void on_signal(int sig) { g_signal = sig; }

// A port nothing listens on now. Another process may take it before rank 0 binds it; rank 0
// then fails with "address in use", which says what happened.
int free_port(const std::string& host) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  if (::inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1) a.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof a;
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  ::close(fd);
  return port;
}

std::string describe(int status) {
  if (WIFSIGNALED(status)) {
    return std::string("was killed by signal ") + std::to_string(WTERMSIG(status)) + " (" +
           strsignal(WTERMSIG(status)) + ")";
  }
  return "exited with status " + std::to_string(WEXITSTATUS(status));
}

// One write per message: the ranks write to the same terminal or pipe at the same time, and
// std::cerr's pieces would interleave with their lines.
void say(const std::string& line) {
  std::string text = "niox-collective-run: " + line + "\n";
  (void)!::write(STDERR_FILENO, text.data(), text.size());
}

int exit_code(int status) {
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

}  // namespace

int main(int argc, char** argv) {
  using niox::examples::parse_number;
  int n = 0;
  std::string host = "127.0.0.1";
  int port = 0;
  int grace = 60;
  int i = 1;
  for (; i < argc; ++i) {
    std::string_view a = argv[i];
    auto value = [&](std::string_view name) -> std::string_view {
      if (i + 1 >= argc) {
        std::cerr << "niox-collective-run: " << name << " needs a value\n\n" << kUsage;
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "-h" || a == "--help") {
      std::cout << kUsage;
      return 0;
    } else if (a == "-n" || a == "--nproc") {
      auto v = value(a);
      if (!parse_number(v, 1, 1024, n)) {
        std::cerr << "niox-collective-run: "
                  << niox::examples::invalid_value(a, v, "expected 1-1024") << "\n";
        return 2;
      }
    } else if (a == "--master-addr") {
      host = value(a);
    } else if (a == "--master-port") {
      auto v = value(a);
      if (!parse_number(v, 1, 65535, port)) {
        std::cerr << "niox-collective-run: "
                  << niox::examples::invalid_value(a, v, "expected 1-65535") << "\n";
        return 2;
      }
    } else if (a == "--grace") {
      auto v = value(a);
      if (!parse_number(v, 0, 86400, grace)) {
        std::cerr << "niox-collective-run: "
                  << niox::examples::invalid_value(a, v, "expected 0-86400") << "\n";
        return 2;
      }
    } else if (a.starts_with("-")) {
      std::cerr << "niox-collective-run: unknown argument '" << a << "' (see --help)\n";
      return 2;
    } else {
      break;
    }
  }
  if (n == 0 || i >= argc) {
    std::cerr << "niox-collective-run: " << (n == 0 ? "-n N is required" : "no program to run")
              << "\n\n"
              << kUsage;
    return 2;
  }
  if (port == 0) port = free_port(host);
  if (port <= 0) {
    std::cerr << "niox-collective-run: found no free port on " << host << ": "
              << std::strerror(errno) << "\n";
    return 1;
  }

  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  std::vector<pid_t> pids(n, -1);
  for (int r = 0; r < n; ++r) {
    pid_t pid = ::fork();
    if (pid < 0) {
      std::perror("niox-collective-run: fork");
      for (int k = 0; k < r; ++k) ::kill(pids[k], SIGTERM);
      return 1;
    }
    if (pid == 0) {
      signal(SIGINT, SIG_DFL);
      signal(SIGTERM, SIG_DFL);
      setenv("RANK", std::to_string(r).c_str(), 1);
      setenv("WORLD_SIZE", std::to_string(n).c_str(), 1);
      setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
      setenv("LOCAL_WORLD_SIZE", std::to_string(n).c_str(), 1);
      setenv("MASTER_ADDR", host.c_str(), 1);
      setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      ::execvp(argv[i], argv + i);
      std::fprintf(stderr, "niox-collective-run: cannot run %s: %s\n", argv[i],
                   std::strerror(errno));
      _exit(127);
    }
    pids[r] = pid;
  }

  using Clock = std::chrono::steady_clock;
  int running = n;
  int first_failure = 0;
  int forwarded = 0;
  bool terminated = false;
  Clock::time_point deadline = Clock::time_point::max();
  while (running > 0) {
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      int r = 0;
      while (r < n && pids[r] != pid) ++r;
      if (r == n) continue;
      pids[r] = -1;
      --running;
      if (status != 0) {
        say("rank " + std::to_string(r) + " " + describe(status));
        if (first_failure == 0) {
          first_failure = exit_code(status);
          if (first_failure == 0) first_failure = 1;
          deadline = Clock::now() + std::chrono::seconds(grace);
        }
      }
      continue;
    }
    if (pid < 0 && errno != EINTR) break;
    if (g_signal && forwarded != g_signal) {
      forwarded = g_signal;
      for (pid_t p : pids)
        if (p > 0) ::kill(p, g_signal);
    }
    if (!terminated && Clock::now() >= deadline) {
      say("terminating the ranks still running " + std::to_string(grace) +
          " s after the first failure");
      for (pid_t p : pids)
        if (p > 0) ::kill(p, SIGTERM);
      terminated = true;
      deadline = Clock::now() + std::chrono::seconds(5);
    } else if (terminated && Clock::now() >= deadline) {
      for (pid_t p : pids)
        if (p > 0) ::kill(p, SIGKILL);
      deadline = Clock::time_point::max();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (g_signal && first_failure == 0) return 128 + g_signal;
  return first_failure;
}
