#include <niox/buffer/buffer_pool.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <mutex>
#include <new>
#include <vector>

namespace niox {

namespace {

constexpr std::size_t min_shift = std::countr_zero(BufferPool::min_class_size);
constexpr std::size_t max_shift = std::countr_zero(BufferPool::max_class_size);
constexpr std::size_t class_count = max_shift - min_shift + 1;

std::size_t class_index(std::size_t n) noexcept {
  std::size_t size = std::bit_ceil(std::max(n, BufferPool::min_class_size));
  return static_cast<std::size_t>(std::countr_zero(size)) - min_shift;
}

constexpr std::size_t size_of_class(std::size_t index) noexcept {
  return BufferPool::min_class_size << index;
}

}  // namespace

class BufferPool::Arena {
 public:
  explicit Arena(std::size_t max_cached) : max_cached_(max_cached) {}
  ~Arena() { trim(); }

  std::byte* take(std::size_t index) {
    {
      std::lock_guard lock(mu_);
      ++stats_.allocations;
      stats_.outstanding_bytes += size_of_class(index);
      auto& list = free_[index];
      if (!list.empty()) {
        std::byte* p = list.back();
        list.pop_back();
        ++stats_.reused;
        stats_.cached_bytes -= size_of_class(index);
        return p;
      }
    }
    try {
      return static_cast<std::byte*>(::operator new(size_of_class(index)));
    } catch (...) {
      std::lock_guard lock(mu_);
      stats_.outstanding_bytes -= size_of_class(index);
      throw;
    }
  }

  void give_back(std::size_t index, std::byte* p) noexcept {
    std::size_t size = size_of_class(index);
    {
      std::lock_guard lock(mu_);
      stats_.outstanding_bytes -= size;
      auto& list = free_[index];
      if ((list.size() + 1) * size <= max_cached_) {
        try {
          list.push_back(p);
          stats_.cached_bytes += size;
          return;
        } catch (...) {
          // no room for the pointer: free the block below
        }
      }
    }
    ::operator delete(p);
  }

  void count_unpooled() {
    std::lock_guard lock(mu_);
    ++stats_.unpooled;
  }

  Stats stats() const {
    std::lock_guard lock(mu_);
    return stats_;
  }

  void trim() noexcept {
    std::array<std::vector<std::byte*>, class_count> lists;
    {
      std::lock_guard lock(mu_);
      lists.swap(free_);
      stats_.cached_bytes = 0;
    }
    for (auto& list : lists) {
      for (std::byte* p : list) {
        ::operator delete(p);
      }
    }
  }

 private:
  const std::size_t max_cached_;
  mutable std::mutex mu_;
  std::array<std::vector<std::byte*>, class_count> free_;
  Stats stats_;
};

BufferPool::BufferPool(std::size_t max_cached_bytes_per_class)
    : arena_(std::make_shared<Arena>(max_cached_bytes_per_class)) {}

BufferPool& BufferPool::for_this_thread() {
  static thread_local BufferPool pool;
  return pool;
}

std::size_t BufferPool::class_size(std::size_t n) noexcept {
  return n > max_class_size ? 0 : size_of_class(class_index(n));
}

ByteBuffer BufferPool::allocate(std::size_t n) {
  if (n > max_class_size) {
    arena_->count_unpooled();
    return ByteBuffer::allocate(n);
  }
  std::size_t index = class_index(n);
  std::byte* p = arena_->take(index);
  // The deleter holds the arena: a block always returns to a live pool. (Should the control
  // block fail to allocate, shared_ptr runs the deleter itself.)
  std::shared_ptr<void> owner(p, [arena = arena_, index](void* q) {
    arena->give_back(index, static_cast<std::byte*>(q));
  });
  return ByteBuffer::wrap_shared(std::span<std::byte>(p, n), std::move(owner));
}

BufferPool::Stats BufferPool::stats() const { return arena_->stats(); }

void BufferPool::trim() { arena_->trim(); }

}  // namespace niox
