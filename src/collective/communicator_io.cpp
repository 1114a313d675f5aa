// The communicator's state, and frames on its links. A frame is read with one scattering read
// into [header, the slice of the caller's buffer it belongs to]; up to kBatch frames are written
// with one gathering write of [header, body, header, body, ...]. Short transfers are the normal
// case and are resumed where they stopped. The header is checked as soon as it is whole, before the body has arrived, so an
// abort frame or a mismatched call is seen at once.
#include "communicator_state.hpp"
#include "reduce.hpp"

#include <niox/base/log.hpp>

#include <fmt/format.h>

#include <sched.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cstring>

namespace niox::collective::detail {

const char* to_string(Op op) noexcept {
  switch (op) {
    case Op::none: return "none";
    case Op::barrier: return "barrier";
    case Op::broadcast: return "broadcast";
    case Op::scatter: return "scatter";
    case Op::gather: return "gather";
    case Op::all_gather: return "all_gather";
    case Op::reduce: return "reduce";
    case Op::all_reduce: return "all_reduce";
    case Op::reduce_scatter: return "reduce_scatter";
    case Op::all_to_all: return "all_to_all";
    case Op::send_recv: return "send/recv";
    case Op::rendezvous: return "rendezvous";
  }
  return "?";
}

namespace {
// what() without the ": <code's message>" std::system_error appends to it.
std::string bare_what(const std::system_error& e) {
  std::string text = e.what();
  std::string suffix = ": " + e.code().message();
  if (text.ends_with(suffix)) text.resize(text.size() - suffix.size());
  return text;
}
bool has_root(Op op) {
  return op == Op::broadcast || op == Op::scatter || op == Op::gather || op == Op::reduce;
}
bool has_redop(Op op) {
  return op == Op::reduce || op == Op::all_reduce || op == Op::reduce_scatter;
}
}  // namespace

std::string describe_call(Op op, DataType type, ReduceOp redop, std::int32_t root,
                          std::uint64_t count) {
  if (op == Op::barrier) return "barrier";
  std::string s = fmt::format("{} of {} {}", to_string(op), count, collective::to_string(type));
  if (has_redop(op)) s += fmt::format(" ({})", collective::to_string(redop));
  if (has_root(op)) s += fmt::format(" with root {}", root);
  return s;
}

CommunicatorState::CommunicatorState(int rank_, int size_, const CommunicatorOptions& options_,
                                     EventLoop& loop_)
    : rank(rank_), size(size_), options(options_), loop(&loop_), links(size_) {}

void CommunicatorState::drive(const std::function<bool()>& done) {
  using Clock = std::chrono::steady_clock;
  const auto spin = options.busy_poll;
  auto last = Clock::now();
  // The watchdog counts only time the operations could move: not what the caller spent
  // elsewhere since it started one.
  progress();
  while (!done()) {
    if (spin.count() > 0) {
      // Polls the ring without sleeping while things happen and for `spin` after the last one:
      // the next frame of an exchange usually comes within microseconds, and a thread that
      // sleeps pays a wake-up for it. Between polls it yields: on a machine with more ranks
      // than CPUs the rank it waits for gets the CPU at once (with a CPU free, the yield
      // returns at once).
      if (loop->run_once(std::chrono::milliseconds(0)) > 0) {
        last = Clock::now();
        continue;
      }
      if (Clock::now() - last < spin) {
        sched_yield();
        continue;
      }
    }
    loop->run_once(std::chrono::milliseconds(100));
    last = Clock::now();
  }
}

void CommunicatorState::begin(Op op) {
  op_ = op;
  progress();
  if (!watchdog_armed_) arm_watchdog();
}

void CommunicatorState::end() noexcept {
  op_ = Op::none;
  if (queue_.empty()) {
    busy_ = false;
    return;
  }
  // The turn passes straight on (busy_ stays set). Resumed from the loop's queue, not from
  // here: the ending operation's frame is still on the stack.
  std::coroutine_handle<> next = queue_.front();
  queue_.pop_front();
  loop->execute([next] { next.resume(); });
}

std::byte* CommunicatorState::scratch(Scratch area, std::size_t bytes) {
  auto& v = scratch_[area];
  if (v.size() < bytes) v.resize(bytes);
  return v.data();
}

void CommunicatorState::arm_watchdog() {
  watchdog_armed_ = true;
  auto period = std::clamp<std::chrono::milliseconds>(
      options.timeout / 4, std::chrono::milliseconds(5), std::chrono::milliseconds(1000));
  loop->schedule(period, [weak = weak_from_this()] {
    if (auto s = weak.lock()) s->watchdog_tick();
  });
}

void CommunicatorState::watchdog_tick() {
  watchdog_armed_ = false;
  if (!busy_ || failed()) return;
  auto idle = std::chrono::steady_clock::now() - last_progress_;
  if (idle >= options.timeout) {
    // A reader waits on its peer; a writer only on a peer that does not read.
    int waited = -1;
    for (int i = 0; i < size && waited < 0; ++i)
      if (links[i].reading) waited = i;
    for (int i = 0; i < size && waited < 0; ++i)
      if (links[i].writing) waited = i;
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(options.timeout).count();
    std::string what = waited >= 0
                           ? fmt::format(
                                 "{} timed out on rank {}: nothing came from or went to rank {} "
                                 "for {} ms",
                                 to_string(op_), rank, waited, ms)
                           : fmt::format("{} timed out on rank {}: nothing moved for {} ms",
                                         to_string(op_), rank, ms);
    fail(CollectiveError(std::make_error_code(std::errc::timed_out), what, waited));
    return;
  }
  arm_watchdog();
}

void CommunicatorState::fail(const CollectiveError& error) {
  if (failure_) return;
  failure_.emplace(error);
  // The reason travels to every peer, as an abort frame where the link stands between frames.
  // A link with a write in flight is in the middle of a frame: it is closed when the write
  // ends (write_ended(), which sends the abort frame after it) or after a grace period, when
  // the peer does not read. Without the code's message: the peer's CollectiveError adds its own.
  abort_text_ = bare_what(error);
  if (abort_text_.size() > 4000) abort_text_.resize(4000);
  bool deferred = false;
  for (int i = 0; i < size; ++i) {
    Link& l = links[i];
    if (!l.open()) continue;
    if (l.writing) {
      l.closing = true;
      deferred = true;
    } else {
      close_link(i, true);
    }
  }
  if (deferred) {
    auto grace =
        std::min<std::chrono::milliseconds>(options.timeout, std::chrono::milliseconds(200));
    loop->schedule(grace, [weak = weak_from_this()] {
      if (auto s = weak.lock()) {
        for (int i = 0; i < s->size; ++i)
          if (s->links[i].closing) s->close_link(i, false);
      }
    });
  }
}

void CommunicatorState::close_link(int i, bool tell) {
  Link& l = links[i];
  l.closing = false;
  if (!l.open()) return;
  if (tell && l.out && l.out->is_open()) {
    FrameHeader h;
    h.kind = FrameKind::abort;
    h.seq = l.send_seq++;
    h.count = static_cast<std::uint64_t>(failure_->code().value());
    h.length = abort_text_.size();
    h.aux = static_cast<std::uint64_t>(static_cast<std::int64_t>(failure_->rank()));
    iovec iov[2] = {{&h, sizeof h}, {abort_text_.data(), abort_text_.size()}};
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = 2;
    // Best effort: a full socket buffer means the peer is not reading; it sees the close.
    (void)::sendmsg(l.out->native_handle(), &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
  }
  for (auto* ch : {&l.out, &l.in}) {
    if (!*ch || !(*ch)->is_open()) continue;
    ::shutdown((*ch)->native_handle(), SHUT_RDWR);
    (*ch)->close();
  }
}

void CommunicatorState::write_ended(int peer, std::error_code ec) {
  if (links[peer].closing) close_link(peer, !ec);
}

void CommunicatorState::fail(std::exception_ptr error) {
  if (failure_) return;
  try {
    std::rethrow_exception(error);
  } catch (const CollectiveError& e) {
    fail(e);
  } catch (const std::system_error& e) {
    fail(CollectiveError(
        e.code(), fmt::format("{} failed on rank {}: {}", to_string(op_), rank, bare_what(e)), -1));
  } catch (const std::exception& e) {
    fail(CollectiveError(std::make_error_code(std::errc::io_error),
                         fmt::format("{} failed on rank {}: {}", to_string(op_), rank, e.what()),
                         -1));
  } catch (...) {
    fail(CollectiveError(std::make_error_code(std::errc::io_error),
                         fmt::format("{} failed on rank {}", to_string(op_), rank), -1));
  }
}

namespace {
// The failure a peer's abort frame `h` and its reason `text` tell of: the code and the rank at
// fault are the peer's, the words too.
CollectiveError abort_error(int peer, int size, const FrameHeader& h, const std::string& text) {
  int at = static_cast<int>(static_cast<std::int64_t>(h.aux));
  return CollectiveError(std::error_code(static_cast<int>(h.count), std::generic_category()),
                         fmt::format("rank {} failed the communicator: {}", peer, text),
                         at >= 0 && at < size ? at : peer);
}
}  // namespace

// After a link broke: the peer may have told why before it closed. Its abort frame waits in
// the socket when nothing was reading the link (so the stream stands between frames).
std::optional<CollectiveError> CommunicatorState::told_abort(int peer) {
  Link& l = links[peer];
  if (l.reading || !l.in || !l.in->is_open()) return std::nullopt;
  int fd = l.in->native_handle();
  FrameHeader h;
  if (::recv(fd, &h, sizeof h, MSG_DONTWAIT) != static_cast<ssize_t>(sizeof h) ||
      h.magic != kFrameMagic || h.kind != FrameKind::abort) {
    return std::nullopt;
  }
  std::string text(std::min<std::size_t>(h.length, 4000), '\0');
  ssize_t got = ::recv(fd, text.data(), text.size(), MSG_DONTWAIT);
  text.resize(got > 0 ? static_cast<std::size_t>(got) : 0);
  return abort_error(peer, size, h, text);
}

void CommunicatorState::fail_link(int peer, std::error_code ec) {
  if (!failure_) {
    if (auto told = told_abort(peer)) {
      fail(*told);
    } else if (ec) {
      fail(CollectiveError(ec,
                           fmt::format("{} failed on rank {}: the connection to rank {} broke",
                                       to_string(op_), rank, peer),
                           peer));
    } else {
      fail(CollectiveError(std::make_error_code(std::errc::connection_reset),
                           fmt::format("{} failed on rank {}: rank {} closed its connection (it "
                                       "exited or closed its communicator)",
                                       to_string(op_), rank, peer),
                           peer));
    }
  }
  throw_failure();
}

void CommunicatorState::fail_protocol(int peer, const std::string& what) {
  fail(CollectiveError(std::make_error_code(std::errc::protocol_error),
                       fmt::format("{} failed on rank {}: bad frame from rank {}: {}",
                                   to_string(op_), rank, peer, what),
                       peer));
  throw_failure();
}

void CommunicatorState::fail_argument(const std::string& what) {
  fail(CollectiveError(std::make_error_code(std::errc::invalid_argument),
                       fmt::format("{} on rank {}: {}", to_string(op_), rank, what), rank));
  throw_failure();
}

namespace {

ByteBuffer wrap_bytes(void* p, std::size_t n) {
  return ByteBuffer::wrap(std::span<std::byte>(static_cast<std::byte*>(p), n));
}

// Reads the rest of an abort frame's reason (some of it may already sit in `have`) and fails
// with it: the failure is the peer's, told in its words.
Task<void> take_abort(StatePtr s, int peer, FrameHeader h, std::string have) {
  auto& l = s->links[peer];
  std::size_t want = std::min<std::size_t>(h.length, 4000);
  if (have.size() > want) have.resize(want);
  std::string rest(want - have.size(), '\0');
  ByteBuffer b = wrap_bytes(rest.data(), rest.size());
  while (b.has_remaining()) {
    std::error_code ec;
    auto n = co_await l.in->read(b, ec);
    if (ec || n <= 0) break;
  }
  rest.resize(b.position());
  s->fail(abort_error(peer, s->size, h, have + rest));
  s->throw_failure();
}

void check_header(CommunicatorState& s, int peer, const FrameHeader& h, const Expect& e,
                  std::size_t length) {
  const auto& l = s.links[peer];
  if (h.magic != kFrameMagic)
    s.fail_protocol(peer, fmt::format("not a niox collective frame (magic {:#010x})", h.magic));
  if (h.kind != FrameKind::data)
    s.fail_protocol(peer,
                    fmt::format("a frame of kind {} where data was due", static_cast<int>(h.kind)));
  if (h.seq != l.recv_seq)
    s.fail_protocol(peer, fmt::format("frame {} where frame {} was due", h.seq, l.recv_seq));
  ReduceOp redop = has_redop(e.op) ? e.redop : ReduceOp::sum;
  ReduceOp hredop = has_redop(h.op) ? h.redop : ReduceOp::sum;
  if (h.op != e.op || h.type != e.type || hredop != redop || h.root != e.root ||
      h.count != e.count) {
    s.fail(
        CollectiveError(std::make_error_code(std::errc::invalid_argument),
                        fmt::format("mismatched calls: rank {} called {} where rank {} called {}",
                                    peer, describe_call(h.op, h.type, hredop, h.root, h.count),
                                    s.rank, describe_call(e.op, e.type, redop, e.root, e.count)),
                        peer));
    s.throw_failure();
  }
  if (h.offset != e.offset || h.length != length) {
    s.fail(CollectiveError(
        std::make_error_code(std::errc::invalid_argument),
        fmt::format("{}: rank {} sent bytes [{}, {}) where rank {} expected [{}, {}): do the "
                    "ranks run the same niox with the same options?",
                    describe_call(e.op, e.type, redop, e.root, e.count), peer, h.offset,
                    h.offset + h.length, s.rank, e.offset, e.offset + length),
        peer));
    s.throw_failure();
  }
}

// A message's frames leave in batches: one gathering write sends up to kBatch frames, so that a
// long message keeps the socket full and costs a system call per batch, not per chunk. They are
// read one frame at a time ([header, body] each): reading a batch at once measured slower
// (broadcast and all_gather, 2 ranks, 1-64 MiB: about a tenth), since a streaming read returns
// short and each restart hands the loop the whole remaining list of buffers again.
constexpr std::size_t kBatch = 16;

// One frame of `length` bytes into dst, e.offset its offset.
Task<void> recv_frame(StatePtr s, int peer, Expect e, std::byte* dst, std::size_t length) {
  s->throw_if_failed();
  auto& l = s->links[peer];
  FrameHeader h;
  ByteBuffer bufs[2] = {wrap_bytes(&h, sizeof h), wrap_bytes(dst, length)};
  bool checked = false;
  l.reading = true;
  for (;;) {
    // The header is checked as soon as it is whole: an abort or a mismatch is seen before the
    // body it announces has arrived.
    if (!checked && !bufs[0].has_remaining()) {
      if (h.magic == kFrameMagic && h.kind == FrameKind::abort) {
        l.reading = false;
        std::string have(reinterpret_cast<const char*>(dst),
                         std::min<std::size_t>(bufs[1].position(), h.length));
        co_await take_abort(s, peer, h, std::move(have));
      }
      check_header(*s, peer, h, e, length);
      ++l.recv_seq;
      checked = true;
    }
    if (checked && !bufs[1].has_remaining()) break;
    std::error_code ec;
    std::int64_t n = checked ? co_await l.in->read(bufs[1], ec)
                             : co_await l.in->read(std::span<ByteBuffer>(bufs, 2), ec);
    if (ec || n < 0 || (n == 0 && !s->failed())) {
      l.reading = false;
      if (s->failed()) s->throw_failure();
      s->fail_link(peer, ec);
    }
    s->progress();
  }
  l.reading = false;
}

// The frames of `bytes` at body (chunked by chunk_bytes; one empty frame for 0 bytes; at most
// kBatch frames), e.offset the first one's offset, in one gathering write.
Task<void> send_frames(StatePtr s, int peer, Expect e, const std::byte* body, std::size_t bytes) {
  s->throw_if_failed();
  auto& l = s->links[peer];
  const std::size_t chunk = s->options.chunk_bytes;
  const std::size_t frames = bytes == 0 ? 1 : (bytes + chunk - 1) / chunk;
  FrameHeader headers[kBatch];
  ByteBuffer bufs[2 * kBatch];
  std::size_t n = 0;
  for (std::size_t i = 0; i < frames; ++i) {
    std::size_t off = i * chunk;
    std::size_t len = std::min(chunk, bytes - off);
    FrameHeader& h = headers[i];
    h.op = e.op;
    h.type = e.type;
    h.redop = e.redop;
    h.root = e.root;
    h.count = e.count;
    h.offset = e.offset + off;
    h.length = len;
    h.seq = l.send_seq++;
    bufs[n++] = wrap_bytes(&h, sizeof h);
    if (len) bufs[n++] = wrap_bytes(const_cast<std::byte*>(body + off), len);
  }
  l.writing = true;
  std::error_code ec;
  co_await l.out->write(std::span<ByteBuffer>(bufs, n), ec);
  l.writing = false;
  if (s->failed()) {
    s->write_ended(peer, ec);
    s->throw_failure();
  }
  if (ec) s->fail_link(peer, ec);
  s->progress();
}

}  // namespace

Task<void> send_message(StatePtr s, int peer, Expect e, const std::byte* data, std::size_t bytes) {
  const std::size_t batch = s->options.chunk_bytes * kBatch;
  const std::uint64_t base = e.offset;
  std::size_t off = 0;
  do {
    std::size_t len = std::min(batch, bytes - off);
    e.offset = base + off;
    co_await send_frames(s, peer, e, data + off, len);
    off += len;
  } while (off < bytes);
}

namespace {
// What a received chunk does on arrival.
enum class Fold {
  none,          // lands in dst
  staged,        // lands in the staging area and is folded into dst
  own_into_dst,  // lands in dst, and own is folded into it
};

// A message's frames, chunk by chunk (the sender's chunking), each handled as `fold` says.
Task<void> recv_chunks(StatePtr s, int peer, Expect e, std::byte* dst, const std::byte* own,
                       std::size_t bytes, Fold fold) {
  const std::size_t chunk = s->options.chunk_bytes;
  const std::size_t es = size_of(e.type);
  const std::uint64_t base = e.offset;
  std::byte* staging =
      fold == Fold::staged ? s->scratch(CommunicatorState::kStaging, chunk) : nullptr;
  std::size_t off = 0;
  do {
    std::size_t len = std::min(chunk, bytes - off);
    e.offset = base + off;
    co_await recv_frame(s, peer, e, staging ? staging : dst + off, len);
    if (fold == Fold::staged) reduce_into(dst + off, staging, len / es, e.type, e.redop);
    if (fold == Fold::own_into_dst) reduce_into(dst + off, own + off, len / es, e.type, e.redop);
    off += len;
  } while (off < bytes);
}
}  // namespace

Task<void> recv_message(StatePtr s, int peer, Expect e, std::byte* data, std::size_t bytes) {
  return recv_chunks(std::move(s), peer, e, data, nullptr, bytes, Fold::none);
}

Task<void> recv_reduce_message(StatePtr s, int peer, Expect e, std::byte* acc, std::size_t bytes) {
  return recv_chunks(std::move(s), peer, e, acc, nullptr, bytes, Fold::staged);
}

Task<void> recv_then_reduce_message(StatePtr s, int peer, Expect e, std::byte* dst,
                                    const std::byte* own, std::size_t bytes) {
  return recv_chunks(std::move(s), peer, e, dst, own, bytes, Fold::own_into_dst);
}

}  // namespace niox::collective::detail
