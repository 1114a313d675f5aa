// niox-transfer: one file over TCP, verified end to end. See --help.
//
//   niox-transfer recv --port P --out PATH     accepts one transfer, stores it, exits
//   niox-transfer send FILE --to HOST:PORT     sends FILE, exits once the receiver verified it
//
// Zero-copy at both ends, each end one coroutine on one niox EventLoop (the main thread runs
// it): the sender's body leaves by AsynchronousFileChannel::transfer_to (sendfile); the
// receiver's arrives by AsynchronousFileChannel::transfer_from (socket -> the loop's pipe ->
// file at the body's offset, splice), so no body byte is copied through user space. The
// protocol (header, checksum, naming the file only once verified) is TransferReceiver's and
// prepare_send()'s; this file only moves bytes and keeps time.
//
// Exit status: 0 transferred and verified; 1 the transfer failed (the receiver leaves no file);
// 2 usage error (or recv's --out directory missing); recv also 3 no complete header within
// --header-timeout, 4 nothing arrived for --idle-timeout, 5 no room for the file on its disk.
// Whenever the receiver refuses or gives up, it tells the sender why, and both print it.
#include "command_line.hpp"
#include "output_file.hpp"
#include "progress_reporter.hpp"
#include "transfer_options.hpp"
#include "transfer_protocol.hpp"
#include "transfer_session.hpp"

#include <niox/async/asynchronous_file_channel.hpp>
#include <niox/async/asynchronous_socket_channel.hpp>
#include <niox/async/spawn.hpp>
#include <niox/async/task.hpp>
#include <niox/async/when_any.hpp>
#include <niox/channels/socket_address.hpp>
#include <niox/loop/event_loop.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <exception>
#include <iostream>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

namespace {

using namespace niox;
using namespace niox::transfer;

constexpr std::size_t chunk = 1 << 20;  // per transfer_to: the sender's progress granularity
// Per transfer_from, each hashed as soon as it landed. A quarter of the chunk the sender uses:
// what landed is then hashed while it is still in the CPU's cache, and the receiver's CPU for a
// 256 MiB transfer fell from 0.36-0.64 s to 0.23-0.28 s (cached input, 3 interleaved runs
// each; 128 KiB did no better).
constexpr std::size_t receive_chunk = 256 << 10;
// How long a receiver that refused a transfer keeps reading (and dropping) what the sender still
// sends, so that its verdict is read rather than cut off by a reset. See Receiver::reply.
constexpr std::chrono::seconds linger_time{5};

// Exit statuses (see --help).
enum : int {
  exit_ok = 0,
  exit_failed = 1,
  exit_usage = 2,
  exit_header_timeout = 3,  // recv: no complete header within --header-timeout
  exit_idle_timeout = 4,    // recv: nothing arrived for --idle-timeout
  exit_no_room = 5,         // recv: the file does not fit on the receiver's disk
};

// The disk (or the process's file size limit) has no room for the file.
bool no_room(std::error_code ec) {
  return ec == TransferErrc::no_space || ec == std::errc::no_space_on_device ||
         ec == std::errc::file_too_large || ec == std::error_code(EDQUOT, std::system_category());
}

[[noreturn]] void die(const std::string& what, int status = exit_failed) {
  std::cerr << "niox-transfer: " << what << "\n";
  std::exit(status);
}

EventLoop::Options loop_options(const std::string& backend) {
  EventLoop::Options o;
  o.backend = examples::parse_backend(backend).value_or(BackendKind::automatic);
  if (o.backend != BackendKind::automatic && !EventLoop::backend_available(o.backend)) {
    die("the " + backend + " backend is not available on this machine");
  }
  return o;
}

std::vector<SocketAddress> resolve(const HostPort& hp) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_ADDRCONFIG;
  addrinfo* res = nullptr;
  if (int rc = ::getaddrinfo(hp.host.c_str(), std::to_string(hp.port).c_str(), &hints, &res);
      rc != 0) {
    die("cannot resolve '" + hp.host + "': " + ::gai_strerror(rc));
  }
  std::vector<SocketAddress> out;
  for (auto* a = res; a != nullptr; a = a->ai_next) {
    out.push_back(SocketAddress::from_sockaddr(a->ai_addr, a->ai_addrlen));
  }
  ::freeaddrinfo(res);
  return out;
}

// Runs `task` on `loop`, on this thread, until it ends: its exit status. An exception that ends
// it (out of memory, a socket that cannot be opened) is reported and fails the transfer.
int run_on(EventLoop& loop, Task<int> task) {
  int status = exit_failed;
  co_spawn(loop, std::move(task), [&](std::exception_ptr e, int s) {
    status = s;
    if (e) {
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& ex) {
        std::cerr << "niox-transfer: " << ex.what() << "\n";
      }
      status = exit_failed;
    }
    loop.stop();
  });
  loop.run();
  // Whatever is still pending ends here (operation_aborted).
  loop.shutdown();
  return status;
}

// `task`'s result, or nothing when `limit` passed first (the task was stopped: its awaitables
// ended with operation_aborted, and it let that escape). A limit of 0 is no limit, as in the
// options.
template <class T>
Task<std::optional<T>> within(EventLoop& loop, std::chrono::nanoseconds limit, Task<T> task) {
  if (limit.count() <= 0) {
    co_return co_await task;
  }
  try {
    co_return co_await with_timeout(loop, std::move(task), limit);
  } catch (const std::system_error& e) {
    if (e.code() != std::errc::timed_out) throw;
  }
  co_return std::nullopt;
}

// The transfer engine's own descriptor of a file that the send plan (hashing it) or the
// receiver (naming it once verified) keeps open as well.
FileDescriptor duplicate(int fd) {
  FileDescriptor copy(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
  if (!copy) {
    throw std::system_error(errno, std::system_category(), "duplicating a file descriptor");
  }
  return copy;
}

// ---- send -------------------------------------------------------------------------------

// How one of the sender's two racing halves (the body, the verdict) ended: `ec` empty when it
// did all it had to.
struct Outcome {
  std::error_code ec;
  const char* doing = "";  // for the message
};

bool connection_broken(std::error_code ec) {
  return ec == std::errc::broken_pipe || ec == std::errc::connection_reset;
}

// The body, then the checksum trailer. Each chunk is hashed (through FileHasher's mapping) just
// before it leaves by sendfile: no pass over the file before the first byte is sent, and a file
// that was not cached is read in by the hash, so the send finds it in memory.
Task<Outcome> send_body(SendPlan& plan, AsynchronousFileChannel& file,
                        AsynchronousSocketChannel& socket, ProgressReporter& progress) {
  std::uint64_t sent = 0;
  while (sent < plan.size) {
    const std::uint64_t n = std::min<std::uint64_t>(chunk, plan.size - sent);
    if (auto ec = plan.hash_chunk(sent, n)) {
      co_return Outcome{ec, "reading the file"};
    }
    std::error_code ec;
    TransferResult r;
    r = co_await file.transfer_to(sent, n, socket, ec);
    sent += r.bytes;
    if (!ec && r.end_of_input) {
      ec = make_error_code(LoopError::end_of_file);  // the file shrank
    }
    if (ec) {
      co_return Outcome{ec, "sending the body"};
    }
    progress.update(sent);
  }
  progress.finish();
  ByteBuffer trailer = plan.trailer();
  std::error_code ec;
  co_await socket.write(trailer, ec);
  co_return Outcome{ec, "sending the body"};
}

// Reads the verdict into `reply` and, after one that is not ok, the receiver's reason, until
// they are complete or the connection ends (a receiver that predates the reason ends it before
// one). Resumable: what a stopped read left in `reply` stays there.
Task<Outcome> read_reply(AsynchronousSocketChannel& socket, ByteBuffer& reply) {
  while (true) {
    std::error_code ec;
    std::int64_t n = 0;
    n = co_await socket.read(reply, ec);
    ByteBuffer so_far = reply.duplicate();
    so_far.flip();
    const auto bytes = so_far.bytes();
    if (ec || n <= 0 || bytes.size() >= reply_length(bytes) || !reply.has_remaining()) {
      co_return Outcome{ec, "waiting for the receiver's verdict"};
    }
  }
}

Task<int> send(EventLoop& loop, SendPlan plan, SocketAddress to) {
  ProgressReporter progress(plan.size);
  auto fail = [&](std::error_code ec, const std::string& what) {
    progress.abandon();
    std::cerr << "niox-transfer: " << what << ": " << ec.message() << "\n";
    return exit_failed;
  };
  auto socket = AsynchronousSocketChannel::open(
      loop, to.family() == AF_INET6 ? ProtocolFamily::inet6 : ProtocolFamily::inet);
  std::error_code ec;
  co_await socket.connect(to, ec);
  if (ec) {
    co_return fail(ec, "cannot connect to " + to.to_string());
  }
  co_await socket.write(plan.header_bytes, ec);
  if (ec) {
    co_return fail(ec, "sending the header");
  }
  auto file = AsynchronousFileChannel::adopt(loop, duplicate(plan.fd.get()));

  // The verdict is awaited while the body is still being sent: a receiver that gives up early
  // (a refused name, a full disk) answers at once, and the sending stops.
  ByteBuffer reply = ByteBuffer::allocate(reply_size + 2 + max_reason_length);
  std::vector<Task<Outcome>> halves;
  halves.push_back(send_body(plan, file, socket, progress));
  halves.push_back(read_reply(socket, reply));
  std::pair<std::size_t, Outcome> first;
  first = co_await when_any(std::move(halves));
  Outcome body;
  Outcome verdict = first.second;
  if (first.first == 0) {
    body = first.second;
    if (body.ec && !connection_broken(body.ec)) {
      co_return fail(body.ec, body.doing);  // our side failed: no verdict will come
    }
    // Sent (or cut off by the receiver, which may still have said why): the verdict.
    verdict = co_await read_reply(socket, reply);
  }
  reply.flip();
  const auto bytes = reply.bytes();
  if (bytes.size() < reply_size) {
    // No verdict: the receiver went away. Say what broke first.
    if (body.ec) {
      co_return fail(body.ec, body.doing);
    }
    co_return fail(verdict.ec ? verdict.ec : make_error_code(TransferErrc::truncated),
                   verdict.doing);
  }
  // A verdict "stored" may overtake the completion of the last send, which when_any then
  // stopped: the receiver has verified every byte, trailer included.
  if (auto refused = check_reply(bytes)) {
    progress.abandon();
    const std::string reason = decode_reason(bytes);
    std::cerr << "niox-transfer: the receiver did not store the file: "
              << (reason.empty() ? refused.message() : reason) << "\n";
    co_return exit_failed;
  }
  co_return exit_ok;
}

int run_send(const TransferOptions& o) {
  std::error_code ec;
  auto plan = prepare_send(o.file, ec, {}, ChecksumPlacement::trailer);
  if (ec == std::errc::is_a_directory) {
    die("cannot send '" + o.file + "': it is a directory (niox-transfer sends one regular file)");
  }
  if (ec == std::errc::invalid_argument) {
    die("cannot send '" + o.file + "': not a regular file (a device, FIFO or socket)");
  }
  if (ec) {
    die("cannot send '" + o.file + "': " + ec.message());
  }
  auto addresses = resolve(o.to);
  if (addresses.empty()) {
    die("cannot resolve '" + o.to.host + "': no address");
  }
  // Only the first address is tried: a sender that retried could send twice.
  SocketAddress to = addresses.front();
  EventLoop loop(loop_options(o.backend));
  return run_on(loop, send(loop, std::move(plan), std::move(to)));
}

// ---- recv -------------------------------------------------------------------------------

// 0 (never) or how long the receiver waits for the sender.
struct ReceiverTimeouts {
  std::chrono::nanoseconds header{0};  // from the connection to a complete header
  std::chrono::nanoseconds idle{0};    // without a byte arriving, once the header is in
};

// One transfer's receiving end on `loop`: run() accepts the sender, reads the header within the
// header timeout, moves the body from the socket into the file (each piece within the idle
// timeout), reads the checksum, verifies and replies. Whenever it refuses or gives up, it tells
// the sender why.
class Receiver {
 public:
  Receiver(EventLoop& loop, TransferReceiver& rx, ReceiverTimeouts timeouts, std::uint64_t max_size)
      : loop_(loop), rx_(rx), timeouts_(timeouts), max_size_(max_size) {}

  // The exit status. `server` is borrowed until the task ends.
  Task<int> run(AsynchronousServerSocketChannel& server) {
    using Phase = TransferReceiver::Phase;
    std::error_code ec;
    std::optional<AsynchronousSocketChannel> accepted;
    accepted = co_await server.accept(ec);
    if (ec) {
      co_return report(exit_failed, "accept: " + ec.message());
    }
    socket_ = &*accepted;

    // The header, from the connection on within --header-timeout. Body bytes that came with it
    // stay in `in`.
    ByteBuffer in = ByteBuffer::allocate(4096);
    std::optional<std::error_code> header;
    header = co_await within(loop_, timeouts_.header, read_header(in));
    if (!header) {
      co_return co_await give_up(
          TransferStatus::timed_out, exit_header_timeout,
          "timed out after " + seconds(timeouts_.header) + " waiting for the header (" +
              std::to_string(rx_.header_bytes_received()) + " bytes arrived)");
    }
    if (rx_.phase() == Phase::failed) {
      co_return co_await give_up(TransferStatus::refused, exit_failed,
                                 "refused the header: " + header_problem(*header));
    }
    if (*header) {
      co_return sender_gone("reading the header", *header);
    }

    progress_.emplace(rx_.header().size);
    if (auto e = rx_.reserve_body()) {
      co_return co_await refuse_reservation(e);
    }
    if (auto e = rx_.on_body_bytes(in)) {
      co_return co_await give_up(TransferStatus::write_failed,
                                 no_room(e) ? exit_no_room : exit_failed,
                                 "writing the file: " + e.message());
    }
    rx_.on_trailer_bytes(in);

    // The body, a chunk at a time straight from the socket into the file at the body offset.
    auto file = AsynchronousFileChannel::adopt(loop_, duplicate(rx_.fd()));
    while (rx_.body_remaining() > 0) {
      progress_->update(rx_.body_offset());
      if (auto e = rx_.reserve_body()) {
        co_return co_await refuse_reservation(e);
      }
      std::optional<Chunk> got;
      got = co_await within(loop_, timeouts_.idle, receive_chunk_into(file));
      if (!got) {
        co_return co_await time_out_idle();
      }
      rx_.on_body_spliced(got->bytes);
      if (got->end_of_input || connection_broke(got->ec)) {
        co_return sender_gone("the sender stopped after " + std::to_string(rx_.body_offset()) +
                                  " of " + std::to_string(rx_.header().size) + " bytes",
                              got->ec);
      }
      if (got->ec) {
        co_return co_await give_up(TransferStatus::write_failed,
                                   no_room(got->ec) ? exit_no_room : exit_failed,
                                   "writing the file: " + got->ec.message());
      }
      // Hash what landed while it is still in the CPU's cache, so that little or nothing is
      // left to verify once the body is complete (each hash maps).
      if (rx_.body_offset() - rx_.bytes_hashed() >= receive_chunk) {
        rx_.hash_received(SIZE_MAX, ec);
        if (ec) {
          co_return co_await give_up(TransferStatus::write_failed, exit_failed,
                                     "reading back the file: " + ec.message());
        }
      }
    }
    progress_->update(rx_.body_offset());

    // The checksum trailer (flag_checksum_trailer) after the body.
    while (rx_.phase() == Phase::trailer) {
      std::optional<std::error_code> trailer;
      trailer = co_await within(loop_, timeouts_.idle, read_trailer());
      if (!trailer) {
        co_return co_await time_out_idle();
      }
      if (*trailer) {
        co_return sender_gone("reading the checksum after the body", *trailer);
      }
    }

    progress_->finish();
    TransferStatus status = rx_.finish(ec);
    if (status != TransferStatus::ok) {
      if (!ec) ec = make_error_code(TransferErrc::receiver_failed);
      co_return co_await give_up(status, no_room(ec) ? exit_no_room : exit_failed, ec.message(),
                                 "the file was not stored");
    }
    co_await reply(status, {});
    std::cerr << "niox-transfer: received " << rx_.path() << " (" << rx_.header().size
              << " bytes, checksum verified)\n";
    co_return exit_ok;
  }

 private:
  // How one body chunk ended.
  struct Chunk {
    std::uint64_t bytes = 0;  // stored at the body offset
    bool end_of_input = false;
    std::error_code ec;
  };

  // Header bytes into rx_ until the header is complete: then nothing, or, if rx_ refused it
  // (phase failed), why. Otherwise why the stream ended. A stop (the header timeout) escapes as
  // operation_aborted.
  Task<std::error_code> read_header(ByteBuffer& in) {
    while (rx_.phase() == TransferReceiver::Phase::header) {
      in.clear();
      std::error_code ec;
      std::int64_t n = 0;
      n = co_await socket_->read(in, ec);
      if (ec == operation_aborted()) {
        throw std::system_error(ec, "reading the header");
      }
      if (ec || n <= 0) {
        co_return ec ? ec : make_error_code(TransferErrc::truncated);
      }
      in.flip();
      if (auto e = rx_.on_header_bytes(in)) {
        co_return e;
      }
    }
    co_return std::error_code{};
  }

  // Up to receive_chunk bytes of the body from the socket into `file` at the body offset
  // (splice). A chunk completes only once all of it is stored; stopped by the idle timeout it
  // ends with what arrived so far: some bytes count as the sender being alive (the idle time
  // starts afresh with the next chunk), none escape as operation_aborted (timed out).
  Task<Chunk> receive_chunk_into(AsynchronousFileChannel& file) {
    const std::uint64_t want = std::min<std::uint64_t>(receive_chunk, rx_.body_remaining());
    std::error_code ec;
    TransferResult r;
    r = co_await file.transfer_from(*socket_, rx_.body_offset(), want, ec);
    if (ec == operation_aborted()) {
      if (r.bytes == 0) {
        throw std::system_error(ec, "receiving the body");
      }
      ec.clear();
    }
    co_return Chunk{r.bytes, r.end_of_input, ec};
  }

  // One read of what is missing of the checksum trailer into rx_: nothing, or why the stream
  // ended. A stop (the idle timeout) escapes as operation_aborted.
  Task<std::error_code> read_trailer() {
    ByteBuffer b = ByteBuffer::allocate(rx_.trailer_missing());
    std::error_code ec;
    std::int64_t n = 0;
    n = co_await socket_->read(b, ec);
    if (ec == operation_aborted()) {
      throw std::system_error(ec, "reading the checksum");
    }
    if (ec || n <= 0) {
      co_return ec ? ec : make_error_code(TransferErrc::truncated);
    }
    b.flip();
    rx_.on_trailer_bytes(b);
    co_return std::error_code{};
  }

  // The stream ended (no ec) or broke while the receiver was `doing` something: the transfer
  // is over without a file, and nobody is left to tell.
  int sender_gone(const std::string& doing, std::error_code ec) {
    rx_.abort();
    return report(exit_failed,
                  doing + ": " + (ec ? ec : make_error_code(TransferErrc::truncated)).message());
  }

  // What ends a transfer_from on the socket's side rather than the file's.
  static bool connection_broke(std::error_code ec) {
    return ec == std::errc::connection_reset || ec == std::errc::connection_aborted ||
           ec == std::errc::broken_pipe || ec == std::errc::not_connected ||
           ec == std::errc::timed_out || ec == std::errc::host_unreachable ||
           ec == std::errc::network_unreachable || ec == std::errc::network_reset;
  }

  // Why a header was refused, in the words the sender's user sees too.
  std::string header_problem(std::error_code e) const {
    if (e == TransferErrc::file_too_large) {
      return "the file (" + std::to_string(rx_.header().size) +
             " bytes) is larger than the receiver accepts (--max-size " +
             std::to_string(max_size_) + ")";
    }
    return e.message();
  }

  Task<int> refuse_reservation(std::error_code e) {
    const std::uint64_t size = rx_.header().size;
    if (e == TransferErrc::no_space) {
      co_return co_await give_up(TransferStatus::write_failed, exit_no_room,
                                 "not enough space for " + std::to_string(size) + " bytes (" +
                                     format_bytes(size) + "): the receiver's file system has " +
                                     format_bytes(rx_.available_space()) + " free");
    }
    std::string where =
        rx_.body_offset() == 0 ? "" : " (after " + std::to_string(rx_.body_offset()) + " arrived)";
    co_return co_await give_up(
        TransferStatus::write_failed, no_room(e) ? exit_no_room : exit_failed,
        "no room for " + std::to_string(size) + " bytes" + where + ": " + e.message());
  }

  Task<int> time_out_idle() {
    const std::string after = rx_.phase() == TransferReceiver::Phase::trailer
                                  ? "the body, waiting for its checksum"
                                  : std::to_string(rx_.body_offset()) + " of " +
                                        std::to_string(rx_.header().size) + " bytes";
    co_return co_await give_up(
        TransferStatus::timed_out, exit_idle_timeout,
        "timed out: nothing arrived for " + seconds(timeouts_.idle) + " after " + after);
  }

  static std::string seconds(std::chrono::nanoseconds d) {
    return fmt::format("{:g} s", std::chrono::duration<double>(d).count());
  }

  // The transfer is over without a file: removes what was written, says why (here, and to the
  // sender, with `status`), and returns `exit_status`. `context` prefixes only the local line.
  Task<int> give_up(TransferStatus status, int exit_status, std::string reason,
                    std::string context = {}) {
    rx_.abort();
    report(exit_status, context.empty() ? reason : context + ": " + reason);
    co_await reply(status, reason);
    co_return exit_status;
  }

  // Sends the verdict (and, when it is not ok, the reason). A refusal is followed by a lingering
  // close: the sender may still be sending, and closing with its bytes unread would reset the
  // connection, possibly before the sender read the verdict. So: shut our side down (FIN after
  // the verdict), then read and drop what still arrives until the sender closes or linger_time
  // passes.
  Task<void> reply(TransferStatus status, std::string reason) {
    ByteBuffer verdict = encode_reply(status, reason);
    std::error_code ec;
    co_await socket_->write(verdict, ec);
    if (ec || status == TransferStatus::ok) {
      co_return;
    }
    try {
      socket_->shutdown_output();
    } catch (const std::system_error&) {
      co_return;  // the sender is gone already
    }
    co_await within(loop_, linger_time, drain());
  }

  // Reads and drops until the stream ends: the bytes dropped. A stop escapes as
  // operation_aborted.
  Task<std::uint64_t> drain() {
    ByteBuffer buf = ByteBuffer::allocate(64 * 1024);
    std::uint64_t dropped = 0;
    while (true) {
      buf.clear();
      std::error_code ec;
      std::int64_t n = 0;
      n = co_await socket_->read(buf, ec);
      if (ec == operation_aborted()) {
        throw std::system_error(ec, "draining");
      }
      if (ec || n <= 0) {
        co_return dropped;
      }
      dropped += static_cast<std::uint64_t>(n);
    }
  }

  // Prints `what` (the progress line cleared first) and returns `exit_status`.
  int report(int exit_status, const std::string& what) {
    if (progress_) progress_->abandon();
    std::cerr << "niox-transfer: " << what << "\n";
    return exit_status;
  }

  EventLoop& loop_;
  TransferReceiver& rx_;
  ReceiverTimeouts timeouts_;
  std::uint64_t max_size_;
  AsynchronousSocketChannel* socket_ = nullptr;  // the sender's connection, owned by run()
  std::optional<ProgressReporter> progress_;
};

int run_recv(const TransferOptions& o) {
  if (auto problem = OutputFile::destination_problem(o.out); !problem.empty()) {
    die("--out '" + o.out + "': " + problem, exit_usage);
  }
  SocketAddress where;
  try {
    where = InetSocketAddress(o.bind, o.port);
  } catch (const std::exception& e) {
    die("bad --bind address '" + o.bind + "': " + e.what(), exit_usage);
  }
  TransferLimits limits;
  limits.max_file_size = o.max_size;
  TransferReceiver rx(o.out, limits);
  EventLoop loop(loop_options(o.backend));
  std::optional<AsynchronousServerSocketChannel> server;
  try {
    server = AsynchronousServerSocketChannel::open(
        loop, where.family() == AF_INET6 ? ProtocolFamily::inet6 : ProtocolFamily::inet);
    server->bind(where, 4);
  } catch (const std::system_error& e) {
    die("cannot listen on " + where.to_string() + ": " + e.code().message());
  }
  std::cout << "niox-transfer listening on " << server->local_address()->to_string() << std::endl;
  ReceiverTimeouts timeouts;
  timeouts.header = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double>(o.header_timeout_seconds));
  timeouts.idle = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double>(o.idle_timeout_seconds));
  Receiver r(loop, rx, timeouts, o.max_size);
  return run_on(loop, r.run(*server));
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string_view> args(argv + 1, argv + argc);
  std::string error;
  auto parsed = parse_transfer_args(args, error);
  if (!parsed) {
    std::cerr << "niox-transfer: " << error << "\n\n" << transfer_usage();
    return 2;
  }
  if (parsed->help) {
    std::cout << transfer_usage();
    return 0;
  }
  std::signal(SIGPIPE, SIG_IGN);
  // Past RLIMIT_FSIZE a write must fail with EFBIG (and the transfer be refused), not kill us.
  std::signal(SIGXFSZ, SIG_IGN);
  try {
    return parsed->mode == TransferOptions::Mode::send ? run_send(*parsed) : run_recv(*parsed);
  } catch (const std::exception& e) {
    std::cerr << "niox-transfer: " << e.what() << "\n";
    return 1;
  }
}
