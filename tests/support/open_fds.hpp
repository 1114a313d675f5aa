// How many descriptors this process has open, for tests that check that their own work leaves
// none behind. Compare a count taken before with one taken after, around that work only: other
// threads of the same test may open descriptors of their own.
#pragma once

#include <dirent.h>

namespace niox::test {

// Entries of /proc/self/fd, without the one opendir uses to list them; -1 if unreadable.
inline int open_fd_count() {
  DIR* d = ::opendir("/proc/self/fd");
  if (d == nullptr) return -1;
  int n = 0;
  while (::readdir(d) != nullptr) ++n;
  ::closedir(d);
  return n - 3;  // ".", "..", and the directory's own descriptor
}

}  // namespace niox::test
