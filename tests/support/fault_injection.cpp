// See fault_injection.hpp. Built only into the reliability tests (tests/CMakeLists.txt).
#include "fault_injection.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdarg>
#include <mutex>

#include <dlfcn.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

namespace niox::test::fault {
namespace {

struct Slot {
  bool used = false;
  Rule rule;
  std::uint64_t seen = 0;
  std::uint64_t fired = 0;
  std::size_t largest = 0;
  std::uint64_t rng = 1;
};

constexpr int kSlots = 16;
std::mutex mutex;
std::array<Slot, kSlots> slots;
std::atomic<int> armed_count{0};

std::uint64_t next_random(std::uint64_t& s) {
  s ^= s >> 12;
  s ^= s << 25;
  s ^= s >> 27;
  return s * 0x2545F4914F6CDD1Dull;
}

int local_port_of(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return -2;
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return -2;
}

struct Decision {
  int error = 0;          // fail with this errno
  std::size_t limit = 0;  // ask the kernel for at most this many bytes (0: unchanged)
};

Decision decide(Call call, int fd, std::size_t asked) {
  Decision d;
  if (armed_count.load(std::memory_order_relaxed) == 0) return d;
  int saved = errno;
  std::lock_guard lock(mutex);
  int port = -3;  // not looked up yet
  for (Slot& s : slots) {
    if (!s.used || !(s.rule.calls & call)) continue;
    if (s.rule.fd >= 0 && s.rule.fd != fd) continue;
    if (s.rule.local_port >= 0) {
      if (port == -3) port = local_port_of(fd);
      if (port != s.rule.local_port) continue;
    }
    ++s.seen;
    s.largest = std::max(s.largest, asked);
    if (s.seen <= s.rule.after) continue;
    bool acts = s.rule.error != 0 || s.rule.max_bytes != 0 || s.rule.random_short;
    if (s.rule.times != 0 && s.fired >= s.rule.times) continue;
    ++s.fired;
    if (!acts || d.error != 0 || d.limit != 0) continue;  // observers only count
    if (s.rule.error != 0) {
      d.error = s.rule.error;
    } else if (s.rule.max_bytes != 0) {
      d.limit = std::min(asked, s.rule.max_bytes);
    } else if (asked > 0) {
      d.limit = 1 + static_cast<std::size_t>(next_random(s.rng) % asked);
    }
  }
  errno = saved;
  return d;
}

template <class Fn>
Fn next(const char* name) {
  void* p = ::dlsym(RTLD_NEXT, name);
  if (p == nullptr) ::abort();
  return reinterpret_cast<Fn>(p);
}

std::size_t total(const iovec* iov, std::size_t n) {
  std::size_t t = 0;
  for (std::size_t i = 0; i < n; ++i) t += iov[i].iov_len;
  return t;
}

// The first `limit` bytes of iov as a new iovec array (at most IOV_MAX entries).
struct Truncated {
  std::array<iovec, IOV_MAX> iov;
  std::size_t n = 0;
  Truncated(const iovec* src, std::size_t count, std::size_t limit) {
    for (std::size_t i = 0; i < count && i < iov.size() && limit > 0; ++i) {
      iov[n] = src[i];
      iov[n].iov_len = std::min(iov[n].iov_len, limit);
      limit -= iov[n].iov_len;
      ++n;
    }
  }
};

ssize_t fail(int e) {
  errno = e;
  return -1;
}

// readv and writev: the rule sees the whole vector; a short count cuts it.
ssize_t vectored(ssize_t (*real)(int, const iovec*, int), Call call, int fd, const iovec* iov,
                 int n) {
  Decision d = decide(call, fd, n > 0 ? total(iov, static_cast<std::size_t>(n)) : 0);
  if (d.error) return fail(d.error);
  if (d.limit == 0) return real(fd, iov, n);
  Truncated t(iov, static_cast<std::size_t>(n), d.limit);
  return real(fd, t.iov.data(), static_cast<int>(t.n));
}

// `msg` with its iovecs cut to `t`.
msghdr with_iov(const msghdr& msg, Truncated& t) {
  msghdr copy = msg;
  copy.msg_iov = t.iov.data();
  copy.msg_iovlen = t.n;
  return copy;
}

}  // namespace

int arm(const Rule& rule) {
  std::lock_guard lock(mutex);
  for (int i = 0; i < kSlots; ++i) {
    if (!slots[i].used) {
      slots[i] = Slot{true, rule, 0, 0, 0, rule.seed != 0 ? rule.seed : 1};
      armed_count.fetch_add(1, std::memory_order_relaxed);
      return i;
    }
  }
  ::abort();  // more rules than a test needs
}

void disarm(int id) {
  std::lock_guard lock(mutex);
  if (id >= 0 && id < kSlots && slots[id].used) {
    slots[id].used = false;
    armed_count.fetch_sub(1, std::memory_order_relaxed);
  }
}

void disarm_all() {
  for (int i = 0; i < kSlots; ++i) disarm(i);
}

std::uint64_t seen(int id) {
  std::lock_guard lock(mutex);
  return slots[id].seen;
}

std::uint64_t fired(int id) {
  std::lock_guard lock(mutex);
  return slots[id].fired;
}

std::size_t largest_request(int id) {
  std::lock_guard lock(mutex);
  return slots[id].largest;
}

}  // namespace niox::test::fault

using namespace niox::test::fault;

extern "C" {

ssize_t read(int fd, void* buf, size_t len) {
  static auto real = next<ssize_t (*)(int, void*, size_t)>("read");
  Decision d = decide(call_read, fd, len);
  if (d.error) return fail(d.error);
  return real(fd, buf, d.limit ? d.limit : len);
}

ssize_t recv(int fd, void* buf, size_t len, int flags) {
  static auto real = next<ssize_t (*)(int, void*, size_t, int)>("recv");
  Decision d = decide(call_recv, fd, len);
  if (d.error) return fail(d.error);
  return real(fd, buf, d.limit ? d.limit : len, flags);
}

ssize_t write(int fd, const void* buf, size_t len) {
  static auto real = next<ssize_t (*)(int, const void*, size_t)>("write");
  Decision d = decide(call_write, fd, len);
  if (d.error) return fail(d.error);
  return real(fd, buf, d.limit ? d.limit : len);
}

ssize_t send(int fd, const void* buf, size_t len, int flags) {
  static auto real = next<ssize_t (*)(int, const void*, size_t, int)>("send");
  Decision d = decide(call_send, fd, len);
  if (d.error) return fail(d.error);
  return real(fd, buf, d.limit ? d.limit : len, flags);
}

ssize_t readv(int fd, const struct iovec* iov, int n) {
  static auto real = next<ssize_t (*)(int, const iovec*, int)>("readv");
  return vectored(real, call_readv, fd, iov, n);
}

ssize_t writev(int fd, const struct iovec* iov, int n) {
  static auto real = next<ssize_t (*)(int, const iovec*, int)>("writev");
  return vectored(real, call_writev, fd, iov, n);
}

ssize_t recvmsg(int fd, struct msghdr* msg, int flags) {
  static auto real = next<ssize_t (*)(int, msghdr*, int)>("recvmsg");
  Decision d = decide(call_recvmsg, fd, total(msg->msg_iov, msg->msg_iovlen));
  if (d.error) return fail(d.error);
  if (d.limit == 0) return real(fd, msg, flags);
  Truncated t(msg->msg_iov, msg->msg_iovlen, d.limit);
  msghdr copy = with_iov(*msg, t);
  ssize_t r = real(fd, &copy, flags);
  msg->msg_namelen = copy.msg_namelen;
  msg->msg_controllen = copy.msg_controllen;
  msg->msg_flags = copy.msg_flags;
  return r;
}

ssize_t sendmsg(int fd, const struct msghdr* msg, int flags) {
  static auto real = next<ssize_t (*)(int, const msghdr*, int)>("sendmsg");
  Decision d = decide(call_sendmsg, fd, total(msg->msg_iov, msg->msg_iovlen));
  if (d.error) return fail(d.error);
  if (d.limit == 0) return real(fd, msg, flags);
  Truncated t(msg->msg_iov, msg->msg_iovlen, d.limit);
  msghdr copy = with_iov(*msg, t);
  return real(fd, &copy, flags);
}

int accept(int fd, struct sockaddr* addr, socklen_t* len) {
  static auto real = next<int (*)(int, sockaddr*, socklen_t*)>("accept");
  Decision d = decide(call_accept, fd, 0);
  if (d.error) return static_cast<int>(fail(d.error));
  return real(fd, addr, len);
}

int accept4(int fd, struct sockaddr* addr, socklen_t* len, int flags) {
  static auto real = next<int (*)(int, sockaddr*, socklen_t*, int)>("accept4");
  Decision d = decide(call_accept4, fd, 0);
  if (d.error) return static_cast<int>(fail(d.error));
  return real(fd, addr, len, flags);
}

int fstat(int fd, struct stat* st) {
  static auto real = next<int (*)(int, struct stat*)>("fstat");
  Decision d = decide(call_fstat, fd, 0);
  if (d.error) return static_cast<int>(fail(d.error));
  return real(fd, st);
}

// Every fcntl command takes an int, a pointer or nothing: forwarding one pointer-sized argument
// serves each of them on the x86-64 and aarch64 calling conventions.
int fcntl(int fd, int cmd, ...) {
  static auto real = next<int (*)(int, int, ...)>("fcntl");
  va_list ap;
  va_start(ap, cmd);
  void* arg = va_arg(ap, void*);
  va_end(ap);
  Decision d = decide(call_fcntl, fd, 0);
  if (d.error) return static_cast<int>(fail(d.error));
  return real(fd, cmd, arg);
}

int getsockopt(int fd, int level, int name, void* value, socklen_t* len) {
  static auto real = next<int (*)(int, int, int, void*, socklen_t*)>("getsockopt");
  Decision d = decide(call_getsockopt, fd, 0);
  if (d.error) return static_cast<int>(fail(d.error));
  return real(fd, level, name, value, len);
}

int setsockopt(int fd, int level, int name, const void* value, socklen_t len) {
  static auto real = next<int (*)(int, int, int, const void*, socklen_t)>("setsockopt");
  Decision d = decide(call_setsockopt, fd, 0);
  if (d.error) return static_cast<int>(fail(d.error));
  return real(fd, level, name, value, len);
}

}  // extern "C"
