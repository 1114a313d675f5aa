// Private: the io_uring backend's provided buffer ring, where its receives take their buffers
// when bytes arrive instead of each waiting recv holding one.
//
//   memory:   [ buf 0 | buf 1 | ... | buf n-1 ]      n = entries, each buffer_size bytes
//   ring:     the kernel takes buffer ids from the head, the loop adds them back at the tail
//   out:      a ByteBuffer over buf k (its owner: a Slot naming k) for each id the kernel took
//
// The kernel picks a buffer for a recv submitted with IOSQE_BUFFER_SELECT when data is there
// and names it in the CQE; take() wraps it as a ByteBuffer. When the last view of that buffer
// is released the id goes back to the ring: at once on the loop thread (the ring's only
// producer, so no fence beyond io_uring_buf_ring_advance's release store), through a locked
// list drained at the next turn from any other thread. The memory belongs to a State that
// outlives the backend as long as one buffer is still out: the ring leaves it orphaned with
// the count of buffers out, and the last of them to be released deletes it. A buffer's owner
// (its Slot) points to the State without sharing it: taking and releasing a buffer touch no
// reference count but the buffer's own.
//
// liburing 2.3 has io_uring_register_buf_ring but not io_uring_setup_buf_ring: the ring's
// page-aligned memory is mapped here. Kernels before 5.19 refuse the registration; the backend
// then keeps receiving into pooled buffers.
#pragma once

#include <niox/buffer/byte_buffer.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include <liburing.h>

namespace niox::detail {

class BufferRing {
 public:
  static constexpr unsigned default_entries = 128;
  static constexpr std::size_t default_buffer_size = 16 * 1024;

  // Registers a ring of `entries` (a power of two) buffers as group `group`; nullptr with ec
  // when the kernel refuses it.
  static std::unique_ptr<BufferRing> create(io_uring& ring, std::uint16_t group, unsigned entries,
                                            std::size_t buffer_size, std::error_code& ec);
  ~BufferRing();  // unregisters; buffers still out keep their memory until released
  BufferRing(const BufferRing&) = delete;
  BufferRing& operator=(const BufferRing&) = delete;

  std::uint16_t group() const noexcept { return group_; }
  std::size_t buffer_size() const noexcept { return state_->buffer_size; }
  // Buffers in the ring now (loop thread).
  unsigned available() const noexcept { return state_->available; }
  unsigned entries() const noexcept { return state_->entries; }

  static constexpr std::uint32_t no_taker = ~std::uint32_t{0};
  // The buffer the kernel filled with `bytes` bytes, as a ByteBuffer (position 0, capacity
  // buffer_size()) that returns to the ring when its last view is gone. Loop thread.
  // `taker`, when given, is the operation (index and generation) whose share of the ring the
  // buffer counts in while it is out (receive_multishot): see held().
  ByteBuffer take(unsigned id, std::uint32_t taker = no_taker, std::uint32_t generation = 0);
  // How many buffers the operation took that are still out: not yet released, or released on
  // another thread and not yet drained back. Loop thread.
  unsigned held(std::uint32_t taker, std::uint32_t generation) const noexcept {
    return taker < state_->held.size() && state_->held[taker].generation == generation
               ? state_->held[taker].count
               : 0;
  }
  // Gives an id back without a ByteBuffer (a CQE whose bytes nobody wants). Loop thread.
  void give_back(unsigned id) noexcept { state_->add(id); }
  // Puts back what other threads released since the last call. Loop thread.
  void drain_returns() noexcept;
  // The loop thread: the only one that adds to the ring directly.
  void bind_to_this_thread() noexcept {
    const auto me = std::this_thread::get_id();
    if (state_->owner.load(std::memory_order_relaxed) != me)
      state_->owner.store(me, std::memory_order_relaxed);
  }

 private:
  struct State {
    io_uring_buf_ring* ring = nullptr;
    std::size_t ring_bytes = 0;
    std::byte* memory = nullptr;
    std::size_t buffer_size = 0;
    unsigned entries = 0;
    unsigned available = 0;
    // Read by releases on any thread; a thread only ever finds itself in it when it is the loop.
    std::atomic<std::thread::id> owner{};
    std::mutex lock;  // returned, orphaned and outstanding, for releases on other threads
    std::vector<std::uint16_t> returned;
    // Whether `returned` may hold ids: set under the lock, read without it by the loop every
    // turn, so a turn with nothing released elsewhere (nearly all of them) takes no lock.
    std::atomic<bool> has_returns{false};
    // Loop thread only. Who took each buffer that is out, by buffer id; and how many each
    // taker has out, by operation index. A count belongs to one generation of its index: an
    // operation reused for another descriptor starts from zero, and the buffers of the earlier
    // one no longer count against it when they come back. 8 bytes per operation index, only on
    // a loop whose multishot receives take ring buffers.
    struct Taker {
      std::uint32_t index = no_taker;
      std::uint32_t generation = 0;
    };
    struct Held {
      std::uint32_t generation = 0;
      std::uint32_t count = 0;
    };
    std::vector<Taker> taker;
    std::vector<Held> held;
    // Set (under the lock) when the ring is gone and unregistered: from then on nothing is
    // added back, the State belongs to the `outstanding` buffers still out, and the release of
    // the last deletes it. Read without the lock only on the owner thread, which is the thread
    // that destroys the ring.
    std::atomic<bool> orphaned{false};
    unsigned outstanding = 0;
    ~State();
    void add(unsigned id) noexcept;      // loop thread, while the ring lives (not orphaned)
    void release(unsigned id) noexcept;  // any thread
  };
  struct Slot {
    Slot(State* s, unsigned i) noexcept : state(s), id(i) {}
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    ~Slot() { state->release(id); }
    State* state;
    unsigned id;
  };

  BufferRing(io_uring& ring, std::uint16_t group, std::unique_ptr<State> state)
      : uring_(ring), group_(group), state_(state.release()) {}

  io_uring& uring_;
  std::uint16_t group_;
  State* state_;  // deleted by the ring, or by the last buffer out after it (see State)
};

}  // namespace niox::detail
