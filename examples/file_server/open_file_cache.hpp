// OpenFileCache — recently served files, kept open (large ones) or in memory (small ones), so a
// hot file costs no system call at all: a cached small body is a shared, zero-copy slice of the
// cached bytes (ByteBuffer::slice), a cached large one a dup() of the kept descriptor.
//
// Like nginx's open_file_cache, an entry is trusted for `valid` (1 s by default) after it was
// opened; after that the next request re-resolves the path through FileRoot, with every check,
// and replaces the entry. A file changed in place may therefore be served stale for up to
// `valid`; a file replaced by rename or deleted, likewise. Only successful opens are cached.
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

using examples::UniqueFd;

struct CachedFile {
  std::string path;              // what was opened ("docs/index.html"), for Content-Type
  std::uint64_t size = 0;
  std::time_t mtime = 0;
  bool directory_index = false;
  ByteBuffer content;            // the whole file when it is small, else empty
  UniqueFd fd;                   // the open file when it is not kept in memory
  bool in_memory() const noexcept { return !fd.valid(); }
};

class OpenFileCache {
 public:
  using Clock = std::chrono::steady_clock;

  struct Config {
    std::size_t max_entries = 1024;
    std::size_t max_file_bytes = 16 * 1024;        // larger files keep a descriptor instead
    std::size_t max_total_bytes = 16 * 1024 * 1024;
    std::chrono::milliseconds valid{1000};
  };

  OpenFileCache() : OpenFileCache(Config{}) {}
  explicit OpenFileCache(Config config) : config_(config) {}

  // The entry for `relative` if it was opened less than `valid` before `now`, else nullptr.
  // The pointer is valid until the next insert() or clear().
  const CachedFile* find(std::string_view relative, Clock::time_point now);

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
    Clock::time_point opened_at;
  };
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };
  using List = std::list<Entry>;

  void erase(List::iterator it) noexcept;

  Config config_;
  List lru_;  // most recently used first
  std::unordered_map<std::string, List::iterator, Hash, std::equal_to<>> index_;
  std::size_t content_bytes_ = 0;
};

}  // namespace niox::http
