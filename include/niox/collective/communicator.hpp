// niox::collective::Communicator: the collective operations of MPI, Gloo and NCCL (broadcast,
// scatter, gather, all-gather, reduce, all-reduce, reduce-scatter, all-to-all, barrier) and
// point-to-point send/recv among `size()` processes, over TCP.
//
//   auto comm = collective::Communicator::from_environment();   // under a launcher
//   std::vector<float> grad = compute_gradient(comm.rank());
//   comm.all_reduce(std::span(grad), collective::ReduceOp::sum);  // blocking
//   collective::Future f = comm.start(comm.async_barrier());           // a future: f.get()
//   co_await comm.async_all_reduce(std::span(grad), ReduceOp::sum);   // in a coroutine on
//                                                                       // the communicator's loop
//
// Every rank calls the same operations in the same order with matching arguments (MPI's rule).
// A message goes as frames of at most Options::chunk_bytes: a 48-byte header (what call it
// belongs to, which slice, how long) and the body. Up to 16 frames leave in one gathering write;
// each arrives with one scattering read of its header and its body, the body straight in the
// slice of the caller's buffer it belongs to. Only a reduction stages what it receives, a
// chunk at a time, before it folds it into the result; chunks let a ring step's sending,
// receiving and reducing overlap across ranks.
//
// Rendezvous. Rank 0 listens on the master address; the others connect to it, say which rank
// they are and where they listen, and get back the table of every rank's address; then every
// rank connects to every other (a full mesh with a connection each way between two ranks, each
// rank writing on the ones it opened; a rank's connection to the master is one of them), so a
// rank holds 2(size-1) descriptors.
// from_environment() reads the variables of the launchers people use: torchrun's RANK and
// WORLD_SIZE, Open MPI's OMPI_COMM_WORLD_RANK / _SIZE, MPICH's PMI_RANK / PMI_SIZE, Slurm's
// SLURM_PROCID / SLURM_NTASKS, in that order; the master is always MASTER_ADDR / MASTER_PORT.
// On one machine niox-collective-run -n N PROGRAM sets them (like torchrun --standalone).
//
// Buffers. A span is the caller's until the operation has ended: the blocking form returns,
// the Task's co_await returns, the future is ready, also when it ends with an error. After an
// error the destination's contents are unspecified. Send spans are only read.
//
// Blocks. The operations that split a buffer among the ranks (scatter, gather, all_gather,
// reduce_scatter) give rank i the elements [i*n/size, (i+1)*n/size) of an n-element buffer
// (block(n, i)); sizes differ by at most one, so n need not divide by the rank count.
//
// Progress: who runs the operations.
//   - By default, the thread that made the communicator drives it while it waits in a blocking
//     call or in Future::wait() (MPI's model): no thread of its own, and a message's arrival
//     wakes the waiting caller directly, which is what small-message latency is made of. A
//     started operation moves only while that thread waits in one of those (or in poll()). The
//     blocking forms and Future::wait() throw std::logic_error on another thread.
//   - With Options::progress_thread the communicator has a loop thread of its own: calls may
//     come from any thread, and started operations move on while the caller computes (overlap,
//     as PyTorch's DistributedDataParallel does with Gloo). Each call then costs two thread
//     hand-offs (a few microseconds each when a core is free).
//   - With Options::loop, it runs on that loop (whose thread runs it): co_await its operations
//     from coroutines there.
// The async_* Tasks are awaited by coroutines on the communicator's loop: one given to start(),
// or one running on the loop of Options::loop or of progress_thread. A caller-driven
// communicator's Task awaited from its own thread outside those (sync_wait()) would wait for a
// loop nobody drives: it throws std::logic_error instead.
// Either way the operations run one at a time, in the order they were called. The blocking
// forms must not be called on an event loop's thread (BlockingOperationException: co_await the
// async form instead).
//
// Errors are CollectiveError (a std::system_error naming the rank at fault), never hangs:
//   - a rank that exits or disconnects fails every rank's pending operation at once (the ranks
//     that see it first tell the others before they close);
//   - a rank that stops making progress fails them once Options::timeout passes without a
//     byte moving;
//   - calls that do not match (another operation, element type, reduce op, root or count) are
//     found from the frame headers and fail on every rank that waits on the mismatched one;
//   - a frame that is not one (bad magic, out-of-order sequence) closes the communicator.
// After an error the communicator is closed: every later operation throws the same error.
#pragma once

#include <niox/async/task.hpp>
#include <niox/channels/socket_address.hpp>
#include <niox/loop/event_loop.hpp>
#include <niox/loop/event_loop_group.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>

namespace niox::collective {

enum class ReduceOp : std::uint8_t { sum, prod, min, max };
enum class DataType : std::uint8_t { u8, i32, i64, f32, f64 };

const char* to_string(ReduceOp op) noexcept;
const char* to_string(DataType type) noexcept;
std::size_t size_of(DataType type) noexcept;

template <class T>
inline constexpr bool is_data_type_v =
    std::is_same_v<T, std::uint8_t> || std::is_same_v<T, std::int32_t> ||
    std::is_same_v<T, std::int64_t> || std::is_same_v<T, float> || std::is_same_v<T, double>;

template <class T>
constexpr DataType data_type_of() noexcept {
  static_assert(is_data_type_v<T>, "collectives take uint8_t, int32_t, int64_t, float or double");
  if constexpr (std::is_same_v<T, std::uint8_t>)
    return DataType::u8;
  else if constexpr (std::is_same_v<T, std::int32_t>)
    return DataType::i32;
  else if constexpr (std::is_same_v<T, std::int64_t>)
    return DataType::i64;
  else if constexpr (std::is_same_v<T, float>)
    return DataType::f32;
  else
    return DataType::f64;
}

// What a collective failed with: code() is a generic errno-style code (connection_reset,
// timed_out, invalid_argument for a mismatch, protocol_error for a bad frame,
// operation_canceled after close()), what() says what happened in words, and rank() is the
// rank at fault (-1 when none is).
class CollectiveError : public std::system_error {
 public:
  CollectiveError(std::error_code code, const std::string& what, int rank)
      : std::system_error(code, what), rank_(rank) {}
  int rank() const noexcept { return rank_; }

 private:
  int rank_;
};

// Who this process is and where rank 0 listens.
struct Rendezvous {
  int rank = 0;
  int size = 1;
  std::string master_host = "127.0.0.1";
  std::uint16_t master_port = 0;

  // From the launcher's variables (see the top of this file). Throws std::invalid_argument
  // naming what is missing or malformed.
  static Rendezvous from_environment();
};

struct CommunicatorOptions {
  // An operation fails once this long passes without a byte moving on any of its links.
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
  // How long the rendezvous waits for rank 0 to listen and for every rank to arrive.
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(120)};
  // The largest frame body; larger messages go as pipelined chunks. At least 64 bytes.
  std::size_t chunk_bytes = 256 * 1024;
  // all_reduce among 2 ranks: below this many bytes, recursive doubling (log2(size) rounds of
  // whole messages); from it up, the bandwidth algorithms (see docs/collective.md), which send
  // 2(size-1)/size of the buffer. The switch halves each time the rank count doubles, since
  // recursive doubling sends log2(size) whole buffers. reduce and broadcast switch from a tree
  // to the ring / a pipelined chain at this size. Measured over loopback
  // (niox-collective-bench --ring-threshold, 4 ranks on 2 cores), all_reduce's algorithms
  // cross over at 64-128 KiB for 4 ranks, where the halving rule switches at 128 KiB; for 2
  // ranks runs disagree between 256 KiB and 1 MiB.
  std::size_t ring_threshold_bytes = 256 * 1024;
  // A loop thread of the communicator's own (see "Progress" above).
  bool progress_thread = false;
  // Without a progress thread: how long a waiting caller keeps polling the kernel for the next
  // arrival before it sleeps (MPI's busy polling: a wake-up costs microseconds, and each frame
  // of an exchange would pay one). It yields the CPU between polls, so on a machine with more
  // ranks than CPUs the awaited rank runs meanwhile. 0: sleep at once.
  std::chrono::microseconds busy_poll{50};
  // Run on this loop (its thread must be running it) instead of a loop of its own.
  EventLoop* loop = nullptr;
  // The options of the communicator's own loop.
  EventLoop::Options loop_options{};
};

namespace detail {
class CommunicatorState;
struct FutureState;
// A typed span without its type: what the operations below pass on.
struct RawSpan {
  void* data = nullptr;
  std::size_t count = 0;
  DataType type = DataType::u8;
  std::size_t bytes() const noexcept { return count * size_of(type); }
};
template <class T>
RawSpan raw(std::span<T> s) noexcept {
  return {const_cast<std::remove_const_t<T>*>(s.data()), s.size(),
          data_type_of<std::remove_const_t<T>>()};
}
}  // namespace detail

// The end of a started operation (Communicator::start()). Movable, not copyable; get() once.
class Future {
 public:
  Future() = default;
  Future(Future&&) noexcept = default;
  Future& operator=(Future&&) noexcept = default;
  ~Future();

  bool valid() const noexcept { return state_ != nullptr; }
  // Whether the operation has ended (never drives it).
  bool ready() const noexcept;
  // Waits for the end: drives the communicator when the caller is its driving thread.
  void wait() const;
  // wait(), then rethrows the operation's error. Invalidates the future.
  void get();

 private:
  friend class Communicator;
  explicit Future(std::shared_ptr<detail::FutureState> s) noexcept : state_(std::move(s)) {}
  std::shared_ptr<detail::FutureState> state_;
};

class Communicator {
 public:
  // Joins the group `rz` describes; returns once every rank is connected to every other.
  // Throws CollectiveError (timed_out, connection_refused, invalid_argument for a rank or size
  // that does not match the others').
  explicit Communicator(const Rendezvous& rz, CommunicatorOptions options = {});
  // Rendezvous::from_environment(), then the constructor.
  static Communicator from_environment(CommunicatorOptions options = {});

  Communicator(Communicator&&) noexcept;
  Communicator& operator=(Communicator&&) noexcept;
  // close(), and stops the communicator's own loop. A caller-driven communicator is
  // destroyed on the thread that drives it (elsewhere its loop is left alone, and leaks).
  ~Communicator();

  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  EventLoop& loop() const noexcept;
  // The elements [first, first + count) of an n-element buffer that are rank i's block.
  static std::pair<std::size_t, std::size_t> block(std::size_t n, int size, int i) noexcept {
    std::size_t first = n * static_cast<std::size_t>(i) / static_cast<std::size_t>(size);
    std::size_t end = n * (static_cast<std::size_t>(i) + 1) / static_cast<std::size_t>(size);
    return {first, end - first};
  }

  // Closes every link: pending operations fail with operation_canceled, and so does every
  // later one. Any thread; idempotent.
  void close();

  // ---- co_await forms ----------------------------------------------------------------------
  // Each returns a lazy Task: nothing happens until it is awaited (or given to start()). It
  // continues on the communicator's loop thread.

  // root's data to everyone's data.
  template <class T>
  Task<void> async_broadcast(std::span<T> data, int root) {
    return do_broadcast(detail::raw(data), root);
  }
  // root's send (n elements; ignored elsewhere) block by block: rank i's recv gets block i.
  template <class T>
  Task<void> async_scatter(std::span<const T> send, std::span<T> recv, int root) {
    return do_scatter(detail::raw(send), detail::raw(recv), root);
  }
  // Every rank's send (its block of n) into root's recv (n elements; ignored elsewhere).
  template <class T>
  Task<void> async_gather(std::span<const T> send, std::span<T> recv, int root) {
    return do_gather(detail::raw(send), detail::raw(recv), root);
  }
  // Every rank's send (its block of recv.size()) into everyone's recv.
  template <class T>
  Task<void> async_all_gather(std::span<const T> send, std::span<T> recv) {
    return do_all_gather(detail::raw(send), detail::raw(recv));
  }
  // The elementwise `op` of every rank's send into root's recv (the same size; ignored
  // elsewhere). send and recv may be the same span.
  template <class T>
  Task<void> async_reduce(std::span<const T> send, std::span<T> recv, ReduceOp op, int root) {
    return do_reduce(detail::raw(send), detail::raw(recv), op, root);
  }
  // In place: data becomes the elementwise `op` of every rank's data.
  template <class T>
  Task<void> async_all_reduce(std::span<T> data, ReduceOp op) {
    return do_all_reduce(detail::raw(data), op);
  }
  // The elementwise `op` of every rank's send (n elements); rank i's recv gets block i of it.
  template <class T>
  Task<void> async_reduce_scatter(std::span<const T> send, std::span<T> recv, ReduceOp op) {
    return do_reduce_scatter(detail::raw(send), detail::raw(recv), op);
  }
  // send and recv hold size() equal parts: part j of send goes to rank j, part j of recv comes
  // from rank j. Their size must divide by size().
  template <class T>
  Task<void> async_all_to_all(std::span<const T> send, std::span<T> recv) {
    return do_all_to_all(detail::raw(send), detail::raw(recv));
  }
  // Returns once every rank has entered it.
  Task<void> async_barrier();
  // Point to point: data to rank `peer`, which receives it with recv() of the same size and
  // type. Messages between two ranks arrive in the order they were sent.
  template <class T>
  Task<void> async_send(std::span<const T> data, int peer) {
    return do_send(detail::raw(data), peer);
  }
  template <class T>
  Task<void> async_recv(std::span<T> data, int peer) {
    return do_recv(detail::raw(data), peer);
  }

  // ---- futures -----------------------------------------------------------------------------
  // Starts a Task of this communicator's (any async_* above) and returns a future of its end.
  // The operations start in the order of the start() calls. Without a progress thread, start()
  // sends what it can at once and the rest moves while the caller waits.
  Future start(Task<void> operation);
  // Without a progress thread: moves started operations on as far as they can go without
  // waiting (MPI_Test's progress). Returns whether anything ran.
  bool poll();

  // ---- blocking forms ----------------------------------------------------------------------
  template <class T>
  void broadcast(std::span<T> data, int root) {
    wait(async_broadcast(data, root));
  }
  template <class T>
  void scatter(std::span<const T> send, std::span<T> recv, int root) {
    wait(async_scatter(send, recv, root));
  }
  template <class T>
  void gather(std::span<const T> send, std::span<T> recv, int root) {
    wait(async_gather(send, recv, root));
  }
  template <class T>
  void all_gather(std::span<const T> send, std::span<T> recv) {
    wait(async_all_gather(send, recv));
  }
  template <class T>
  void reduce(std::span<const T> send, std::span<T> recv, ReduceOp op, int root) {
    wait(async_reduce(send, recv, op, root));
  }
  template <class T>
  void all_reduce(std::span<T> data, ReduceOp op) {
    wait(async_all_reduce(data, op));
  }
  template <class T>
  void reduce_scatter(std::span<const T> send, std::span<T> recv, ReduceOp op) {
    wait(async_reduce_scatter(send, recv, op));
  }
  template <class T>
  void all_to_all(std::span<const T> send, std::span<T> recv) {
    wait(async_all_to_all(send, recv));
  }
  void barrier() { wait(async_barrier()); }
  template <class T>
  void send(std::span<const T> data, int peer) {
    wait(async_send(data, peer));
  }
  template <class T>
  void recv(std::span<T> data, int peer) {
    wait(async_recv(data, peer));
  }

 private:
  Task<void> do_broadcast(detail::RawSpan data, int root);
  Task<void> do_scatter(detail::RawSpan send, detail::RawSpan recv, int root);
  Task<void> do_gather(detail::RawSpan send, detail::RawSpan recv, int root);
  Task<void> do_all_gather(detail::RawSpan send, detail::RawSpan recv);
  Task<void> do_reduce(detail::RawSpan send, detail::RawSpan recv, ReduceOp op, int root);
  Task<void> do_all_reduce(detail::RawSpan data, ReduceOp op);
  Task<void> do_reduce_scatter(detail::RawSpan send, detail::RawSpan recv, ReduceOp op);
  Task<void> do_all_to_all(detail::RawSpan send, detail::RawSpan recv);
  Task<void> do_send(detail::RawSpan data, int peer);
  Task<void> do_recv(detail::RawSpan data, int peer);
  void wait(Task<void> operation);

  int rank_ = 0;
  int size_ = 1;
  bool driven_here() const;
  void release() noexcept;

  std::unique_ptr<EventLoopGroup> own_group_;  // progress_thread: the loop and its thread
  std::unique_ptr<EventLoop> own_loop_;        // by default: the loop the caller drives
  std::shared_ptr<detail::CommunicatorState> state_;
};

}  // namespace niox::collective
