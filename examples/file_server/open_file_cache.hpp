// OpenFileCache — recently served files, kept open (large ones) or in memory (small ones), so a
// hot file costs no system call at all: a cached small body is a shared, zero-copy slice of the
// cached bytes (ByteBuffer::slice), a cached large one a dup() of the kept descriptor.
//
// An entry is trusted for `valid` (100 ms by default) after it was last checked. The first use
// after that checks it again: one stat of its path relative to the root (FileRoot::identity_of),
// compared with what was opened (device, inode, size, modification and status-change times). The
// same file is used on; a deleted, replaced or changed one is dropped (its descriptor closed) and
// the request re-resolves the path through FileRoot, with every check. So a change is served
// stale for at most `valid`. sweep(), which the server runs every second on each loop, checks
// the entries nobody asked for, so that a deleted file's descriptor is not kept open until its
// path is requested again. Only successful opens are cached.
//
// Not thread-safe: one cache per event loop (it is cheap), passed to StaticFileResponder::respond.
// Bounded: at most max_entries entries and max_total_bytes of cached content, least recently used
// entries evicted first.
#pragma once

#include "file_root.hpp"

#include <niox/buffer/byte_buffer.hpp>

#include <chrono>
#include <cstddef>
#include <list>
#include <string>
#include <string_view>
#include <unordered_map>

namespace niox::http {

struct CachedFile {
  std::string path;  // what was opened ("docs/index.html"), for Content-Type
  std::uint64_t size = 0;
  std::time_t mtime = 0;
  bool directory_index = false;
  FileIdentity identity;  // of the file when it was opened
  ByteBuffer content;     // the whole file when it is small, else empty
  FileDescriptor fd;      // the open file when it is not kept in memory
  bool in_memory() const noexcept { return !fd.valid(); }
};

class OpenFileCache {
 public:
  using Clock = std::chrono::steady_clock;

  struct Config {
    std::size_t max_entries = 1024;
    std::size_t max_file_bytes = 16 * 1024;  // larger files keep a descriptor instead
    std::size_t max_total_bytes = 16 * 1024 * 1024;
    std::chrono::milliseconds valid{100};  // an entry is used this long without a check
  };

  OpenFileCache() : OpenFileCache(Config{}) {}
  explicit OpenFileCache(Config config) : config_(config) {}

  // The entry for `relative` (opened from `root`), checked against the file system first if
  // it was last checked `valid` or more before `now`; nullptr if there is none or the file
  // changed (the entry is then dropped). The pointer is valid until the next insert(), sweep()
  // or clear().
  const CachedFile* find(const FileRoot& root, std::string_view relative, Clock::time_point now);

  // Checks every entry last checked `valid` or more before `now` and drops those whose file was
  // deleted, replaced or changed, closing their descriptors.
  void sweep(const FileRoot& root, Clock::time_point now);

  // Caches a file just opened for `relative` (taking its descriptor; a small file is read into
  // memory and its descriptor closed) and returns the entry; nullptr if reading it failed.
  const CachedFile* insert(std::string_view relative, OpenResult&& opened, Clock::time_point now);

  std::size_t size() const noexcept { return index_.size(); }
  std::size_t content_bytes() const noexcept { return content_bytes_; }
  void clear() noexcept;

 private:
  struct Entry {
    std::string key;
    CachedFile file;
    Clock::time_point checked_at;  // opened, or last found unchanged
  };
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept {
      return std::hash<std::string_view>{}(s);
    }
  };
  using List = std::list<Entry>;

  void erase(List::iterator it) noexcept;
  // Whether `e` may be used at `now`: recently checked, or checked now and unchanged.
  bool still_valid(const FileRoot& root, Entry& e, Clock::time_point now) const noexcept;

  Config config_;
  List lru_;  // most recently used first
  std::unordered_map<std::string, List::iterator, Hash, std::equal_to<>> index_;
  std::size_t content_bytes_ = 0;
};

}  // namespace niox::http
