// A syscall fault-injection shim for tests. Linked only into the reliability test executable,
// never into the library.
//
// The shim defines, in the test executable, read, readv, recv, recvmsg, write, writev, send,
// sendmsg, accept and accept4; fstat, fcntl and getsockopt (to count the questions a library
// asks of a descriptor); and setsockopt (to count the options it sets on one). The
// executable's definitions win over libc's for every caller in the process, the library
// included; each one forwards to the next definition (libc, or a sanitizer runtime's
// interceptor) found with dlsym(RTLD_NEXT). Nothing changes until a rule is armed: the unarmed
// cost is one relaxed atomic load per call.
//
//   niox::test::fault::Armed r({.calls = fault::writes, .fd = fd, .after = 2, .error = EINTR});
//   ... the 3rd write-side call on fd fails with EINTR, once; r.fired() == 1 afterwards ...
//
// A rule matches a call when the call is in `calls`, the descriptor is `fd` (or any when -1) and
// the socket's local port is `local_port` (or any when -1; a port lets a test aim at a server's
// accepted connections without knowing their descriptors). It lets `after` matching calls
// through untouched, then acts on `times` of them (0: every one from then on):
//   error != 0       the call fails with that errno without reaching the kernel;
//   max_bytes != 0   the call reaches the kernel asking for at most max_bytes (a short count);
//   random_short     the call reaches the kernel asking for a random count in [1, asked];
//   none of these    the rule only observes: seen(), fired() and largest_request() count.
// Rules apply to every thread (an event loop group's threads included). The first armed rule
// that acts on a call decides it. Rules are checked under a mutex, so armed tests are slower.
//
// io_uring operations never pass through libc: on the io_uring backend (not its per-operation
// fallback) the shim sees nothing of the loop's I/O, and tests provoke those cases with the
// backend's own means (tiny rings, slow readers, real resource limits).
#pragma once

#include <cstddef>
#include <cstdint>

namespace niox::test::fault {

enum Call : unsigned {
  call_read = 1u << 0,
  call_readv = 1u << 1,
  call_recv = 1u << 2,
  call_recvmsg = 1u << 3,
  call_write = 1u << 4,
  call_writev = 1u << 5,
  call_send = 1u << 6,
  call_sendmsg = 1u << 7,
  call_accept = 1u << 8,
  call_accept4 = 1u << 9,
  call_fstat = 1u << 10,
  call_fcntl = 1u << 11,
  call_getsockopt = 1u << 12,
  call_setsockopt = 1u << 13,
};
inline constexpr unsigned reads = call_read | call_readv | call_recv | call_recvmsg;
inline constexpr unsigned writes = call_write | call_writev | call_send | call_sendmsg;
inline constexpr unsigned accepts = call_accept | call_accept4;
inline constexpr unsigned questions = call_fstat | call_fcntl | call_getsockopt;

struct Rule {
  unsigned calls = 0;
  int fd = -1;
  int local_port = -1;
  std::uint64_t after = 0;
  std::uint64_t times = 1;
  int error = 0;
  std::size_t max_bytes = 0;
  bool random_short = false;
  std::uint64_t seed = 1;
};

// Arms a rule; returns its id for seen()/fired()/disarm().
int arm(const Rule& rule);
void disarm(int id);
void disarm_all();
// Matching calls observed so far (including those let through by `after`).
std::uint64_t seen(int id);
// Calls the rule acted on (or, for an observing rule, matching calls after `after`).
std::uint64_t fired(int id);
// The largest byte count a matching call asked for.
std::size_t largest_request(int id);

// Arms a rule for the lifetime of the object.
class Armed {
 public:
  explicit Armed(const Rule& rule) : id_(arm(rule)) {}
  ~Armed() { disarm(id_); }
  Armed(const Armed&) = delete;
  Armed& operator=(const Armed&) = delete;
  std::uint64_t seen() const { return fault::seen(id_); }
  std::uint64_t fired() const { return fault::fired(id_); }
  std::size_t largest_request() const { return fault::largest_request(id_); }
  int id() const { return id_; }

 private:
  int id_;
};

}  // namespace niox::test::fault
