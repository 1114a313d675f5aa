// The rendezvous: how size() processes that know only rank 0's address become a full mesh,
// with a connection each way between every two ranks (see CommunicatorState::Link).
//
//   rank 0                          rank r > 0
//   listen on the master address    connect to the master (retrying while it is not up yet)
//                                   listen on the address that reached it, any port
//   <- hello {rank, size, port, options} --
//   (every rank arrived)
//   -- table {job id, every rank's host:port} ->
//   connect to every rank j > 0     connect to every rank j > 0, j != r
//   -- peer_hello {0, job} ->       -- peer_hello {r, job} ->
//                                   accept every rank j != r
//
// Every rank writes its frames on the connections it opened (a member's first is the master
// connection) and reads on those it accepted. The hello carries the options the frames depend
// on (chunk size, ring threshold): ranks that differ are refused with the reason. A connection
// to a listener that says nothing valid (a port scanner, a rank of another job) is dropped and
// the rendezvous goes on; a rank number that is taken, or a world size that differs, fails it.
#include "communicator_state.hpp"

#include <niox/async/spawn.hpp>
#include <niox/async/when_all.hpp>
#include <niox/base/log.hpp>
#include <niox/channels/socket_options.hpp>

#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <random>
#include <utility>
#include <string>
#include <vector>

namespace niox::collective::detail {
namespace {

using namespace std::chrono_literals;

ByteBuffer wrap_bytes(void* p, std::size_t n) {
  return ByteBuffer::wrap(std::span<std::byte>(static_cast<std::byte*>(p), n));
}

[[noreturn]] void refuse(std::errc code, const std::string& what, int rank = -1) {
  throw CollectiveError(std::make_error_code(code), "rendezvous: " + what, rank);
}

// Exactly n bytes, or false at end of stream / on an error.
Task<bool> read_exact(AsynchronousSocketChannel& ch, void* p, std::size_t n) {
  ByteBuffer b = wrap_bytes(p, n);
  while (b.has_remaining()) {
    std::error_code ec;
    auto got = co_await ch.read(b, ec);
    if (ec || got < 0) co_return false;
  }
  co_return true;
}

Task<void> write_frame(AsynchronousSocketChannel& ch, FrameHeader h, const void* body,
                       std::size_t n) {
  h.length = n;
  ByteBuffer bufs[2] = {wrap_bytes(&h, sizeof h), wrap_bytes(const_cast<void*>(body), n)};
  co_await ch.write(std::span<ByteBuffer>(bufs, n ? 2 : 1));
}

// Tells a refused rank why (best effort) and drops it.
Task<void> send_refusal(AsynchronousSocketChannel& ch, const std::string& why) {
  FrameHeader h;
  h.kind = FrameKind::abort;
  h.count = static_cast<std::uint64_t>(std::errc::invalid_argument);
  h.aux = 0;
  try {
    co_await write_frame(ch, h, why.data(), why.size());
  } catch (const std::system_error&) {
  }
}

void set_host(char (&out)[64], const std::string& host) {
  std::memset(out, 0, sizeof out);
  std::memcpy(out, host.data(), std::min(host.size(), sizeof out - 1));
}

std::string host_of(const char (&in)[64]) { return std::string(in, strnlen(in, sizeof in)); }

void tune(AsynchronousSocketChannel& ch) {
  // Small frames (barriers, 8-byte reductions, last chunks) must not wait for an ACK.
  ch.set_option(StandardSocketOptions::tcp_nodelay, true);
}

Task<bool> read_hello(AsynchronousSocketChannel& ch, FrameKind kind, HelloBody& hello) {
  // Awaited in statements of their own, not in the if: GCC 12 miscompiles a co_await in an
  // if condition (docs/coroutines.md).
  FrameHeader h;
  bool whole = co_await read_exact(ch, &h, sizeof h);
  if (!whole || h.magic != kFrameMagic || h.kind != kind || h.length != sizeof hello) {
    co_return false;
  }
  whole = co_await read_exact(ch, &hello, sizeof hello);
  co_return whole;
}

// The next connection on `listener` that greets with a `kind` frame. One that says something
// else, or nothing for a quarter of connect_timeout (5 s at most: a health check, a port
// scanner), is dropped and the next one taken.
// The state by reference: the callers hold it, and the awaited call then makes no temporary
// with a destructor (GCC 12 can destroy one twice when the result initialises a variable).
Task<std::pair<AsynchronousSocketChannel, HelloBody>> accept_greeting(
    CommunicatorState& s, AsynchronousServerSocketChannel& listener, FrameKind kind) {
  const auto patience = std::min<std::chrono::milliseconds>(5s, s.options.connect_timeout / 4);
  for (;;) {
    AsynchronousSocketChannel ch = co_await listener.accept();
    HelloBody hello;
    bool ok = false;
    try {
      ok = co_await with_timeout(*s.loop, read_hello(ch, kind, hello), patience);
    } catch (const std::system_error&) {
    }
    if (ok) co_return std::pair{std::move(ch), hello};
    log(LogLevel::warn, "collective rendezvous: rank {} dropped a connection that is not a rank",
        s.rank);
  }
}

Task<AsynchronousSocketChannel> connect_retrying(CommunicatorState& s, InetSocketAddress to,
                                                 bool retry) {
  for (;;) {
    auto ch = AsynchronousSocketChannel::open(
        *s.loop, to.is_ipv6() ? ProtocolFamily::inet6 : ProtocolFamily::inet);
    std::error_code ec;
    co_await ch.connect(to, ec);
    if (!ec) co_return ch;
    if (!retry || (ec != std::errc::connection_refused && ec != std::errc::timed_out &&
                   ec != std::errc::network_unreachable && ec != std::errc::host_unreachable)) {
      refuse(std::errc::connection_refused,
             fmt::format("cannot connect to {}:{}: {}", to.host_string(), to.port(), ec.message()));
    }
    // Rank 0 may not be listening yet: launchers start every rank at once.
    co_await sleep_for(*s.loop, 20ms);
  }
}

// This rank's connection to every rank j > 0 but itself, each greeted with a peer_hello.
Task<void> connect_out(CommunicatorState& s, const std::vector<TableEntry>& table,
                       std::uint64_t job) {
  for (int j = 1; j < s.size; ++j) {
    if (j == s.rank) continue;
    InetSocketAddress at(host_of(table[j].host), static_cast<std::uint16_t>(table[j].port));
    AsynchronousSocketChannel ch = co_await connect_retrying(s, at, false);
    tune(ch);
    HelloBody ph;
    ph.rank = s.rank;
    ph.size = s.size;
    ph.job = job;
    FrameHeader x;
    x.kind = FrameKind::peer_hello;
    co_await write_frame(ch, x, &ph, sizeof ph);
    s.links[j].out.emplace(std::move(ch));
  }
}

// Every other rank's connection to this one, on `listener`.
Task<void> accept_in(CommunicatorState& s, AsynchronousServerSocketChannel& listener,
                     std::uint64_t job) {
  for (int k = 1; k < s.size;) {
    auto [ch, ph] = co_await accept_greeting(s, listener, FrameKind::peer_hello);
    if (ph.job != job || ph.rank < 0 || ph.rank >= s.size || ph.rank == s.rank ||
        s.links[ph.rank].in) {
      log(LogLevel::warn, "collective rendezvous: rank {} dropped a connection of another job",
          s.rank);
      continue;
    }
    tune(ch);
    s.links[ph.rank].in.emplace(std::move(ch));
    ++k;
  }
}

Task<void> master(StatePtr s, Rendezvous rz) {
  const int p = s->size;
  InetSocketAddress where(rz.master_host, rz.master_port);
  auto listener = AsynchronousServerSocketChannel::open(
      *s->loop, where.is_ipv6() ? ProtocolFamily::inet6 : ProtocolFamily::inet);
  listener.bind(where);
  std::vector<TableEntry> table(p);
  set_host(table[0].host, where.host_string());
  table[0].port = rz.master_port;
  int arrived = 1;
  while (arrived < p) {
    auto [ch, hello] = co_await accept_greeting(*s, listener, FrameKind::hello);
    std::string why;
    if (hello.size != p) {
      why = fmt::format("rank {} says the world has {} ranks, rank 0 says {}", hello.rank,
                        hello.size, p);
    } else if (hello.rank <= 0 || hello.rank >= p) {
      why = fmt::format("rank {} is not a rank of {}", hello.rank, p);
    } else if (s->links[hello.rank].in) {
      why = fmt::format("two processes say they are rank {}", hello.rank);
    } else if (hello.chunk_bytes != s->options.chunk_bytes ||
               hello.ring_threshold_bytes != s->options.ring_threshold_bytes) {
      why = fmt::format(
          "rank {} has chunk_bytes {} and ring_threshold_bytes {}, rank 0 has {} and {}",
          hello.rank, hello.chunk_bytes, hello.ring_threshold_bytes, s->options.chunk_bytes,
          s->options.ring_threshold_bytes);
    }
    if (!why.empty()) {
      co_await send_refusal(ch, why);
      refuse(std::errc::invalid_argument, why, hello.rank);
    }
    tune(ch);
    table[hello.rank] = TableEntry{};
    set_host(table[hello.rank].host, host_of(hello.host));
    table[hello.rank].port = hello.port;
    s->links[hello.rank].in.emplace(std::move(ch));
    ++arrived;
  }
  listener.close();
  std::uint64_t job =
      std::random_device{}() * 0x100000001ull ^
      static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  FrameHeader t;
  t.kind = FrameKind::table;
  t.count = static_cast<std::uint64_t>(p);
  t.aux = job;
  for (int i = 1; i < p; ++i) {
    co_await write_frame(*s->links[i].in, t, table.data(), table.size() * sizeof(TableEntry));
  }
  co_await connect_out(*s, table, job);
}

Task<void> member(StatePtr s, Rendezvous rz) {
  const int p = s->size;
  const int r = s->rank;
  InetSocketAddress master_at(rz.master_host, rz.master_port);
  AsynchronousSocketChannel up = co_await connect_retrying(*s, master_at, true);
  tune(up);
  // Peers reach this rank on the interface its route to the master left from.
  InetSocketAddress me = up.local_address()->inet();
  auto listener = AsynchronousServerSocketChannel::open(
      *s->loop, me.is_ipv6() ? ProtocolFamily::inet6 : ProtocolFamily::inet);
  listener.bind(InetSocketAddress(me.host_string(), 0), p);
  HelloBody hello;
  hello.rank = r;
  hello.size = p;
  hello.port = listener.local_address()->inet().port();
  hello.chunk_bytes = s->options.chunk_bytes;
  hello.ring_threshold_bytes = s->options.ring_threshold_bytes;
  set_host(hello.host, me.host_string());
  FrameHeader h;
  h.kind = FrameKind::hello;
  co_await write_frame(up, h, &hello, sizeof hello);

  FrameHeader t;
  bool whole = co_await read_exact(up, &t, sizeof t);
  if (!whole || t.magic != kFrameMagic)
    refuse(std::errc::connection_reset, "rank 0 closed the connection before the table came", 0);
  if (t.kind == FrameKind::abort) {
    std::string why(std::min<std::size_t>(t.length, 4000), '\0');
    co_await read_exact(up, why.data(), why.size());
    refuse(std::errc::invalid_argument, "rank 0 refused this rank: " + why, 0);
  }
  if (t.kind != FrameKind::table || t.count != static_cast<std::uint64_t>(p) ||
      t.length != p * sizeof(TableEntry))
    refuse(std::errc::protocol_error, "rank 0 sent no table of the ranks", 0);
  std::vector<TableEntry> table(p);
  whole = co_await read_exact(up, table.data(), t.length);
  if (!whole)
    refuse(std::errc::connection_reset, "rank 0 closed the connection during the table", 0);
  const std::uint64_t job = t.aux;
  s->links[0].out.emplace(std::move(up));
  // At once: a rank's connections may wait on listeners' backlogs filled by the others'.
  co_await when_all(connect_out(*s, table, job), accept_in(*s, listener, job));
  listener.close();
}

Task<void> connect_all(StatePtr s, Rendezvous rz) {
  if (s->size == 1) co_return;
  if (s->rank == 0) {
    co_await master(s, rz);
  } else {
    co_await member(s, rz);
  }
}

}  // namespace

Task<void> rendezvous(StatePtr s, Rendezvous rz) {
  co_await resume_on(*s->loop);
  std::exception_ptr error;
  try {
    co_await with_timeout(*s->loop, connect_all(s, rz), s->options.connect_timeout);
  } catch (const CollectiveError&) {
    error = std::current_exception();
  } catch (const std::system_error& e) {
    int missing = 0;
    for (int i = 0; i < s->size; ++i)
      if (i != s->rank && !s->links[i].connected()) ++missing;
    auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(s->options.connect_timeout).count();
    error = std::make_exception_ptr(CollectiveError(
        e.code(),
        e.code() == std::errc::timed_out
            ? fmt::format("rendezvous: rank {} of {} timed out after {} ms with {} of its {} "
                          "peers connected (master {}:{})",
                          s->rank, s->size, ms, s->size - 1 - missing, s->size - 1, rz.master_host,
                          rz.master_port)
            : fmt::format("rendezvous: rank {}: {}", s->rank, e.what()),
        -1));
  }
  if (error) {
    s->fail(error);
    s->throw_failure();
  }
}

}  // namespace niox::collective::detail
