#include "open_file_cache.hpp"

#include <cerrno>

#include <unistd.h>

namespace niox::http {

bool OpenFileCache::still_valid(const FileRoot& root, Entry& e,
                                Clock::time_point now) const noexcept {
  if (now - e.checked_at < config_.valid) {
    return true;
  }
  FileIdentity current;
  if (!root.identity_of(e.file.path, current) || current != e.file.identity) {
    return false;
  }
  e.checked_at = now;
  return true;
}

const CachedFile* OpenFileCache::find(const FileRoot& root, std::string_view relative,
                                      Clock::time_point now) {
  auto it = index_.find(relative);
  if (it == index_.end()) {
    return nullptr;
  }
  if (!still_valid(root, *it->second, now)) {
    erase(it->second);
    return nullptr;
  }
  lru_.splice(lru_.begin(), lru_, it->second);
  return &it->second->file;
}

void OpenFileCache::sweep(const FileRoot& root, Clock::time_point now) {
  for (auto it = lru_.begin(); it != lru_.end();) {
    auto next = std::next(it);
    if (!still_valid(root, *it, now)) {
      erase(it);
    }
    it = next;
  }
}

const CachedFile* OpenFileCache::insert(std::string_view relative, OpenResult&& opened,
                                        Clock::time_point now) {
  // On nullptr `opened` is left as it was, so the caller can still answer from it uncached.
  if (opened.status != HttpStatus::ok || config_.max_entries == 0) {
    return nullptr;
  }
  const std::uint64_t size = opened.file.size;
  const bool small = size <= config_.max_file_bytes && size <= config_.max_total_bytes;
  ByteBuffer content;
  if (small) {
    content = ByteBuffer::allocate(static_cast<std::size_t>(size));
    auto dst = content.writable_bytes();
    std::uint64_t offset = 0;
    while (!dst.empty()) {
      ssize_t n = ::pread(opened.file.fd.get(), dst.data(), dst.size(), static_cast<off_t>(offset));
      if (n < 0 && errno == EINTR) {
        continue;
      }
      if (n <= 0) {
        return nullptr;  // shrank or failed since fstat
      }
      dst = dst.subspan(static_cast<std::size_t>(n));
      offset += static_cast<std::uint64_t>(n);
    }
  }
  if (auto it = index_.find(relative); it != index_.end()) {
    erase(it->second);
  }
  Entry entry{std::string(relative), {}, now};
  CachedFile& f = entry.file;
  f.path = std::move(opened.file.path);
  f.size = size;
  f.mtime = opened.file.mtime;
  f.directory_index = opened.directory_index;
  f.identity = opened.file.identity;
  if (small) {
    f.content = content.as_read_only_buffer();  // responses share it: nobody may write
    content_bytes_ += static_cast<std::size_t>(size);
    opened.file.fd.reset();
  } else {
    f.fd = std::move(opened.file.fd);
  }
  lru_.push_front(std::move(entry));
  index_.emplace(lru_.front().key, lru_.begin());
  while (index_.size() > config_.max_entries || content_bytes_ > config_.max_total_bytes) {
    erase(std::prev(lru_.end()));
  }
  return &lru_.front().file;
}

void OpenFileCache::erase(List::iterator it) noexcept {
  if (it->file.in_memory()) {
    content_bytes_ -= static_cast<std::size_t>(it->file.size);
  }
  index_.erase(it->key);
  lru_.erase(it);
}

void OpenFileCache::clear() noexcept {
  index_.clear();
  lru_.clear();
  content_bytes_ = 0;
}

}  // namespace niox::http
