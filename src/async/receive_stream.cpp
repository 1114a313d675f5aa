#include <niox/async/detail/receive_stream.hpp>

#include <algorithm>
#include <utility>

namespace niox::detail {

namespace {
// What may wait unread before the kernel is told to stop: one receive's worth, and no less
// than a few ring buffers, so that a reader a little behind its peer keeps the multishot armed.
// Also what one read without the ring takes at most.
constexpr std::size_t min_bound = 64 * 1024;
}  // namespace

LoopOpState* ReceiveStream::head() noexcept {
  // Waits that ended without being served (cancelled, their frames gone) leave the queue here.
  while (waiter_ && waiter_->claimed.load(std::memory_order_acquire))
    waiter_ = std::move(waiter_->next);
  return waiter_.get();
}

ByteBuffer ReceiveStream::front(std::size_t max_bytes) {
  ByteBuffer& first = arrived_.front();
  const std::size_t n = first.remaining();
  if (n <= max_bytes) {
    // Position 0 and limit the count, as a receive hands it over: the rest of one whose front
    // went earlier is a slice.
    ByteBuffer out = first.position() == 0 ? std::move(first) : first.slice();
    arrived_.erase(arrived_.begin());
    arrived_bytes_ -= n;
    return out;
  }
  // Larger than asked for: its front goes, the rest stays first.
  ByteBuffer out = first.slice(first.position(), max_bytes);
  first.position(first.position() + max_bytes);
  arrived_bytes_ -= max_bytes;
  return out;
}

ByteBuffer ReceiveStream::take(std::size_t max_bytes) {
  if (arrived_.empty() || max_bytes == 0) return {};
  return front(max_bytes);
}

OperationHandle ReceiveStream::wait(const std::shared_ptr<ReceiveStream>& self, int fd,
                                    std::size_t max_bytes, const std::shared_ptr<LoopOpState>& st) {
  ReceiveStream& s = *self;
  st->detach = true;
  st->n = max_bytes;  // while it waits: what it takes at most
  if (!s.head()) {
    s.waiter_ = st;
  } else {  // another read or receive waits already: this one after it, in order
    LoopOpState* last = s.waiter_.get();
    while (last->next) last = last->next.get();
    last->next = st;
  }
  if (max_bytes == 0 || !s.arrived_.empty() || s.ended_) {
    // Something to hand over at once (nothing, for max_bytes 0), but not from inside the
    // receive's await_suspend: from the loop's next turn.
    self->loop_->execute(Runnable([self] { self->serve(self); }));
    return {};
  }
  if (!s.armed_) {
    s.fd_ = fd;
    // Reads take up to the bound at a time (a receive of a few bytes then slices what came),
    // so that a first small receive does not make every later read small.
    s.bound_ = std::max(max_bytes, min_bound);
    arm(self);
  }
  return {};
}

void ReceiveStream::arm(const std::shared_ptr<ReceiveStream>& self) {
  self->armed_ = true;
  self->stopping_ = false;
  self->loop_->receive_multishot(self->fd_, self->bound_,
                                 [self](std::error_code ec, std::size_t n, ByteBuffer b) {
                                   return self->on_arrival(self, ec, n, std::move(b));
                                 });
}

void ReceiveStream::serve(const std::shared_ptr<ReceiveStream>& self) {
  while (LoopOpState* h = head()) {
    const std::size_t max_bytes = h->n;
    if (max_bytes != 0 && arrived_.empty() && !ended_) {
      // Nothing to hand over yet. A wait queued behind one that took the end of the stream
      // (or an error) asks the kernel again, as a receive after it would.
      if (!armed_) arm(self);
      return;
    }
    // Out of the queue first: completing it resumes its coroutine here, which may wait again.
    std::shared_ptr<LoopOpState> w = std::move(waiter_);
    waiter_ = std::move(w->next);
    if (max_bytes == 0) {
      w->complete({}, 0);
    } else if (!arrived_.empty()) {
      ByteBuffer b = front(max_bytes);
      const std::size_t n = b.remaining();
      if (!w->offer(n, b)) {  // its frame went meanwhile: the bytes wait for the next one
        arrived_bytes_ += n;
        arrived_.insert(arrived_.begin(), std::move(b));
      }
    } else {
      // Handed over once; a later wait asks the kernel again. An abort (the channel closed,
      // the loop shut down) ends every wait instead: the descriptor may be gone.
      const std::error_code ec = end_ec_;
      if (ec != operation_aborted()) {
        ended_ = false;
        end_ec_.clear();
      }
      w->complete(ec, 0);
    }
  }
}

bool ReceiveStream::on_arrival(const std::shared_ptr<ReceiveStream>& self, std::error_code ec,
                               std::size_t n, ByteBuffer b) {
  if (ec || n == 0) {  // the last call
    armed_ = false;
    const bool ours = std::exchange(stopping_, false);
    if (ec == operation_aborted() && ours) {
      // Our own stop: nothing ended. A receive that came meanwhile found nothing to take.
      if (arrived_.empty() && head()) arm(self);
      return false;
    }
    ended_ = true;
    end_ec_ = ec;
    serve(self);
    return false;
  }
  b.flip();
  if (arrived_.empty()) {
    if (LoopOpState* h = head(); h && b.remaining() <= h->n) {
      std::shared_ptr<LoopOpState> w = std::move(waiter_);
      waiter_ = std::move(w->next);
      // Resumes the coroutine here, which may receive again (take, wait) or close the channel.
      if (w->offer(n, b)) return !stopping_;
    }
  }
  arrived_bytes_ += b.remaining();
  arrived_.push_back(std::move(b));
  serve(self);  // a waiter for less than this arrival gets its front, and so on
  if (arrived_bytes_ >= bound_ && armed_ && !stopping_) {
    stopping_ = true;
    return false;
  }
  return !stopping_;
}

}  // namespace niox::detail
