// Runs a program of this project as a child process for end-to-end tests: stdout and stderr are
// pipes, lines are read with a deadline, and the destructor kills (SIGKILL) and reaps a child that
// is still running, so no test leaves a process or a descriptor behind.
#pragma once

#include <niox/base/file_descriptor.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace niox::test {

class ChildProcess {
 public:
  // Starts `argv[0]` with `argv`; stdin is /dev/null unless `stdin_fd` >= 0.
  explicit ChildProcess(const std::vector<std::string>& argv, int stdin_fd = -1) {
    int out[2];
    int err[2];
    if (::pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
    out_.reset(out[0]);
    FileDescriptor out_w(out[1]);
    if (::pipe2(err, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
    err_.reset(err[0]);
    FileDescriptor err_w(err[1]);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (stdin_fd >= 0) {
      posix_spawn_file_actions_adddup2(&fa, stdin_fd, 0);
    } else {
      posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    }
    posix_spawn_file_actions_adddup2(&fa, out_w.get(), 1);
    posix_spawn_file_actions_adddup2(&fa, err_w.get(), 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    int rc = ::posix_spawn(&pid_, args[0], &fa, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    // The child has its copies: ours of the write ends close here, so EOF arrives when it exits.
    if (rc != 0) throw std::runtime_error("posix_spawn " + argv[0] + " failed");
  }
  ~ChildProcess() {
    if (pid_ > 0 && !status_) {
      ::kill(pid_, SIGKILL);
      int st = 0;
      ::waitpid(pid_, &st, 0);
    }
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const noexcept { return pid_; }

  // The next line of stdout (without '\n'), or nullopt at EOF or after `timeout`.
  std::optional<std::string> read_line(
      std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      if (auto nl = out_buf_.find('\n'); nl != std::string::npos) {
        std::string line = out_buf_.substr(0, nl);
        out_buf_.erase(0, nl + 1);
        return line;
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return std::nullopt;
      pollfd p{out_.get(), POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char buf[4096];
      ssize_t n = ::read(out_.get(), buf, sizeof buf);
      if (n <= 0) return std::nullopt;
      out_buf_.append(buf, static_cast<std::size_t>(n));
    }
  }

  // Everything written to stderr until it closes (call after the child exited).
  std::string read_stderr() {
    std::string s;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(err_.get(), buf, sizeof buf)) > 0)
      s.append(buf, static_cast<std::size_t>(n));
    return s;
  }

  void signal(int sig) { ::kill(pid_, sig); }

  // The exit status (128 + signal for a killed child), or nullopt if it is still running after
  // `timeout`.
  std::optional<int> wait(std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    if (status_) return status_;
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      int st = 0;
      pid_t r = ::waitpid(pid_, &st, WNOHANG);
      if (r == pid_) {
        status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        return status_;
      }
      if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

 private:
  pid_t pid_ = -1;
  FileDescriptor out_;  // the read ends of the child's stdout and stderr
  FileDescriptor err_;
  std::string out_buf_;
  std::optional<int> status_;
};

}  // namespace niox::test
