// OutboundBuffer: the queue between a channel's write()/flush() and the socket
// (Netty's ChannelOutboundBuffer).
//
//   add_message()        add_flush()                 gather() + remove_bytes(n)
//        |                    |                               |
//        v                    v                               v
//   [ e0 | e1 | e2 ]|[ e3 | e4 ]        [ e0 e1 e2 e3 e4 ]|         [ e1' e2 e3 e4 ]
//    flushed prefix   unflushed          all flushed                e0 done, e1 mid-buffer
//
// write() queues an entry (a ByteBuffer, a FileRegion, or — for EmbeddedChannel — any Message)
// with its promise; flush() marks everything queued so far as flushed; the transport then
// repeatedly asks gather() for ONE gathering write over the flushed prefix, hands it to the
// kernel, and reports what the kernel took with remove_bytes(n). Entries complete in order,
// each exactly once: success when its last byte was taken, failure (fail_all) on close.
//
// Ownership: the buffer owns each queued Message (and so keeps its memory alive) until the
// entry completes. The memory the iovecs returned by gather() point at (those buffers and a
// scratch buffer owned here) stays valid and unchanged until remove_bytes() or gather_done() is
// called — also across fail_all(), which keeps the in-flight messages alive until then, so an
// io_uring write still owned by the kernel never sees freed memory. The iovec array itself is
// the calling thread's, shared by every buffer on it: read it before the next gather().
//
// Memory: an empty buffer holds nothing. The entry ring goes back to the thread's block cache
// when the last entry completes, and the scratch buffer to the pool, so an idle connection
// costs only the object itself.
//
// Backpressure: pending bytes above the high water mark make the buffer unwritable, below the
// low mark writable again; each flip calls the writability listener (the channel fires
// channel_writability_changed). Above the hard limit a write is refused: its promise fails with
// Errc::outbound_buffer_full and nothing is queued, so memory stays bounded when a producer
// ignores writability.
//
// Threads: the channel's executor thread only.
#pragma once

#include <niox/buffer/buffer_pool.hpp>
#include <niox/buffer/byte_buffer.hpp>
#include <niox/buffer/gather.hpp>
#include <niox/transport/channel_future.hpp>
#include <niox/transport/message.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <system_error>
#include <vector>

#include <sys/uio.h>

namespace niox {

struct WriteBufferWaterMark {
  std::size_t low = 32 * 1024;
  std::size_t high = 64 * 1024;
};

// One gathering write, as built by OutboundBuffer::gather().
struct GatherWrite {
  // Non-empty ByteBuffer pieces of the flushed prefix, in order (or empty).
  std::span<const iovec> iovecs;
  // Sum of the iovec lengths.
  std::size_t bytes = 0;
  // Set when the first flushed entry is a FileRegion: send it by the transfer path
  // (EventLoop::transfer_to), then report with remove_bytes(). iovecs is empty then.
  FileRegion* file_region = nullptr;
  // Set when the first flushed entry is neither bytes nor a file: the transport decides
  // (a socket transport never queues one; EmbeddedChannel hands it out as is).
  Message* other = nullptr;
  // Set when these bytes are the whole run in front of a flushed FileRegion (a response's
  // header before its file body): a TCP transport sends them with MSG_MORE so that they leave
  // with the file's first bytes instead of as a segment of their own.
  bool file_region_next = false;

  bool empty() const noexcept { return bytes == 0 && file_region == nullptr && other == nullptr; }
  // One contiguous piece: use write()/send() instead of writev()/sendmsg().
  bool single() const noexcept { return iovecs.size() == 1; }
};

class OutboundBuffer {
 public:
  // A plain function and its context, not a std::function: every connection has one (its
  // channel), and the pair takes half the room.
  using WritabilityListener = void (*)(void* context, bool writable);

  static constexpr std::size_t default_hard_limit = 128u * 1024 * 1024;
  static constexpr std::size_t default_scratch_size = 16 * 1024;

  OutboundBuffer();
  ~OutboundBuffer();
  OutboundBuffer(const OutboundBuffer&) = delete;
  OutboundBuffer& operator=(const OutboundBuffer&) = delete;

  // ---- Queueing -----------------------------------------------------------------------------
  // Queues `msg` unflushed. Returns false, failing `promise` with Errc::outbound_buffer_full and
  // dropping msg, when its bytes would take total_pending_bytes() above the hard limit. `msg` is
  // moved from only when queued.
  bool add_message(Message&& msg, ChannelPromise promise);
  // Marks every queued entry flushed.
  void add_flush() noexcept { flushed_ = static_cast<std::uint32_t>(entries_.size()); }

  // ---- Draining -----------------------------------------------------------------------------
  // ONE gathering write over the flushed prefix: at most `max_iovecs` iovecs (clamped to
  // IOV_MAX) and max_bytes_per_write() bytes, stopping in front of the first entry that is not
  // a ByteBuffer. Completes leading zero-length buffers first. Runs of two or more pieces of at
  // most coalesce_threshold() bytes are copied together into the scratch buffer (GatherBuilder
  // in buffer/gather.hpp); a full scratch ends the gather there, the next one goes on.
  GatherWrite gather(std::size_t max_iovecs = max_iovecs_per_call);
  // The kernel took `n` bytes of the last gather() (or of the file region at the head): advances
  // the entries by exactly n — a partly written buffer keeps its new position — and completes
  // every entry that is now fully written (zero-length ones included) with success. n beyond
  // what is flushed is a caller bug and is clamped.
  void remove_bytes(std::size_t n);
  // Ends the in-flight gather without progress (EAGAIN, error): releases what fail_all() kept.
  void gather_done() noexcept;

  // The first flushed entry, or null.
  Message* current() noexcept { return flushed_ ? &entries_.front().msg : nullptr; }
  // Completes the first flushed entry with success (or `cause`). False if there is none.
  bool remove();
  bool remove(std::error_code cause);

  // Fails every flushed entry with `cause`, once each.
  void fail_flushed(std::error_code cause);
  // Fails every entry, flushed or not, with `cause` (on close). Resets writability quietly.
  void fail_all(std::error_code cause);

  // ---- State --------------------------------------------------------------------------------
  bool is_empty() const noexcept { return flushed_ == 0; }  // nothing flushed left
  std::size_t size() const noexcept { return flushed_; }    // flushed entries
  std::size_t total_entries() const noexcept { return entries_.size(); }
  std::size_t total_pending_bytes() const noexcept { return pending_bytes_; }
  bool is_writable() const noexcept { return writable_; }
  // Bytes that can be queued before is_writable() turns false (0 when unwritable).
  std::size_t bytes_before_unwritable() const noexcept;
  // Bytes that must drain before is_writable() turns true (0 when writable).
  std::size_t bytes_before_writable() const noexcept;

  // ---- Settings -----------------------------------------------------------------------------
  // Throws IllegalArgumentException if low > high.
  void set_water_mark(WriteBufferWaterMark mark);
  WriteBufferWaterMark water_mark() const noexcept { return mark_; }
  void set_hard_limit(std::size_t bytes) noexcept { hard_limit_ = bytes; }
  std::size_t hard_limit() const noexcept { return hard_limit_; }
  // Called on each writability flip, after the buffer's state is updated (it may write), with
  // `context`; nullptr for none.
  void set_writability_listener(WritabilityListener l, void* context) noexcept {
    listener_ = l;
    listener_context_ = context;
  }

  // Byte budget of one gather (clamped to [1, max_bytes_per_call]). Until it is set, a gather
  // takes up to max_bytes_per_call. The socket transport sets it from SO_SNDBUF before the
  // first write large enough for it to matter, and adapt_max_bytes_per_write() tunes it.
  void set_max_bytes_per_write(std::size_t bytes) noexcept;
  std::size_t max_bytes_per_write() const noexcept {
    return max_bytes_ != 0 ? max_bytes_ : max_bytes_per_call;
  }
  // Whether anyone (the transport, the user, adapt_max_bytes_per_write) has set the budget.
  bool max_bytes_per_write_set() const noexcept { return max_bytes_ != 0; }
  // Netty's rule: a write that took everything it was offered doubles the budget (when the
  // offer was near it), one that took less than half of a large offer halves it.
  void adapt_max_bytes_per_write(std::size_t attempted, std::size_t written) noexcept;

  // Pieces of at most this many bytes are coalesced into the scratch buffer (0: never). Clamped
  // to max_bytes_per_call, which one write never exceeds.
  void set_coalesce_threshold(std::size_t bytes) noexcept {
    coalesce_threshold_ = static_cast<std::uint32_t>(std::min(bytes, max_bytes_per_call));
  }
  std::size_t coalesce_threshold() const noexcept { return coalesce_threshold_; }

 private:
  struct Entry {
    Message msg;
    ChannelPromise promise;
    std::size_t size;  // counted against the water marks until the entry completes
  };

  // A ring of entries. Its storage comes from the thread's block cache and goes back there
  // when the ring empties: a steady stream of writes costs no malloc, an idle connection no
  // memory. References are stable until the next emplace_back.
  class EntryQueue {
   public:
    EntryQueue() noexcept = default;
    EntryQueue(EntryQueue&& other) noexcept { swap(other); }
    EntryQueue& operator=(EntryQueue&& other) noexcept {
      EntryQueue gone(std::move(*this));
      swap(other);
      return *this;
    }
    ~EntryQueue();
    bool empty() const noexcept { return size_ == 0; }
    std::size_t size() const noexcept { return size_; }
    Entry& front() noexcept { return slots_[head_]; }
    Entry& operator[](std::size_t i) noexcept {
      std::size_t at = head_ + i;
      return slots_[at < capacity_ ? at : at - capacity_];
    }
    // Makes the entry in its slot: the message is moved once, from the caller.
    void emplace_back(Message&& msg, ChannelPromise&& promise, std::size_t size);
    // Drops the front entry (moved from by the caller, or not).
    void pop_front() noexcept;

   private:
    void grow();
    void swap(EntryQueue& other) noexcept {
      std::swap(slots_, other.slots_);
      std::swap(capacity_, other.capacity_);
      std::swap(head_, other.head_);
      std::swap(size_, other.size_);
    }
    // Raw room for capacity_ entries, of which the size_ from head_ on (wrapping) exist: a slot
    // is made by emplace_back and unmade by pop_front, never default-made.
    Entry* slots_ = nullptr;
    // 32-bit counts: every connection has a queue, and 2^32 entries cannot fit in memory.
    std::uint32_t capacity_ = 0;
    std::uint32_t head_ = 0;
    std::uint32_t size_ = 0;
  };

  // What only coalescing and a failure while in flight need: made then from the thread's block
  // cache, given back once nothing waits, so an idle connection carries none of it.
  struct Rare {
    ByteBuffer scratch;               // coalesced tiny pieces; from the pool while bytes wait
    std::vector<Message> keep_alive;  // messages failed while in flight
  };
  struct RareDelete {
    void operator()(Rare* r) const noexcept;
  };

  void pop_front(std::error_code cause);
  void decrement_pending(std::size_t n, bool notify);
  Rare& rare();

  EntryQueue entries_;
  std::uint32_t flushed_ = 0;  // at most entries_.size()
  // Every channel has one: the two byte counts that never exceed max_bytes_per_call (under
  // 2^31) take 32 bits each.
  std::uint32_t max_bytes_ = 0;  // 0: not set (max_bytes_per_write())
  std::uint32_t coalesce_threshold_ = 0;
  bool writable_ = true;
  bool in_flight_ = false;  // a gather was handed out and not yet reported
  std::size_t pending_bytes_ = 0;
  WriteBufferWaterMark mark_;
  std::size_t hard_limit_ = default_hard_limit;
  WritabilityListener listener_ = nullptr;
  void* listener_context_ = nullptr;
  std::unique_ptr<Rare, RareDelete> rare_;
};

}  // namespace niox
