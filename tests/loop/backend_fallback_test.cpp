// io_uring refused by the kernel (a seccomp filter making io_uring_setup fail, in a child
// process): an automatic loop falls back to epoll, says so once on stderr, and works.
#include <niox/buffer/byte_buffer.hpp>
#include <niox/loop/event_loop.hpp>

#include "support/loop_sockets.hpp"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <string>

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

namespace niox {
namespace {

bool refuse_io_uring_setup(int err) {
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
      BPF_STMT(BPF_RET | BPF_K,
               SECCOMP_RET_ERRNO | (static_cast<unsigned>(err) & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog prog{static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
  return ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
         ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) == 0;
}

// Exit codes of the child: 0 ok, 10+ the step that failed.
int child(int err) {
  if (!refuse_io_uring_setup(err)) return 10;
  if (EventLoop::backend_available(BackendKind::io_uring)) return 11;
  ::unsetenv("NIOX_BACKEND");
  EventLoop first;
  EventLoop second;  // the fallback is said once per process, not per loop
  if (first.backend() != BackendKind::epoll || second.backend() != BackendKind::epoll) return 12;
  try {
    EventLoop::Options o;
    o.backend = BackendKind::io_uring;
    EventLoop forced(o);
    return 13;  // a named backend that cannot run must throw
  } catch (const std::system_error&) {
  }
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, pair) != 0) return 14;
  FileDescriptor sv[2] = {FileDescriptor(pair[0]), FileDescriptor(pair[1])};
  ByteBuffer msg = ByteBuffer::allocate(3);
  msg.put(std::string_view("abc"));
  msg.flip();
  bool wrote = false;
  std::size_t got = 0;
  first.write(sv[0].get(), std::move(msg),
              [&](std::error_code ec, std::size_t, ByteBuffer) { wrote = !ec; });
  first.read(sv[1].get(), ByteBuffer::allocate(8),
             [&](std::error_code ec, std::size_t n, ByteBuffer) { got = ec ? 0 : n; });
  if (!test::run_until(
          first, [&] { return wrote && got == 3; }, std::chrono::seconds(10)))
    return 15;
  first.close(std::move(sv[0]));
  first.close(std::move(sv[1]));
  return 0;
}

class BackendFallback : public ::testing::TestWithParam<int> {};

TEST_P(BackendFallback, AutomaticLoopFallsBackToEpollAndSaysSoOnce) {
  int err_pipe[2];
  ASSERT_EQ(::pipe2(err_pipe, O_CLOEXEC), 0);
  FileDescriptor err_r(err_pipe[0]);
  FileDescriptor err_w(err_pipe[1]);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::dup2(err_w.get(), STDERR_FILENO);
    std::_Exit(child(GetParam()));
  }
  err_w.reset();  // the child's copy is the only writer: EOF when it exits
  std::string err;
  char buf[512];
  for (ssize_t n; (n = ::read(err_r.get(), buf, sizeof buf)) > 0;)
    err.append(buf, static_cast<std::size_t>(n));
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << err;
  std::string needle = "io_uring unavailable";
  auto first = err.find(needle);
  EXPECT_NE(first, std::string::npos) << err;
  EXPECT_EQ(err.find(needle, first + 1), std::string::npos) << "said more than once: " << err;
}

INSTANTIATE_TEST_SUITE_P(Errors, BackendFallback, ::testing::Values(ENOSYS, EPERM, ENOMEM),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return std::string(i.param == ENOSYS  ? "ENOSYS"
                                              : i.param == EPERM ? "EPERM"
                                                                 : "ENOMEM");
                         });

}  // namespace
}  // namespace niox
