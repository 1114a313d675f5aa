// Private: the one zero-copy transfer engine of niox. FileChannel::transfer_to/transfer_from
// step it to the end on the calling thread; the loop's transfer_to/transfer_from step it once
// per readiness (src/loop/ops/transfer.cpp).
//
// The planner: copy_file_range (both regular files), else sendfile (a regular file into
// anything, at the output's own position), else splice (directly when one side is a pipe,
// else through a SplicePipe; never into an O_APPEND file), else a copy through a user buffer. A path that cannot start
// (EINVAL, ENOSYS, EXDEV, EOPNOTSUPP before it moved a byte) hands over to the next allowed
// one; once a path has moved bytes its errors end the transfer.
#pragma once

#include <niox/base/file_descriptor.hpp>
#include <niox/channels/transfer_path.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>

#include <poll.h>
#include <sys/types.h>

namespace niox::detail {

// The pipe pair a splice between two descriptors that are not pipes goes through. Opened on
// first use (O_NONBLOCK at both ends: nothing ever waits on it) and enlarged to 1 MiB where the
// system allows, so that each splice pair moves a whole chunk; it is reused by every transfer
// that runs with it. It holds bytes only between the two splices of one step, or while the
// output of that step is full: a transfer that ends with bytes in it discards the pair (see
// TransferEngine::finish), so that they never reach another transfer.
class SplicePipe {
 public:
  // Opens the pair if it is not open; false with errno set when pipe2 fails.
  bool open() noexcept;
  int read_end() const noexcept { return r_.get(); }
  int write_end() const noexcept { return w_.get(); }
  std::size_t capacity() const noexcept { return capacity_; }
  // Closes the pair and what it holds; the next open() makes a new one.
  void discard() noexcept;

 private:
  FileDescriptor r_;
  FileDescriptor w_;
  std::size_t capacity_ = 0;
};

enum class TransferOutcome : std::uint8_t {
  progress,     // moved bytes and may move more now: step again
  done,         // `count` bytes moved
  eof,          // the source ended first
  would_block,  // a non-blocking end cannot give or take more now: wait for wait_for()
  error,        // TransferStep::err says why
};

// What one step did.
struct TransferStep {
  std::uint64_t moved = 0;  // bytes that reached the output in this step
  TransferOutcome outcome = TransferOutcome::done;
  int err = 0;  // errno, for outcome error
};

class TransferEngine {
 public:
  // Whether a step waits (poll) for a non-blocking output that is full while bytes are in the
  // pipe: a blocking caller must not lose them; the loop waits for wait_for() instead.
  enum class Mode : std::uint8_t { blocking_caller, loop };

  TransferEngine() = default;
  TransferEngine(const TransferEngine&) = delete;
  TransferEngine& operator=(const TransferEngine&) = delete;
  ~TransferEngine();

  // Plans moving `count` bytes from `in` (at `in_offset`, or its own position, which then
  // advances, when negative) to `out` (likewise at `out_offset`), with the paths of `allowed`
  // that suit the pair: classifies the descriptors once, only as far as those paths need
  // (fstat, fcntl), and forgets any earlier transfer. Both descriptors are borrowed and must
  // stay open while it steps; `pipe` (its owner's, kept across transfers) is used for a splice
  // between two descriptors that are not pipes, and only until finish().
  void start(int in, std::int64_t in_offset, int out, std::int64_t out_offset, std::uint64_t count,
             TransferPaths allowed, SplicePipe& pipe, Mode mode);
  // Moves what can be moved now with one call of the current path (one splice pair, one
  // sendfile, one read and its writes); a path that cannot start gives way to the next one
  // within the same step. EINTR is retried.
  TransferStep step();
  // The transfer is over (finished, failed or abandoned): bytes still in the pipe are
  // discarded with it. Idempotent.
  void finish() noexcept;

  std::uint64_t moved() const noexcept { return moved_; }
  // The path that moved the last bytes, or the last one tried when nothing moved.
  TransferPath path() const noexcept { return path_; }
  // Bytes that left a stream source but never reached the output (an error between the two
  // halves of a step): the source cannot be resumed where the output stopped.
  bool lost_bytes() const noexcept { return lost_; }
  // The descriptor and readiness the step that would block waits for.
  pollfd wait_for() const noexcept { return wait_; }
  // What the last step() returned.
  const TransferStep& last_step() const noexcept { return last_; }

 private:
  struct Call {
    std::uint64_t delivered = 0;
    int err = 0;  // EAGAIN: would block
    bool eof = false;
  };
  TransferStep step_once();
  Call call(std::size_t want);
  Call via_splice(std::size_t want);
  Call drain_pipe();
  Call via_copy(std::size_t want);
  bool next_path() noexcept;
  void blocked_on(int fd, short events) noexcept { wait_ = {fd, events, 0}; }
  loff_t* in_pos() noexcept { return in_at_offset_ ? &in_offset_ : nullptr; }
  loff_t* out_pos() noexcept { return out_at_offset_ ? &out_offset_ : nullptr; }

  int in_ = -1;
  int out_ = -1;
  loff_t in_offset_ = 0;
  loff_t out_offset_ = 0;
  bool in_at_offset_ = false;
  bool out_at_offset_ = false;
  bool in_is_pipe_ = false;
  bool out_is_pipe_ = false;
  bool out_is_socket_ = false;
  bool lost_ = false;
  Mode mode_ = Mode::blocking_caller;
  std::uint64_t count_ = 0;
  std::uint64_t moved_ = 0;
  std::uint64_t path_moved_ = 0;  // by the current path
  TransferPaths left_ = 0;        // the paths still to try after the current one
  TransferPath path_ = TransferPath::copy;
  bool have_path_ = false;
  SplicePipe* pipe_ = nullptr;
  std::size_t in_pipe_ = 0;  // bytes spliced into the pipe, not yet out of it
  pollfd wait_{};
  TransferStep last_;
  std::unique_ptr<std::byte[]> copy_buf_;  // the copy path's, kept for the next transfer
};

}  // namespace niox::detail
