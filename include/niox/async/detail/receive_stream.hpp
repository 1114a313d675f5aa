// Private: the receiving side of an AsynchronousSocketChannel, one receive_multishot that stays
// armed across receive() calls instead of a receive submitted per call.
//
// Unlike LoopSocketChannel, whose first read is a single receive, the first receive() here
// arms the multishot at once. A single first receive spares a connection that receives once
// and is then closed by this side the cancel of its multishot, but costs every connection that
// receives again one more submission and completion: on echo churn (connect, one echo, the
// client closes) io_uring counted 3 submissions per connection with it against 2 without.
//
//   kernel ── arrival ──> on_arrival ── a receive waits? ──yes──> offer: resume it
//                              │                    no
//                              └──> arrived_ (in order) ── bound reached? stop the multishot
//   receive() on the loop thread: arrived_ not empty ──> take() at once, no suspension
//                                 else wait(): the waiter, and arm the multishot if stopped
//
// Invariants, on the loop thread between calls: a wait that is not claimed means arrived_
// is empty and no end is pending (whatever came went to the waits, in their order); bytes leave in the order they
// came, each arrival whole or, when larger than the receive asked for, from its front; at most
// max(bound_, one arrival) bytes wait in arrived_ once the stop has landed, so a coroutine that
// stops receiving stops the kernel reading and TCP's flow control reaches its peer.
//
// A cancelled receive (its stop token, a timeout, its frame destroyed) only stops waiting: the
// waiter's state is claimed and completed with operation_aborted, and what arrives meanwhile
// waits for the next receive. The multishot ends with the stream: the channel's close() aborts
// it, and its handler's last call lets the stream go.
#pragma once

#include <niox/async/detail/loop_operation.hpp>
#include <niox/buffer/byte_buffer.hpp>
#include <niox/loop/event_loop.hpp>

#include <cstddef>
#include <memory>
#include <system_error>
#include <vector>

namespace niox::detail {

class ReceiveStream {
 public:
  explicit ReceiveStream(EventLoop& loop) noexcept : loop_(&loop) {}
  ReceiveStream(const ReceiveStream&) = delete;
  ReceiveStream& operator=(const ReceiveStream&) = delete;

  // Loop thread: the first bytes that arrived, up to max_bytes of them, ready to read; an empty
  // buffer when none wait (an end that waits is handed over by wait()).
  ByteBuffer take(std::size_t max_bytes);

  // Loop thread, for a receive that take() left empty-handed: `st` is completed by the next
  // arrival or the end (through LoopOpState::offer / complete), never inside this call. Arms
  // the multishot on `fd` if it is not armed. Returns no handle: a cancel of `st` only stops
  // its waiting (LoopOpState::detach).
  static OperationHandle wait(const std::shared_ptr<ReceiveStream>& self, int fd,
                              std::size_t max_bytes, const std::shared_ptr<LoopOpState>& st);

 private:
  bool on_arrival(const std::shared_ptr<ReceiveStream>& self, std::error_code ec, std::size_t n,
                  ByteBuffer b);
  static void arm(const std::shared_ptr<ReceiveStream>& self);
  // Hands the waits what came (bytes first, then the end), in their order; arms the multishot
  // again for a wait left with nothing.
  void serve(const std::shared_ptr<ReceiveStream>& self);
  ByteBuffer front(std::size_t max_bytes);
  // The first wait still waiting, or null; drops the ended ones before it.
  LoopOpState* head() noexcept;

  EventLoop* loop_;
  // The waits, in the order they came, linked through LoopOpState::next; each one's n is what
  // it takes at most. A claimed one has ended (cancelled) and is skipped.
  std::shared_ptr<LoopOpState> waiter_;
  std::vector<ByteBuffer> arrived_;  // each ready to read
  std::size_t arrived_bytes_ = 0;
  // arrived_bytes_ at which the multishot is stopped, and what it reads at most without the ring
  std::size_t bound_ = 0;
  int fd_ = -1;
  bool armed_ = false;     // a multishot is running (its last call has not come)
  bool stopping_ = false;  // and this stream asked it to stop
  bool ended_ = false;     // its last call was an end (end of stream, error, abort): end_ec_
  std::error_code end_ec_;
};

// The Start of AsynchronousSocketChannel::receive's LoopOperation: now() takes what arrived
// already; else the receive waits in the stream. `got` is the awaiter's slot for the buffer.
struct ReceiveStart {
  std::shared_ptr<ReceiveStream> rx;
  std::size_t max_bytes;
  int fd;
  bool finished_now = false;
  ByteBuffer got{};

  bool now(EventLoop&) {
    got = rx->take(max_bytes);
    finished_now = got.has_remaining();
    return finished_now;
  }
  ByteBuffer result_now() { return std::move(got); }
  OperationHandle operator()(EventLoop&, const std::shared_ptr<LoopOpState>& st) const {
    return ReceiveStream::wait(rx, fd, max_bytes, st);
  }
};

}  // namespace niox::detail
