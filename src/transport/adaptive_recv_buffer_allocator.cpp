#include <niox/transport/adaptive_recv_buffer_allocator.hpp>
#include <niox/buffer/buffer_pool.hpp>
#include <niox/transport/channel.hpp>

#include <algorithm>
#include <array>
#include <cstddef>

namespace niox {

namespace {

constexpr std::size_t index_increment = 4;
constexpr std::size_t index_decrement = 1;

constexpr auto make_size_table() {
  std::array<std::size_t, 31 + 22> t{};
  std::size_t n = 0;
  for (std::size_t i = 16; i < 512; i += 16) {
    t[n++] = i;
  }
  for (std::size_t i = 512; i <= (std::size_t{1} << 30); i <<= 1) {
    t[n++] = i;
  }
  return t;
}
constexpr auto size_table = make_size_table();

// The smallest index whose size is >= size (the last index when none is).
std::size_t size_table_index(std::size_t size) {
  auto it = std::lower_bound(size_table.begin(), size_table.end(), size);
  if (it == size_table.end()) {
    return size_table.size() - 1;
  }
  return static_cast<std::size_t>(it - size_table.begin());
}

// The default allocate function: the reading thread's BufferPool, whose blocks and shared_ptr
// control blocks come from a per-thread cache. A receive buffer lives from one read until the
// pipeline is done with it (an echo: until its bytes were written back), then the next read
// wants one of about the same size; so once warm a read costs no malloc and no zeroing. Bytes
// beyond what a read stored are not zeroed (they are outside [0, limit) after flip(); Netty's
// pooled buffers behave alike). Guesses above 64 KiB get a plain ByteBuffer::allocate().
ByteBuffer allocate_from_thread_pool(std::size_t n) {
  return BufferPool::for_this_thread().allocate(n);
}

}  // namespace

AdaptiveRecvBufferAllocator::AdaptiveRecvBufferAllocator(std::size_t minimum, std::size_t initial,
                                                         std::size_t maximum,
                                                         AllocateFunction allocate)
    : allocate_(std::move(allocate)) {
  if (minimum == 0 || initial < minimum || maximum < initial) {
    throw IllegalArgumentException("need 0 < minimum <= initial <= maximum");
  }
  min_index_ = size_table_index(minimum);
  max_index_ = size_table_index(maximum);
  if (size_table[max_index_] > maximum && max_index_ > 0) {
    --max_index_;  // never above the maximum
  }
  initial_index_ = std::clamp(size_table_index(initial), min_index_, max_index_);
  if (!allocate_) {
    allocate_ = allocate_from_thread_pool;
  }
}

AdaptiveRecvBufferAllocator::Handle AdaptiveRecvBufferAllocator::new_handle() const {
  Handle h;
  h.owner_ = this;
  h.index_ = static_cast<std::uint16_t>(initial_index_);
  h.next_size_ = static_cast<std::uint32_t>(size_table[initial_index_]);
  return h;
}

std::size_t AdaptiveRecvBufferAllocator::Handle::maximum() const noexcept {
  return owner_ ? size_table[owner_->max_index_] : next_size_;
}

void AdaptiveRecvBufferAllocator::Handle::reset(const ChannelConfig& config) {
  reset(config.max_messages_per_read(), config.is_auto_read());
}

void AdaptiveRecvBufferAllocator::Handle::reset(int max_messages_per_read,
                                                bool auto_read) noexcept {
  max_messages_ = max_messages_per_read;
  auto_read_ = auto_read;
  messages_ = 0;
  total_ = 0;
  attempted_ = 0;
  last_ = 0;
}

ByteBuffer AdaptiveRecvBufferAllocator::Handle::allocate() const {
  return owner_->allocate_(next_size_);
}

void AdaptiveRecvBufferAllocator::Handle::last_bytes_read(ssize_t n) noexcept {
  last_ = static_cast<std::int32_t>(std::min<ssize_t>(n, INT32_MAX));
  if (filled()) {
    // A full buffer: grow now rather than after the batch.
    record(static_cast<std::size_t>(n));
  }
  if (n > 0) {
    total_ += static_cast<std::size_t>(n);
  }
}

bool AdaptiveRecvBufferAllocator::Handle::continue_reading() const noexcept {
  return auto_read_ && filled() && messages_ < max_messages_ && total_ > 0;
}

void AdaptiveRecvBufferAllocator::Handle::read_complete() noexcept { record(total_); }

void AdaptiveRecvBufferAllocator::Handle::record(std::size_t actual) noexcept {
  std::size_t lower = index_ >= index_decrement ? index_ - index_decrement : 0;
  if (actual <= size_table[lower]) {
    if (decrease_now_) {
      index_ = static_cast<std::uint16_t>(std::max(lower, owner_->min_index_));
      next_size_ = static_cast<std::uint32_t>(size_table[index_]);
      decrease_now_ = false;
    } else {
      decrease_now_ = true;
    }
  } else if (actual >= next_size_) {
    index_ = static_cast<std::uint16_t>(std::min(index_ + index_increment, owner_->max_index_));
    next_size_ = static_cast<std::uint32_t>(size_table[index_]);
    decrease_now_ = false;
  }
}

}  // namespace niox
