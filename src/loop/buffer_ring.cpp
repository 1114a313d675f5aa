#include "loop/buffer_ring.hpp"

#include <niox/buffer/buffer_pool.hpp>

#include <cstdlib>
#include <new>

#include <sys/mman.h>

namespace niox::detail {

std::unique_ptr<BufferRing> BufferRing::create(io_uring& ring, std::uint16_t group,
                                               unsigned entries, std::size_t buffer_size,
                                               std::error_code& ec) {
  auto state = std::make_unique<State>();
  state->entries = entries;
  state->buffer_size = buffer_size;
  state->ring_bytes = entries * sizeof(io_uring_buf);
  void* r = ::mmap(nullptr, state->ring_bytes, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE,
                   -1, 0);
  if (r == MAP_FAILED) {
    ec = {errno, std::generic_category()};
    return nullptr;
  }
  state->ring = static_cast<io_uring_buf_ring*>(r);
  // Only what a receive touches becomes resident: an idle loop costs address space, not RSS.
  state->memory = static_cast<std::byte*>(std::aligned_alloc(4096, entries * buffer_size));
  if (!state->memory) {
    ec = std::make_error_code(std::errc::not_enough_memory);
    return nullptr;
  }
  io_uring_buf_reg reg{};
  reg.ring_addr = reinterpret_cast<std::uint64_t>(state->ring);
  reg.ring_entries = entries;
  reg.bgid = group;
  if (int rc = io_uring_register_buf_ring(&ring, &reg, 0); rc < 0) {
    ec = {-rc, std::generic_category()};
    return nullptr;
  }
  io_uring_buf_ring_init(state->ring);
  state->returned.reserve(entries);
  state->taker.resize(entries);
  for (unsigned id = 0; id < entries; ++id) state->add(id);
  state->owner.store(std::this_thread::get_id(), std::memory_order_relaxed);
  return std::unique_ptr<BufferRing>(new BufferRing(ring, group, std::move(state)));
}

BufferRing::~BufferRing() {
  bool last;
  {
    std::lock_guard g(state_->lock);
    io_uring_unregister_buf_ring(&uring_, group_);
    // Out: taken and not yet released (a released one is back in the ring or in `returned`).
    state_->outstanding =
        state_->entries - state_->available - static_cast<unsigned>(state_->returned.size());
    state_->orphaned.store(true, std::memory_order_relaxed);
    last = state_->outstanding == 0;
  }
  if (last) delete state_;
}

BufferRing::State::~State() {
  if (ring) ::munmap(ring, ring_bytes);
  std::free(memory);
}

void BufferRing::State::add(unsigned id) noexcept {
  if (Taker& t = taker[id]; t.index != no_taker) {
    if (Held& h = held[t.index]; h.generation == t.generation && h.count > 0) --h.count;
    t.index = no_taker;
  }
  io_uring_buf_ring_add(ring, memory + std::size_t{id} * buffer_size,
                        static_cast<unsigned>(buffer_size), static_cast<unsigned short>(id),
                        io_uring_buf_ring_mask(entries), 0);
  io_uring_buf_ring_advance(ring, 1);  // release store: the kernel sees the entry complete
  ++available;
}

void BufferRing::State::release(unsigned id) noexcept {
  if (std::this_thread::get_id() == owner.load(std::memory_order_relaxed) &&
      !orphaned.load(std::memory_order_relaxed)) {
    add(id);
    return;
  }
  bool last = false;
  {
    std::lock_guard g(lock);
    if (!orphaned.load(std::memory_order_relaxed)) {
      returned.push_back(static_cast<std::uint16_t>(id));  // reserved: no throw
      has_returns.store(true, std::memory_order_relaxed);
      return;
    }
    last = --outstanding == 0;
  }
  if (last) delete this;
}

void BufferRing::drain_returns() noexcept {
  // A release that the load misses is drained on a later turn: the same as one that comes
  // just after the lock below is let go.
  if (!state_->has_returns.load(std::memory_order_relaxed)) return;
  std::lock_guard g(state_->lock);
  for (std::uint16_t id : state_->returned) state_->add(id);
  state_->returned.clear();
  state_->has_returns.store(false, std::memory_order_relaxed);
}

ByteBuffer BufferRing::take(unsigned id, std::uint32_t taker, std::uint32_t generation) {
  --state_->available;
  if (taker != no_taker) {
    if (taker >= state_->held.size()) state_->held.resize(std::size_t{taker} + 1);
    State::Held& h = state_->held[taker];
    if (h.generation != generation) h = {generation, 0};
    ++h.count;
    state_->taker[id] = {taker, generation};
  }
  // The share's control block comes from the thread's block cache: no malloc once warm.
  auto slot = std::allocate_shared<Slot>(CachedObjectAllocator<Slot>{}, state_, id);
  return ByteBuffer::wrap_shared(
      std::span<std::byte>(state_->memory + std::size_t{id} * state_->buffer_size,
                           state_->buffer_size),
      std::move(slot));
}

}  // namespace niox::detail
