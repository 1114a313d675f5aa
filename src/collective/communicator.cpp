// The operations. Each runs as a Task on the communicator's loop, holding the turn, and is
// built from messages (communicator_io.cpp). Ranks are numbered relative to the root where a
// root matters (vr = (rank - root) mod size).
//
// all_reduce, for n elements of s bytes among p ranks, p2 the largest power of two <= p:
//   - under ring_threshold_bytes * 2 / p2: recursive doubling, log2(p2) exchanges of the whole
//     buffer. When p is not a power of two the first 2r ranks (r = p - p2) pair up first: the
//     even one hands its data to the odd one and sits out, and gets the result back at the end.
//   - from it, when p is a power of two: Rabenseifner's halving and doubling (halving_doubling),
//     2 log2(p) pairwise exchanges.
//   - from it, otherwise: the ring. p - 1 steps of reduce-scatter (each rank sends a block to
//     its right and folds the block from its left into its buffer), then p - 1 steps of
//     all-gather (the finished blocks travel on, landing straight in place).
// Both of the last send 2(p-1)/p of the buffer from each rank: the bandwidth-optimal amount.
// Each block of the result is reduced once, on one rank, or (recursive doubling) by every rank
// combining the same two partial results (a + b on one rank, b + a on the other: equal bit for
// bit), so every rank ends with identical bits.
#include "communicator_state.hpp"
#include "reduce.hpp"

#include <niox/async/spawn.hpp>
#include <niox/async/when_all.hpp>
#include <niox/base/log.hpp>

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <future>
#include <stdexcept>
#include <thread>
#include <string>
#include <vector>

namespace niox::collective {

const char* to_string(ReduceOp op) noexcept {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::prod: return "prod";
    case ReduceOp::min: return "min";
    case ReduceOp::max: return "max";
  }
  return "?";
}

const char* to_string(DataType type) noexcept {
  switch (type) {
    case DataType::u8: return "uint8";
    case DataType::i32: return "int32";
    case DataType::i64: return "int64";
    case DataType::f32: return "float32";
    case DataType::f64: return "float64";
  }
  return "?";
}

std::size_t size_of(DataType type) noexcept {
  switch (type) {
    case DataType::u8: return 1;
    case DataType::i32: return 4;
    case DataType::i64: return 8;
    case DataType::f32: return 4;
    case DataType::f64: return 8;
  }
  return 1;
}

namespace detail {
namespace {

int mod(int a, int p) { return ((a % p) + p) % p; }

// memmove, but an empty span's null pointer is fine.
void copy_bytes(void* dst, const void* src, std::size_t n) {
  if (n != 0 && dst != src) std::memmove(dst, src, n);
}

std::byte* bytes_of(const RawSpan& s) { return static_cast<std::byte*>(s.data); }

struct Block {
  std::size_t first;  // bytes
  std::size_t bytes;
};
Block block_bytes(std::size_t n, int p, int i, std::size_t es) {
  auto [first, count] = Communicator::block(n, p, i);
  return {first * es, count * es};
}

// Rank r's block of an n-element buffer, failing the call unless `given` (the span the caller
// passed as `name`) holds exactly that many elements.
Block own_block(CommunicatorState& s, std::size_t n, const RawSpan& given, const char* name) {
  const std::size_t es = size_of(given.type);
  Block own = block_bytes(n, s.size, s.rank, es);
  if (given.bytes() != own.bytes)
    s.fail_argument(fmt::format("block {} of {} elements holds {}, {} holds {}", s.rank, n,
                                own.bytes / es, name, given.count));
  return own;
}

Expect expect(Op op, const RawSpan& s, std::uint64_t count, ReduceOp redop = ReduceOp::sum,
              int root = -1) {
  Expect e;
  e.op = op;
  e.type = s.type;
  e.redop = redop;
  e.root = root;
  e.count = count;
  return e;
}

Expect at(Expect e, std::uint64_t offset) {
  e.offset = offset;
  return e;
}

void check_root(CommunicatorState& s, int root) {
  if (root < 0 || root >= s.size)
    s.fail_argument(fmt::format("root {} is not a rank of {}", root, s.size));
}

void check_type(CommunicatorState& s, const RawSpan& a, const RawSpan& b) {
  if (a.type != b.type)
    s.fail_argument(fmt::format("its spans hold {} and {}", to_string(a.type), to_string(b.type)));
}

// Runs `body` holding the turn; an error in it closes the communicator, and every operation
// that was, is or will be in line throws the same error.
Task<void> run_op(StatePtr s, Op op, Task<void> body) {
  if (s->driven_by(std::this_thread::get_id()) && !niox::detail::on_loop_thread()) {
    throw std::logic_error(
        "niox collective: an operation of a caller-driven communicator awaited outside its loop; "
        "use the blocking form, or give the Task to start()");
  }
  co_await resume_on(*s->loop);
  co_await s->turn();
  std::exception_ptr error;
  if (s->failed()) {
    s->end();
    s->throw_failure();
  }
  s->begin(op);
  try {
    co_await body;
  } catch (...) {
    error = std::current_exception();
  }
  if (error) s->fail(error);
  s->end();
  if (error) s->throw_failure();
}

// ---- all_reduce --------------------------------------------------------------------------

// The largest power of two p2 <= p ranks exchange; the first 2 * extra ranks (extra = p - p2)
// pair up around them: the even one of a pair hands its data to the odd one and sits out (vr
// -1), and gets the result back at the end.
struct Pow2 {
  int p2 = 1;
  int extra = 0;
  int vr = 0;
  // The rank that is number pv among the p2.
  int rank_of(int pv) const noexcept { return pv < extra ? pv * 2 + 1 : pv + extra; }
};
Pow2 pow2_group(int p, int r) {
  Pow2 g;
  while (g.p2 * 2 <= p) g.p2 *= 2;
  g.extra = p - g.p2;
  if (r < 2 * g.extra) {
    g.vr = r % 2 == 0 ? -1 : r / 2;
  } else {
    g.vr = r - g.extra;
  }
  return g;
}
// The pairs around the p2: folding in, the even rank of a pair hands its data to the odd one,
// which folds it into its own; folding out, the odd one hands the result back.
Task<void> pow2_fold(StatePtr s, Pow2 g, Expect e, std::byte* data, std::size_t bytes, bool in) {
  const int r = s->rank;
  if (r >= 2 * g.extra) co_return;
  const bool even = r % 2 == 0;
  const int peer = even ? r + 1 : r - 1;
  if (even == in) {
    co_await send_message(s, peer, e, data, bytes);
  } else if (in) {
    co_await recv_reduce_message(s, peer, e, data, bytes);
  } else {
    co_await recv_message(s, peer, e, data, bytes);
  }
}

Task<void> recursive_doubling(StatePtr s, Expect e, std::byte* data, std::size_t bytes) {
  const Pow2 g = pow2_group(s->size, s->rank);
  co_await pow2_fold(s, g, e, data, bytes, true);
  if (g.vr >= 0) {
    // Not folded chunk by chunk: `data` is being sent while the peer's copy arrives.
    std::byte* theirs = s->scratch(CommunicatorState::kCarry0, bytes);
    for (int mask = 1; mask < g.p2; mask <<= 1) {
      int peer = g.rank_of(g.vr ^ mask);
      co_await when_all(send_message(s, peer, e, data, bytes),
                        recv_message(s, peer, e, theirs, bytes));
      reduce_into(data, theirs, bytes / size_of(e.type), e.type, e.redop);
    }
  }
  co_await pow2_fold(s, g, e, data, bytes, false);
}

// Blocks [first, first + count) of an n-element buffer cut into p blocks, in bytes.
Block blocks_bytes(std::size_t n, int p, int first, int count, std::size_t es) {
  Block a = block_bytes(n, p, first, es);
  Block b = block_bytes(n, p, first + count - 1, es);
  return {a.first, b.first + b.bytes - a.first};
}

// Recursive doubling of blocks, in place in `data` cut into p2 blocks, where number vr of the
// p2 holds block vr: in step k it swaps the 2^k blocks it has with those of number vr ^ 2^k,
// straight into place. log2(p2) steps, each rank sending (p2 - 1) / p2 of the buffer.
Task<void> doubling_gather(StatePtr s, Pow2 g, Expect e, std::byte* data, std::size_t n) {
  const std::size_t es = size_of(e.type);
  for (int mask = 1; mask < g.p2; mask <<= 1) {
    int peer = g.rank_of(g.vr ^ mask);
    int lo = g.vr & ~(mask - 1);
    Block mine = blocks_bytes(n, g.p2, lo, mask, es);
    Block theirs = blocks_bytes(n, g.p2, lo ^ mask, mask, es);
    co_await when_all(
        send_message(s, peer, at(e, mine.first), data + mine.first, mine.bytes),
        recv_message(s, peer, at(e, theirs.first), data + theirs.first, theirs.bytes));
  }
}

// Rabenseifner's all_reduce, for p a power of two: a reduce-scatter by recursive halving (in
// step k, rank r keeps the half of its current blocks on its side of bit p / 2^(k+1), sends the
// other half to its partner across that bit and folds the partner's copy of its half in), after
// which rank r holds block r of the result; then the blocks travel back by recursive doubling.
// Each rank sends 2(p-1)/p of the buffer, like the ring, in 2 log2(p) steps instead of
// 2(p - 1), and every step pairs two ranks, so a pair can go ahead while others wait for a core.
Task<void> halving_doubling(StatePtr s, Expect e, std::byte* data, std::size_t n) {
  const Pow2 g = pow2_group(s->size, s->rank);  // vr == rank: no rank sits out
  const std::size_t es = size_of(e.type);
  int lo = 0;
  for (int mask = g.p2 / 2; mask >= 1; mask >>= 1) {
    int peer = g.rank_of(g.vr ^ mask);
    int keep = g.vr & mask ? lo + mask : lo;
    int give = g.vr & mask ? lo : lo + mask;
    Block k = blocks_bytes(n, g.p2, keep, mask, es);
    Block gv = blocks_bytes(n, g.p2, give, mask, es);
    co_await when_all(send_message(s, peer, at(e, gv.first), data + gv.first, gv.bytes),
                      recv_reduce_message(s, peer, at(e, k.first), data + k.first, k.bytes));
    lo = keep;
  }
  co_await doubling_gather(s, g, e, data, n);
}

// p - 1 steps around the ring, in place in `data`: each rank sends block (r - shift - step) to
// its right and receives block (r - shift - 1 - step) from its left, folding it in (`fold`: the
// reduce-scatter, shift 1, after which rank r holds block r of the result) or storing it (the
// all-gather, shift 0, which passes the finished blocks on).
Task<void> ring_in_place(StatePtr s, Expect e, std::byte* data, std::size_t n, int shift,
                         bool fold) {
  const int p = s->size;
  const int r = s->rank;
  const std::size_t es = size_of(e.type);
  const int right = mod(r + 1, p);
  const int left = mod(r - 1, p);
  for (int step = 0; step < p - 1; ++step) {
    Block sb = block_bytes(n, p, mod(r - shift - step, p), es);
    Block rb = block_bytes(n, p, mod(r - shift - 1 - step, p), es);
    Task<void> in = fold ? recv_reduce_message(s, left, at(e, rb.first), data + rb.first, rb.bytes)
                         : recv_message(s, left, at(e, rb.first), data + rb.first, rb.bytes);
    co_await when_all(send_message(s, right, at(e, sb.first), data + sb.first, sb.bytes),
                      std::move(in));
  }
}

// Reduce-scatter from a buffer that stays as it is: each step receives a block straight into
// one of two carry buffers and folds this rank's own block into it; the next step sends it on.
// The last step receives into `out` (rank r's block r of the result).
Task<void> ring_reduce_scatter_into(StatePtr s, Expect e, const std::byte* in, std::size_t n,
                                    std::byte* out) {
  const int p = s->size;
  const int r = s->rank;
  const std::size_t es = size_of(e.type);
  const int right = mod(r + 1, p);
  const int left = mod(r - 1, p);
  const std::size_t biggest = (n / p + 1) * es;
  Block last = block_bytes(n, p, r, es);
  // In place (out inside in): the last step cannot receive over the own block it folds in.
  const bool aliased = out + last.bytes > in && out < in + n * es;
  std::byte* carry[2] = {nullptr, nullptr};
  if (p > 2 || aliased) {
    carry[0] = s->scratch(CommunicatorState::kCarry0, biggest);
    carry[1] = s->scratch(CommunicatorState::kCarry1, biggest);
  }
  for (int step = 0; step < p - 1; ++step) {
    Block sb = block_bytes(n, p, mod(r - 1 - step, p), es);
    Block rb = block_bytes(n, p, mod(r - 2 - step, p), es);
    const std::byte* src = step == 0 ? in + sb.first : carry[(step - 1) & 1];
    std::byte* dst = step == p - 2 && !aliased ? out : carry[step & 1];
    co_await when_all(
        send_message(s, right, at(e, sb.first), src, sb.bytes),
        recv_then_reduce_message(s, left, at(e, rb.first), dst, in + rb.first, rb.bytes));
  }
  if (aliased) copy_bytes(out, carry[(p - 2) & 1], last.bytes);
}

Task<void> all_reduce_body(StatePtr s, RawSpan data, ReduceOp op) {
  const std::size_t bytes = data.bytes();
  Expect e = expect(Op::all_reduce, data, data.count, op);
  if (s->size == 1) co_return;
  const int p2 = pow2_group(s->size, s->rank).p2;
  if (bytes < s->options.ring_threshold_bytes * 2 / static_cast<std::size_t>(p2) ||
      data.count < static_cast<std::size_t>(s->size)) {
    co_await recursive_doubling(s, e, bytes_of(data), bytes);
  } else if (p2 == s->size) {
    co_await halving_doubling(s, e, bytes_of(data), data.count);
  } else {
    co_await ring_in_place(s, e, bytes_of(data), data.count, 1, true);
    co_await ring_in_place(s, e, bytes_of(data), data.count, 0, false);
  }
}

// ---- reduce ------------------------------------------------------------------------------

Task<void> reduce_body(StatePtr s, RawSpan send, RawSpan recv, ReduceOp op, int root) {
  check_root(*s, root);
  const int p = s->size;
  const int r = s->rank;
  const bool is_root = r == root;
  if (is_root) {
    check_type(*s, send, recv);
    if (recv.count != send.count)
      s->fail_argument(
          fmt::format("the root's recv holds {} elements, its send {}", recv.count, send.count));
  }
  const std::size_t bytes = send.bytes();
  const std::size_t es = size_of(send.type);
  Expect e = expect(Op::reduce, send, send.count, op, root);
  if (p == 1) {
    if (recv.data != send.data) copy_bytes(recv.data, send.data, bytes);
    co_return;
  }
  const int vr = mod(r - root, p);
  if (bytes < s->options.ring_threshold_bytes || send.count < static_cast<std::size_t>(p)) {
    // A binomial tree towards the root: log2(p) rounds.
    std::byte* acc = is_root ? bytes_of(recv) : s->scratch(CommunicatorState::kBlock, bytes);
    copy_bytes(acc, send.data, bytes);
    for (int mask = 1; mask < p; mask <<= 1) {
      if ((vr & mask) == 0) {
        int child = vr | mask;
        if (child < p) co_await recv_reduce_message(s, mod(child + root, p), e, acc, bytes);
      } else {
        co_await send_message(s, mod((vr & ~mask) + root, p), e, acc, bytes);
        break;
      }
    }
    co_return;
  }
  // The ring's reduce-scatter, then the blocks to the root, straight into its recv.
  Block mine = block_bytes(send.count, p, r, es);
  std::byte* out =
      is_root ? bytes_of(recv) + mine.first : s->scratch(CommunicatorState::kBlock, mine.bytes);
  co_await ring_reduce_scatter_into(s, e, bytes_of(send), send.count, out);
  if (is_root) {
    std::vector<Task<void>> parts;
    for (int i = 0; i < p; ++i) {
      if (i == r) continue;
      Block b = block_bytes(send.count, p, i, es);
      parts.push_back(recv_message(s, i, at(e, b.first), bytes_of(recv) + b.first, b.bytes));
    }
    co_await when_all(std::move(parts));
  } else {
    co_await send_message(s, root, at(e, mine.first), out, mine.bytes);
  }
}

// ---- broadcast ---------------------------------------------------------------------------

Task<void> broadcast_body(StatePtr s, RawSpan data, int root) {
  check_root(*s, root);
  const int p = s->size;
  if (p == 1) co_return;
  const int r = s->rank;
  const int vr = mod(r - root, p);
  const std::size_t bytes = data.bytes();
  std::byte* d = bytes_of(data);
  Expect e = expect(Op::broadcast, data, data.count, ReduceOp::sum, root);
  if (bytes < s->options.ring_threshold_bytes) {
    // A binomial tree from the root.
    int mask = 1;
    for (; mask < p; mask <<= 1) {
      if (vr & mask) {
        co_await recv_message(s, mod(vr - mask + root, p), e, d, bytes);
        break;
      }
    }
    for (mask >>= 1; mask > 0; mask >>= 1) {
      if (vr + mask < p) co_await send_message(s, mod(vr + mask + root, p), e, d, bytes);
    }
    co_return;
  }
  // A pipelined chain root -> root+1 -> ...: each rank passes chunk c on while chunk c+1
  // arrives, so the whole chain moves at the speed of one link.
  const int prev = mod(r - 1, p);
  const int next = mod(r + 1, p);
  const bool has_next = vr + 1 < p;
  if (vr == 0) {
    co_await send_message(s, next, e, d, bytes);
    co_return;
  }
  if (!has_next) {
    // The chain's end passes nothing on: it reads the frames in batches.
    co_await recv_message(s, prev, e, d, bytes);
    co_return;
  }
  const std::size_t chunk = s->options.chunk_bytes;
  std::size_t off = 0;
  std::size_t sent = 0;
  while (off < bytes) {
    std::size_t len = std::min(chunk, bytes - off);
    if (sent < off) {
      std::size_t slen = std::min(chunk, bytes - sent);
      co_await when_all(send_message(s, next, at(e, sent), d + sent, slen),
                        recv_message(s, prev, at(e, off), d + off, len));
      sent += slen;
    } else {
      co_await recv_message(s, prev, at(e, off), d + off, len);
    }
    off += len;
  }
  if (sent < bytes) co_await send_message(s, next, at(e, sent), d + sent, bytes - sent);
}

// ---- scatter, gather, all_gather, reduce_scatter, all_to_all -----------------------------

// The root's n-element buffer `whole` and every rank's block `mine`, for scatter (from the root)
// and gather (to it): the root talks to every rank at once.
Task<void> rooted_blocks(StatePtr s, Op op, RawSpan whole, RawSpan mine, int root) {
  check_root(*s, root);
  const bool to_root = op == Op::gather;
  const int p = s->size;
  const int r = s->rank;
  const std::size_t es = size_of(mine.type);
  if (r != root) {
    Expect e = expect(op, mine, mine.count, ReduceOp::sum, root);
    if (to_root) {
      co_await send_message(s, root, e, bytes_of(mine), mine.bytes());
    } else {
      co_await recv_message(s, root, e, bytes_of(mine), mine.bytes());
    }
    co_return;
  }
  check_type(*s, whole, mine);
  Block own = own_block(*s, whole.count, mine, to_root ? "the root's send" : "the root's recv");
  if (to_root) {
    copy_bytes(bytes_of(whole) + own.first, mine.data, own.bytes);
  } else {
    copy_bytes(mine.data, bytes_of(whole) + own.first, own.bytes);
  }
  std::vector<Task<void>> parts;
  for (int i = 0; i < p; ++i) {
    if (i == r) continue;
    Block b = block_bytes(whole.count, p, i, es);
    Expect e = expect(op, whole, b.bytes / es, ReduceOp::sum, root);
    parts.push_back(to_root ? recv_message(s, i, e, bytes_of(whole) + b.first, b.bytes)
                            : send_message(s, i, e, bytes_of(whole) + b.first, b.bytes));
  }
  co_await when_all(std::move(parts));
}

Task<void> scatter_body(StatePtr s, RawSpan send, RawSpan recv, int root) {
  return rooted_blocks(std::move(s), Op::scatter, send, recv, root);
}

Task<void> gather_body(StatePtr s, RawSpan send, RawSpan recv, int root) {
  return rooted_blocks(std::move(s), Op::gather, recv, send, root);
}

Task<void> all_gather_body(StatePtr s, RawSpan send, RawSpan recv) {
  check_type(*s, send, recv);
  const int p = s->size;
  Block own = own_block(*s, recv.count, send, "send");
  if (bytes_of(recv) + own.first != send.data)
    copy_bytes(bytes_of(recv) + own.first, send.data, own.bytes);
  if (p == 1) co_return;
  Expect e = expect(Op::all_gather, recv, recv.count);
  if ((p & (p - 1)) == 0) {
    co_await doubling_gather(s, pow2_group(p, s->rank), e, bytes_of(recv), recv.count);
  } else {
    co_await ring_in_place(s, e, bytes_of(recv), recv.count, 0, false);
  }
}

Task<void> reduce_scatter_body(StatePtr s, RawSpan send, RawSpan recv, ReduceOp op) {
  check_type(*s, send, recv);
  const int p = s->size;
  Block own = own_block(*s, send.count, recv, "recv");
  if (p == 1) {
    if (recv.data != send.data) copy_bytes(recv.data, send.data, own.bytes);
    co_return;
  }
  co_await ring_reduce_scatter_into(s, expect(Op::reduce_scatter, send, send.count, op),
                                    bytes_of(send), send.count, bytes_of(recv));
}

Task<void> all_to_all_body(StatePtr s, RawSpan send, RawSpan recv) {
  check_type(*s, send, recv);
  const int p = s->size;
  const int r = s->rank;
  if (send.count != recv.count || send.count % static_cast<std::size_t>(p) != 0)
    s->fail_argument(
        fmt::format("send and recv must hold the same count, a multiple of {}: "
                    "they hold {} and {}",
                    p, send.count, recv.count));
  const std::size_t part = send.bytes() / static_cast<std::size_t>(p);
  copy_bytes(bytes_of(recv) + r * part, bytes_of(send) + r * part, part);
  Expect e = expect(Op::all_to_all, send, send.count);
  // Step k pairs each rank with the ranks k away on either side: everyone sends one part and
  // receives one part per step.
  for (int k = 1; k < p; ++k) {
    int to = mod(r + k, p);
    int from = mod(r - k, p);
    co_await when_all(send_message(s, to, e, bytes_of(send) + to * part, part),
                      recv_message(s, from, e, bytes_of(recv) + from * part, part));
  }
}

Task<void> barrier_body(StatePtr s) {
  // Dissemination: ceil(log2(p)) rounds; after round k every rank has heard, directly or not,
  // from 2^(k+1) ranks.
  const int p = s->size;
  const int r = s->rank;
  RawSpan none;
  Expect e = expect(Op::barrier, none, 0);
  for (int k = 1; k < p; k <<= 1) {
    co_await when_all(send_message(s, mod(r + k, p), e, nullptr, 0),
                      recv_message(s, mod(r - k, p), e, nullptr, 0));
  }
}

void check_peer(CommunicatorState& s, int peer) {
  if (peer < 0 || peer >= s.size || peer == s.rank)
    s.fail_argument(fmt::format("peer {} is not another rank of {}", peer, s.size));
}

Task<void> send_body(StatePtr s, RawSpan data, int peer) {
  check_peer(*s, peer);
  co_await send_message(s, peer, expect(Op::send_recv, data, data.count), bytes_of(data),
                        data.bytes());
}

Task<void> recv_body(StatePtr s, RawSpan data, int peer) {
  check_peer(*s, peer);
  co_await recv_message(s, peer, expect(Op::send_recv, data, data.count), bytes_of(data),
                        data.bytes());
}

// The whole of `text` as a number in [min, max], or std::invalid_argument naming `name`.
long parse_number(const char* name, const char* text, long min, long max, const char* what) {
  char* end = nullptr;
  errno = 0;
  long x = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || errno != 0 || x < min || x > max)
    throw std::invalid_argument(fmt::format("{}={} is not {}", name, text, what));
  return x;
}

int env_int(const char* name, bool& found) {
  const char* v = std::getenv(name);
  found = v && *v;
  return found ? static_cast<int>(parse_number(name, v, 0, 1'000'000, "a rank or a size")) : 0;
}

}  // namespace
}  // namespace detail

// ---- Rendezvous ----------------------------------------------------------------------------

Rendezvous Rendezvous::from_environment() {
  static constexpr const char* kConventions[][2] = {
      {"RANK", "WORLD_SIZE"},
      {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
      {"PMI_RANK", "PMI_SIZE"},
      {"SLURM_PROCID", "SLURM_NTASKS"}};
  Rendezvous rz;
  bool found = false;
  for (auto& c : kConventions) {
    bool has_rank = false;
    bool has_size = false;
    int rank = detail::env_int(c[0], has_rank);
    int size = detail::env_int(c[1], has_size);
    if (has_rank != has_size)
      throw std::invalid_argument(
          fmt::format("{} is set but {} is not", has_rank ? c[0] : c[1], has_rank ? c[1] : c[0]));
    if (has_rank) {
      rz.rank = rank;
      rz.size = size;
      found = true;
      break;
    }
  }
  if (!found)
    throw std::invalid_argument(
        "no rank in the environment: set RANK and WORLD_SIZE (or run under niox-collective-run, "
        "torchrun, mpirun or srun)");
  if (rz.size < 1 || rz.rank >= rz.size)
    throw std::invalid_argument(fmt::format("rank {} of a world of {}", rz.rank, rz.size));
  const char* addr = std::getenv("MASTER_ADDR");
  const char* port = std::getenv("MASTER_PORT");
  if (rz.size > 1 && (!addr || !*addr || !port || !*port))
    throw std::invalid_argument("MASTER_ADDR and MASTER_PORT must name where rank 0 listens");
  if (addr && *addr) rz.master_host = addr;
  if (port && *port) {
    rz.master_port =
        static_cast<std::uint16_t>(detail::parse_number("MASTER_PORT", port, 1, 65535, "a port"));
  }
  return rz;
}

// ---- Communicator --------------------------------------------------------------------------

Communicator::Communicator(const Rendezvous& rz, CommunicatorOptions options) {
  if (rz.size < 1 || rz.rank < 0 || rz.rank >= rz.size)
    throw std::invalid_argument(fmt::format("rank {} of a world of {}", rz.rank, rz.size));
  // Chunks hold whole elements of every type.
  options.chunk_bytes = std::max<std::size_t>(64, options.chunk_bytes / 64 * 64);
  rank_ = rz.rank;
  size_ = rz.size;
  EventLoop* loop = options.loop;
  if (!loop && options.progress_thread) {
    EventLoopGroup::Options g;
    g.threads = 1;
    g.loop = options.loop_options;
    own_group_ = std::make_unique<EventLoopGroup>(g);
    loop = &own_group_->loop(0);
  } else if (!loop) {
    own_loop_ = std::make_unique<EventLoop>(options.loop_options);
    loop = own_loop_.get();
  }
  state_ = std::make_shared<detail::CommunicatorState>(rz.rank, rz.size, options, *loop);
  if (own_loop_) state_->driver = std::this_thread::get_id();
  try {
    wait(detail::rendezvous(state_, rz));
  } catch (...) {
    close();
    release();
    throw;
  }
}

Communicator Communicator::from_environment(CommunicatorOptions options) {
  return Communicator(Rendezvous::from_environment(), std::move(options));
}

Communicator::Communicator(Communicator&&) noexcept = default;
Communicator& Communicator::operator=(Communicator&& other) noexcept {
  if (this != &other) {
    close();
    release();
    rank_ = other.rank_;
    size_ = other.size_;
    own_group_ = std::move(other.own_group_);
    own_loop_ = std::move(other.own_loop_);
    state_ = std::move(other.state_);
  }
  return *this;
}

Communicator::~Communicator() {
  close();
  release();
}

void Communicator::release() noexcept {
  if (own_loop_ && state_) {
    // Destroying the loop ends what is pending (its handlers run, the futures get the error);
    // on another thread than the driver's it must not touch the ring: leak it instead.
    if (!state_->driven_by(std::this_thread::get_id())) {
      log(LogLevel::error,
          "niox collective: a communicator destroyed away from the thread that drives it; its "
          "loop is left as it is");
      (void)own_loop_.release();
    }
  }
  state_.reset();
  own_loop_.reset();
  own_group_.reset();  // joins the loop's thread
}

EventLoop& Communicator::loop() const noexcept { return *state_->loop; }

bool Communicator::driven_here() const {
  if (!state_->driver) return false;
  if (!state_->driven_by(std::this_thread::get_id()))
    throw std::logic_error(
        "niox collective: this communicator is driven by the thread that made it; wait on it "
        "there, or make it with CommunicatorOptions::progress_thread");
  return true;
}

void Communicator::close() {
  if (!state_) return;
  auto run = [s = state_] {
    s->fail(CollectiveError(std::make_error_code(std::errc::operation_canceled),
                            fmt::format("rank {} closed its communicator", s->rank), -1));
  };
  if (state_->loop->in_event_loop()) {
    run();
    return;
  }
  if (state_->driver) {
    // Another thread than the driver's: the links close when the driver next runs the loop.
    state_->loop->execute(run);
    return;
  }
  // Waits for the loop to have closed the links, so that nothing of them outlives this call.
  std::promise<void> done;
  auto f = done.get_future();
  state_->loop->execute([run, &done] {
    run();
    done.set_value();
  });
  f.wait();
}

namespace {
void finish(detail::FutureState& f, std::exception_ptr e) {
  std::lock_guard lock(f.mutex);
  f.error = std::move(e);
  f.done = true;
  f.cv.notify_all();
}
}  // namespace

Future Communicator::start(Task<void> operation) {
  auto fs = std::make_shared<detail::FutureState>();
  fs->comm = state_;
  co_spawn(*state_->loop, std::move(operation),
           [fs](std::exception_ptr e) { finish(*fs, std::move(e)); });
  if (state_->driver && state_->driven_by(std::this_thread::get_id())) {
    // Starts it: its first frames leave now, not at the next wait.
    poll();
  }
  return Future(std::move(fs));
}

bool Communicator::poll() {
  if (!driven_here()) return false;
  return state_->loop->run_once(std::chrono::milliseconds(0)) > 0;
}

void Communicator::wait(Task<void> operation) {
  if (!state_->driver) {
    sync_wait(std::move(operation));
    return;
  }
  // Checked before start(): a call that may not wait must not leave its operation queued.
  if (niox::detail::on_loop_thread())
    throw BlockingOperationException(
        "niox collective: a blocking call on an event loop thread would block the loop; "
        "co_await the async form");
  driven_here();
  start(std::move(operation)).get();
}

// ---- Future --------------------------------------------------------------------------------

Future::~Future() = default;

bool Future::ready() const noexcept {
  if (!state_) return false;
  std::lock_guard lock(state_->mutex);
  return state_->done;
}

void Future::wait() const {
  if (!state_) throw std::future_error(std::future_errc::no_state);
  auto& s = *state_;
  if (s.comm && s.comm->driver) {
    {
      std::lock_guard lock(s.mutex);
      if (s.done) return;
    }
    if (!s.comm->driven_by(std::this_thread::get_id()))
      throw std::logic_error(
          "niox collective: this communicator is driven by the thread that made it; wait on "
          "its futures there, or make it with CommunicatorOptions::progress_thread");
    if (niox::detail::on_loop_thread())
      throw BlockingOperationException("niox collective: Future::wait() on an event loop thread");
    s.comm->drive([&] {
      std::lock_guard lock(s.mutex);
      return s.done;
    });
    return;
  }
  std::unique_lock lock(s.mutex);
  s.cv.wait(lock, [&] { return s.done; });
}

void Future::get() {
  wait();
  auto s = std::move(state_);
  if (s->error) std::rethrow_exception(s->error);
}

Task<void> Communicator::async_barrier() {
  return detail::run_op(state_, detail::Op::barrier, detail::barrier_body(state_));
}
Task<void> Communicator::do_broadcast(detail::RawSpan data, int root) {
  return detail::run_op(state_, detail::Op::broadcast, detail::broadcast_body(state_, data, root));
}
Task<void> Communicator::do_scatter(detail::RawSpan send, detail::RawSpan recv, int root) {
  return detail::run_op(state_, detail::Op::scatter,
                        detail::scatter_body(state_, send, recv, root));
}
Task<void> Communicator::do_gather(detail::RawSpan send, detail::RawSpan recv, int root) {
  return detail::run_op(state_, detail::Op::gather, detail::gather_body(state_, send, recv, root));
}
Task<void> Communicator::do_all_gather(detail::RawSpan send, detail::RawSpan recv) {
  return detail::run_op(state_, detail::Op::all_gather,
                        detail::all_gather_body(state_, send, recv));
}
Task<void> Communicator::do_reduce(detail::RawSpan send, detail::RawSpan recv, ReduceOp op,
                                   int root) {
  return detail::run_op(state_, detail::Op::reduce,
                        detail::reduce_body(state_, send, recv, op, root));
}
Task<void> Communicator::do_all_reduce(detail::RawSpan data, ReduceOp op) {
  return detail::run_op(state_, detail::Op::all_reduce, detail::all_reduce_body(state_, data, op));
}
Task<void> Communicator::do_reduce_scatter(detail::RawSpan send, detail::RawSpan recv,
                                           ReduceOp op) {
  return detail::run_op(state_, detail::Op::reduce_scatter,
                        detail::reduce_scatter_body(state_, send, recv, op));
}
Task<void> Communicator::do_all_to_all(detail::RawSpan send, detail::RawSpan recv) {
  return detail::run_op(state_, detail::Op::all_to_all,
                        detail::all_to_all_body(state_, send, recv));
}
Task<void> Communicator::do_send(detail::RawSpan data, int peer) {
  return detail::run_op(state_, detail::Op::send_recv, detail::send_body(state_, data, peer));
}
Task<void> Communicator::do_recv(detail::RawSpan data, int peer) {
  return detail::run_op(state_, detail::Op::send_recv, detail::recv_body(state_, data, peer));
}

}  // namespace niox::collective
