// How many descriptors this process has open, for tests that check that their own work leaves
// none behind. Compare a count taken before with one taken after, around that work only: other
// threads of the same test may open descriptors of their own.
//
// In sanitized builds (NIOX_TEST_SANITIZED) the runtime opens descriptors of its own for a few
// microseconds, on whichever thread it checks: UBSan's vptr check, on a virtual call, finds out
// whether memory is readable by writing it into a pipe it opens and closes at once. A count taken
// while a loop thread runs may catch one, so there the count is the smallest of a few taken a
// millisecond apart: a descriptor the code under test holds is in every one of them.
#pragma once

#include <dirent.h>

#include <algorithm>
#include <chrono>
#include <thread>

namespace niox::test {

// Entries of /proc/self/fd, without the one opendir uses to list them; -1 if unreadable.
inline int open_fd_count_once() {
  DIR* d = ::opendir("/proc/self/fd");
  if (d == nullptr) return -1;
  int n = 0;
  while (::readdir(d) != nullptr) ++n;
  ::closedir(d);
  return n - 3;  // ".", "..", and the directory's own descriptor
}

inline int open_fd_count() {
#ifdef NIOX_TEST_SANITIZED
  int n = open_fd_count_once();
  for (int i = 0; i < 4; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    n = std::min(n, open_fd_count_once());
  }
  return n;
#else
  return open_fd_count_once();
#endif
}

}  // namespace niox::test
