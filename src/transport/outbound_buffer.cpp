#include <niox/transport/outbound_buffer.hpp>
#include <niox/transport/transport_error.hpp>

#include <algorithm>
#include <new>

namespace niox {

OutboundBuffer::OutboundBuffer() = default;
OutboundBuffer::~OutboundBuffer() = default;

OutboundBuffer::EntryQueue::~EntryQueue() {
  while (size_ > 0) pop_front();
}

void OutboundBuffer::EntryQueue::grow() {
  // From four: a response is often a head, a body and the empty buffer of a close after it.
  const std::uint32_t capacity = std::max<std::uint32_t>(4, capacity_ * 2);
  Entry* grown = detail::CachedObjectAllocator<Entry>().allocate(capacity);
  for (std::uint32_t i = 0; i < size_; ++i) {
    Entry& from = (*this)[i];
    ::new (static_cast<void*>(grown + i)) Entry(std::move(from));
    from.~Entry();
  }
  if (slots_ != nullptr) detail::CachedObjectAllocator<Entry>().deallocate(slots_, capacity_);
  slots_ = grown;
  capacity_ = capacity;
  head_ = 0;
}

void OutboundBuffer::EntryQueue::emplace_back(Message&& msg, ChannelPromise&& promise,
                                              std::size_t size) {
  if (size_ == capacity_) grow();
  std::size_t at = head_ + size_;
  if (at >= capacity_) at -= capacity_;
  ::new (static_cast<void*>(slots_ + at)) Entry{std::move(msg), std::move(promise), size};
  ++size_;
}

void OutboundBuffer::EntryQueue::pop_front() noexcept {
  slots_[head_].~Entry();
  if (++head_ == capacity_) {
    head_ = 0;
  }
  if (--size_ == 0) {
    // Back to the thread's cache until the next write: an idle connection holds no room.
    detail::CachedObjectAllocator<Entry>().deallocate(slots_, capacity_);
    slots_ = nullptr;
    capacity_ = 0;
    head_ = 0;
  }
}

bool OutboundBuffer::add_message(Message&& msg, ChannelPromise promise) {
  std::size_t size = msg.readable_bytes();
  if (size > hard_limit_ || pending_bytes_ > hard_limit_ - size) {
    promise.try_failure(transport::Errc::outbound_buffer_full);
    return false;
  }
  entries_.emplace_back(std::move(msg), std::move(promise), size);
  pending_bytes_ += size;
  if (writable_ && pending_bytes_ > mark_.high) {
    writable_ = false;
    if (listener_) {
      listener_(listener_context_, false);
    }
  }
  return true;
}

void OutboundBuffer::decrement_pending(std::size_t n, bool notify) {
  pending_bytes_ -= n;
  if (!writable_ && pending_bytes_ < mark_.low) {
    writable_ = true;
    if (notify && listener_) {
      listener_(listener_context_, true);
    }
  }
}

void OutboundBuffer::RareDelete::operator()(Rare* r) const noexcept {
  r->~Rare();
  detail::CachedObjectAllocator<Rare>().deallocate(r, 1);
}

OutboundBuffer::Rare& OutboundBuffer::rare() {
  if (!rare_) {
    Rare* r = detail::CachedObjectAllocator<Rare>().allocate(1);
    rare_.reset(new (r) Rare());
  }
  return *rare_;
}

void OutboundBuffer::pop_front(std::error_code cause) {
  // Unlink first: the promise and the writability listener may lead to new writes.
  Entry e = std::move(entries_.front());
  entries_.pop_front();
  --flushed_;
  if (in_flight_ && cause) {
    rare().keep_alive.push_back(std::move(e.msg));
  }
  if (entries_.empty() && !in_flight_) {
    rare_.reset();  // nothing waits: the scratch block goes back to the pool
  }
  if (cause) {
    e.promise.try_failure(cause);
  } else {
    e.promise.try_success();
  }
  decrement_pending(e.size, true);
}

bool OutboundBuffer::remove() {
  if (flushed_ == 0) {
    return false;
  }
  pop_front({});
  return true;
}

bool OutboundBuffer::remove(std::error_code cause) {
  if (flushed_ == 0) {
    return false;
  }
  pop_front(cause ? cause : std::make_error_code(std::errc::io_error));
  return true;
}

GatherWrite OutboundBuffer::gather(std::size_t max_iovecs) {
  // Zero-length buffers at the front complete now: nothing of theirs needs the kernel.
  while (flushed_ != 0) {
    auto* b = entries_.front().msg.get_if<ByteBuffer>();
    if (b == nullptr || b->has_remaining()) {
      break;
    }
    pop_front({});
  }
  GatherWrite out;
  if (flushed_ == 0) {
    return out;
  }
  in_flight_ = true;
  Message& first = entries_.front().msg;
  if (auto* r = first.get_if<FileRegion>()) {
    out.file_region = r;
    return out;
  }
  if (!first.is_byte_buffer()) {
    out.other = &first;
    return out;
  }

  max_iovecs = std::clamp<std::size_t>(max_iovecs, 1, max_iovecs_per_call);
  // One array per thread, not per connection (16 KiB each, held while idle): every caller
  // copies the iovecs into its write before it gathers again.
  thread_local std::vector<iovec> iovecs(max_iovecs_per_call);
  std::span<std::byte> scratch;
  if (coalesce_threshold_ != 0) {
    ByteBuffer& s = rare().scratch;
    if (s.capacity() == 0) {
      s = ByteBuffer::allocate(
          std::max(default_scratch_size, 2 * std::size_t{coalesce_threshold_}));
    }
    s.clear();
    scratch = s.writable_bytes();
  }

  GatherBuilder builder(std::span<iovec>(iovecs.data(), max_iovecs), max_bytes_per_write(), scratch,
                        coalesce_threshold_);
  for (std::size_t i = 0; i < flushed_; ++i) {
    auto* b = entries_[i].msg.get_if<ByteBuffer>();
    if (b == nullptr) {
      // A file region or other message: written by its own path after these bytes.
      out.file_region_next = entries_[i].msg.get_if<FileRegion>() != nullptr;
      break;
    }
    if (!builder.add(b->bytes())) {
      break;
    }
  }
  out.iovecs = builder.iovecs();
  out.bytes = builder.bytes();
  return out;
}

void OutboundBuffer::remove_bytes(std::size_t n) {
  in_flight_ = false;
  if (rare_) rare_->keep_alive.clear();
  while (flushed_ != 0) {
    Entry& e = entries_.front();
    if (auto* b = e.msg.get_if<ByteBuffer>()) {
      std::size_t rem = b->remaining();
      if (rem <= n) {
        n -= rem;
        b->position(b->limit());
        pop_front({});
        continue;
      }
      if (n != 0) {
        b->position(b->position() + n);
      }
      return;
    }
    if (auto* r = e.msg.get_if<FileRegion>()) {
      auto rem = r->remaining();
      if (rem <= n) {
        n -= static_cast<std::size_t>(rem);
        r->add_transferred(rem);
        pop_front({});
        continue;
      }
      if (n != 0) {
        r->add_transferred(n);
      }
      return;
    }
    return;  // another message type: not a byte stream, removed with remove()
  }
}

void OutboundBuffer::gather_done() noexcept {
  in_flight_ = false;
  if (entries_.empty()) {
    rare_.reset();
  } else if (rare_) {
    rare_->keep_alive.clear();
  }
}

void OutboundBuffer::fail_flushed(std::error_code cause) {
  if (!cause) {
    cause = std::make_error_code(std::errc::io_error);
  }
  while (flushed_ != 0) {
    pop_front(cause);
  }
}

void OutboundBuffer::fail_all(std::error_code cause) {
  if (!cause) {
    cause = std::make_error_code(std::errc::io_error);
  }
  flushed_ = static_cast<std::uint32_t>(entries_.size());
  auto listener = listener_;
  listener_ = nullptr;  // closing: no writability events (Netty's notifyWritability=false)
  try {
    while (flushed_ != 0) {
      pop_front(cause);
    }
  } catch (...) {
    listener_ = listener;
    throw;
  }
  listener_ = listener;
}

std::size_t OutboundBuffer::bytes_before_unwritable() const noexcept {
  if (!writable_) {
    return 0;
  }
  // Unwritable once pending exceeds high.
  return mark_.high >= pending_bytes_ ? mark_.high - pending_bytes_ + 1 : 0;
}

std::size_t OutboundBuffer::bytes_before_writable() const noexcept {
  if (writable_) {
    return 0;
  }
  return pending_bytes_ >= mark_.low ? pending_bytes_ - mark_.low + 1 : 0;
}

void OutboundBuffer::set_water_mark(WriteBufferWaterMark mark) {
  if (mark.low > mark.high) {
    throw IllegalArgumentException("write buffer water mark: low > high");
  }
  mark_ = mark;
}

void OutboundBuffer::set_max_bytes_per_write(std::size_t bytes) noexcept {
  max_bytes_ = static_cast<std::uint32_t>(std::clamp<std::size_t>(bytes, 1, max_bytes_per_call));
}

void OutboundBuffer::adapt_max_bytes_per_write(std::size_t attempted,
                                               std::size_t written) noexcept {
  constexpr std::size_t low_threshold = 4096;
  if (attempted == written) {
    if (attempted * 2 > max_bytes_per_write()) {
      set_max_bytes_per_write(attempted * 2);
    }
  } else if (attempted > low_threshold && written < attempted / 2) {
    set_max_bytes_per_write(attempted / 2);
  }
}

}  // namespace niox
