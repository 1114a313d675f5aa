// What a Communicator shares with its running operations: the links to the other ranks, the
// turn that runs operations one at a time, the failure that closed it, and the watchdog.
// Touched on the loop thread only, except where a member says otherwise.
#pragma once

#include "frame.hpp"

#include <niox/async/asynchronous_socket_channel.hpp>
#include <niox/collective/communicator.hpp>

#include <chrono>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace niox::collective::detail {

// What a frame must carry to belong to the receiver's call.
struct Expect {
  Op op = Op::none;
  DataType type = DataType::u8;
  ReduceOp redop = ReduceOp::sum;
  std::int32_t root = -1;
  std::uint64_t count = 0;
  std::uint64_t offset = 0;  // the message's first byte, within the call's buffer
};

class CommunicatorState : public std::enable_shared_from_this<CommunicatorState> {
 public:
  CommunicatorState(int rank, int size, const CommunicatorOptions& options, EventLoop& loop);

  // Two connections per peer, one for each way: this rank writes its frames on `out`, the
  // connection it opened, and reads the peer's on `in`, the one the peer opened. With one
  // connection carrying both ways, an exchange of 1 MiB each way over loopback took about 1.4x
  // as long: while a rank writes, it holds the socket the peer's arriving data is delivered to.
  struct Link {
    std::optional<AsynchronousSocketChannel> out;
    std::optional<AsynchronousSocketChannel> in;
    bool connected() const noexcept { return out && in; }
    bool open() const noexcept { return (out && out->is_open()) || (in && in->is_open()); }
    std::uint32_t send_seq = 0;
    std::uint32_t recv_seq = 0;
    bool reading = false;  // on `in`
    bool writing = false;  // on `out`
    bool closing = false;  // failed with a write in flight: closed when it ends
  };

  const int rank;
  const int size;
  const CommunicatorOptions options;
  EventLoop* const loop;
  // Set when the communicator's own loop is driven by its callers: the one thread that may.
  std::optional<std::thread::id> driver;
  bool driven_by(std::thread::id id) const noexcept { return driver && *driver == id; }
  // The driver runs the loop until done() (see CommunicatorOptions::busy_poll).
  void drive(const std::function<bool()>& done);
  std::vector<Link> links;  // by rank; links[rank] has no connection

  // ---- the turn ----------------------------------------------------------------------------
  struct TurnAwaiter {
    CommunicatorState* state;
    bool await_ready() noexcept {
      if (state->busy_) return false;
      state->busy_ = true;
      return true;
    }
    void await_suspend(std::coroutine_handle<> h) { state->queue_.push_back(h); }
    void await_resume() const noexcept {}
  };
  TurnAwaiter turn() noexcept { return {this}; }
  // The operation that holds the turn starts / ends: passes the turn to the next in line.
  void begin(Op op);
  void end() noexcept;
  Op current_op() const noexcept { return op_; }

  // ---- failure -----------------------------------------------------------------------------
  bool failed() const noexcept { return failure_.has_value(); }
  [[noreturn]] void throw_failure() const { throw *failure_; }
  void throw_if_failed() const {
    if (failure_) throw *failure_;
  }
  // Records `error` (the first one wins), tells every peer whose link is between frames, and
  // closes every link: what is pending ends with operation_aborted, which the operation turns
  // into the recorded error.
  void fail(const CollectiveError& error);
  // The same for an exception that ended an operation.
  void fail(std::exception_ptr error);
  // An I/O error or end of stream on the link to `peer`.
  // The write in flight on the link to `peer` ended (ec: how) after the failure: the link
  // closes, with the abort frame after the write when it went out whole.
  void write_ended(int peer, std::error_code ec);
  [[noreturn]] void fail_link(int peer, std::error_code ec);
  std::optional<CollectiveError> told_abort(int peer);
  [[noreturn]] void fail_protocol(int peer, const std::string& what);
  [[noreturn]] void fail_argument(const std::string& what);

  // A byte moved: the watchdog's clock starts again.
  void progress() noexcept { last_progress_ = std::chrono::steady_clock::now(); }

  // Work areas that outlive operations, so that no operation allocates (and zero-fills) its
  // buffers again: kStaging holds the chunk a reduction receives, the others what an algorithm
  // keeps for a whole message (recursive doubling's copy of the peer's data, the ring's two
  // carried blocks, a non-root's reduced block). Each grows to the largest size asked of it and
  // stays until the communicator goes.
  enum Scratch { kStaging, kCarry0, kCarry1, kBlock, kScratchAreas };
  std::byte* scratch(Scratch area, std::size_t bytes);

 private:
  void arm_watchdog();
  void watchdog_tick();
  // Closes the link to rank i, telling the peer why first when `tell`.
  void close_link(int i, bool tell);

  bool busy_ = false;
  std::deque<std::coroutine_handle<>> queue_;
  Op op_ = Op::none;
  std::optional<CollectiveError> failure_;
  std::string abort_text_;  // the failure's reason, as abort frames carry it
  std::chrono::steady_clock::time_point last_progress_{};
  bool watchdog_armed_ = false;
  std::vector<std::byte> scratch_[kScratchAreas];
};

using StatePtr = std::shared_ptr<CommunicatorState>;

struct FutureState {
  std::mutex mutex;
  std::condition_variable cv;
  bool done = false;
  std::exception_ptr error;
  StatePtr comm;  // to drive it; reset when the communicator is gone
};

// Frames and messages (communicator_io.cpp). A message of any length, zero included, goes as
// ceil(length / chunk_bytes) frames (one for zero).
Task<void> send_message(StatePtr s, int peer, Expect e, const std::byte* data, std::size_t bytes);
Task<void> recv_message(StatePtr s, int peer, Expect e, std::byte* data, std::size_t bytes);
// Receives a message into the staging buffer chunk by chunk and folds each chunk into `acc`.
Task<void> recv_reduce_message(StatePtr s, int peer, Expect e, std::byte* acc, std::size_t bytes);
// Receives a message straight into `dst`, then folds `own` (the same length) into it.
Task<void> recv_then_reduce_message(StatePtr s, int peer, Expect e, std::byte* dst,
                                    const std::byte* own, std::size_t bytes);

std::string describe_call(Op op, DataType type, ReduceOp redop, std::int32_t root,
                          std::uint64_t count);

// The rendezvous (rendezvous.cpp): every link connected, or an exception.
Task<void> rendezvous(StatePtr s, Rendezvous rz);

}  // namespace niox::collective::detail
