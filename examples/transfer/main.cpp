// niox-transfer: one file over TCP, verified end to end. See --help.
//
//   niox-transfer recv --port P --out PATH     accepts one transfer, stores it, exits
//   niox-transfer send FILE --to HOST:PORT     sends FILE, exits once the receiver verified it
//
// Zero-copy at both ends, all on one niox EventLoop: the sender's body leaves by
// EventLoop::transfer_to (sendfile); the receiver's arrives by EventLoop::transfer_from (socket →
// the loop's pipe → file at the body's offset, splice), so no body byte is copied through user
// space. The protocol (header, checksum, naming the file only once verified) is
// TransferReceiver's and prepare_send()'s.
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

#include <niox/channels/socket_address.hpp>
#include <niox/loop/event_loop.hpp>

#include <fmt/format.h>

#include <chrono>
#include <csignal>
#include <functional>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
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

// ---- send -------------------------------------------------------------------------------

class Sender {
 public:
  Sender(EventLoop& loop, SendPlan plan, SocketAddress to)
      : loop_(loop), plan_(std::move(plan)), to_(std::move(to)), progress_(plan_.size) {}

  int run() {
    fd_.reset(::socket(to_.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd_) {
      return fail(std::error_code(errno, std::system_category()), "socket");
    }
    loop_.connect(fd_.get(), to_, [this](std::error_code ec) {
      if (finished_) return;
      if (ec) {
        finish(fail(ec, "cannot connect to " + to_.to_string()));
        return;
      }
      loop_.write(
          fd_.get(), std::move(plan_.header_bytes),
          [this](std::error_code ec, std::size_t, ByteBuffer) {
            if (finished_) return;
            if (ec) {
              finish(fail(ec, "sending the header"));
              return;
            }
            // The verdict is awaited while the body is still being sent: a receiver that gives up
            // early (a refused name, a full disk) answers at once, and the sender stops sending.
            await_reply(ByteBuffer::allocate(reply_size + 2 + max_reason_length));
            send_body();
          });
    });
    loop_.run();
    // Whatever is still pending ends here (operation_aborted), while this object is alive.
    loop_.close(std::move(fd_));
    loop_.shutdown();
    return status_;
  }

 private:
  // Each chunk is hashed (through FileHasher's mapping) just before it leaves by sendfile: no
  // pass over the file before the first byte is sent, and a file that was not cached is read
  // in by the hash, so the send finds it in memory.
  void send_body() {
    if (sent_ == plan_.size) {
      progress_.finish();
      loop_.write(fd_.get(), plan_.trailer(), [this](std::error_code ec, std::size_t, ByteBuffer) {
        if (finished_) return;
        if (ec) {
          body_error_ = ec;
        } else {
          body_done_ = true;
        }
        decide();
      });
      return;
    }
    std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(chunk, plan_.size - sent_));
    if (auto ec = plan_.hash_chunk(sent_, n)) {
      finish(fail(ec, "reading the file"));
      return;
    }
    loop_.transfer_to(plan_.fd.get(), static_cast<std::int64_t>(sent_), n, fd_.get(),
                      [this](std::error_code ec, std::size_t done, TransferPath) {
                        if (finished_) return;
                        sent_ += done;
                        if (ec) {
                          body_error_ = ec;
                          decide();
                          return;
                        }
                        progress_.update(sent_);
                        send_body();
                      });
  }

  // Reads the verdict and, after one that is not ok, the receiver's reason; the end of the
  // connection before the reason (a receiver that predates it) leaves the reason empty.
  void await_reply(ByteBuffer buf) {
    loop_.read(fd_.get(), std::move(buf), [this](std::error_code ec, std::size_t n, ByteBuffer b) {
      if (finished_) return;
      ByteBuffer so_far = b.duplicate();
      so_far.flip();
      const auto bytes = so_far.bytes();
      if (!ec && n > 0 && bytes.size() < reply_length(bytes) && b.has_remaining()) {
        await_reply(std::move(b));
        return;
      }
      reply_done_ = true;
      if (bytes.size() < reply_size) {
        reply_error_ = ec ? ec : make_error_code(TransferErrc::truncated);
      } else {
        verdict_ = check_reply(bytes);
        reason_ = decode_reason(bytes);
      }
      decide();
    });
  }

  // Called whenever the body or the reply made progress: finishes once the outcome is known.
  void decide() {
    if (finished_) return;
    const bool connection_broken =
        body_error_ == std::errc::broken_pipe || body_error_ == std::errc::connection_reset;
    if (body_error_ && !connection_broken) {
      // Our side failed (the file could not be read, or it shrank): no verdict will come.
      finish(fail(body_error_, "sending the body"));
      return;
    }
    if (!reply_done_) {
      return;  // the verdict (or the end of the connection) is still to come
    }
    if (reply_error_) {
      // No verdict: the receiver went away. Say what broke first.
      finish(body_error_ ? fail(body_error_, "sending the body")
                         : fail(reply_error_, "waiting for the receiver's verdict"));
      return;
    }
    if (verdict_) {
      progress_.abandon();
      std::cerr << "niox-transfer: the receiver did not store the file: "
                << (reason_.empty() ? verdict_.message() : reason_) << "\n";
      finish(1);
      return;
    }
    if (!body_done_) {
      if (body_error_) {
        finish(fail(body_error_, "sending the body"));
      }
      // A verdict "stored" can overtake the completion of the last send: wait for it.
      return;
    }
    finish(0);
  }

  int fail(std::error_code ec, const std::string& what) {
    progress_.abandon();
    std::cerr << "niox-transfer: " << what << ": " << ec.message() << "\n";
    return 1;
  }

  void finish(int status) {
    finished_ = true;
    status_ = status;
    loop_.stop();
  }

  EventLoop& loop_;
  SendPlan plan_;
  SocketAddress to_;
  ProgressReporter progress_;
  FileDescriptor fd_;  // the connection; closed through loop_ when run() ends
  std::uint64_t sent_ = 0;
  bool body_done_ = false;
  std::error_code body_error_;
  bool reply_done_ = false;
  std::error_code reply_error_;  // the connection ended without a verdict
  std::error_code verdict_;      // the receiver's verdict (empty: stored and verified)
  std::string reason_;           // the receiver's reason for a verdict other than ok
  bool finished_ = false;
  int status_ = 1;
};

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
  EventLoop loop(loop_options(o.backend));
  int status = 1;
  for (std::size_t i = 0; i < addresses.size(); ++i) {
    // Only the first address is tried: a sender that retried could send twice.
    Sender s(loop, std::move(plan), addresses[i]);
    status = s.run();
    break;
  }
  return status;
}

// ---- recv -------------------------------------------------------------------------------

// 0 (never) or how long the receiver waits for the sender.
struct ReceiverTimeouts {
  std::chrono::nanoseconds header{0};  // from the connection to a complete header
  std::chrono::nanoseconds idle{0};    // without a byte arriving, once the header is in
};

class Receiver {
 public:
  using Clock = std::chrono::steady_clock;

  // Owns `listen_fd` and closes it through `loop` when run() returns.
  Receiver(EventLoop& loop, FileDescriptor listen_fd, TransferReceiver& rx,
           ReceiverTimeouts timeouts, std::uint64_t max_size)
      : loop_(loop),
        listen_fd_(std::move(listen_fd)),
        rx_(rx),
        timeouts_(timeouts),
        max_size_(max_size) {}

  int run() {
    loop_.accept(listen_fd_.get(), [this](std::error_code ec, FileDescriptor fd) {
      if (ending_) return;
      if (ec) {
        finish(report(exit_failed, "accept: " + ec.message()));
        return;
      }
      fd_ = std::move(fd);
      start_header_timer();
      read_header();
    });
    loop_.run();
    if (fd_) loop_.close(std::move(fd_));
    loop_.close(std::move(listen_fd_));
    // Whatever is still pending ends here (operation_aborted), while this object is alive.
    loop_.shutdown();
    return status_;
  }

 private:
  void read_header() {
    waiting_for_sender(loop_.read(
        fd_.get(), ByteBuffer::allocate(4096),
        [this](std::error_code ec, std::size_t n, ByteBuffer b) {
          sender_answered();
          if (ending_) return;
          if (ec || n == 0) {
            sender_gone("reading the header", ec);
            return;
          }
          b.flip();
          if (auto e = rx_.on_header_bytes(b)) {
            give_up(TransferStatus::refused, exit_failed,
                    "refused the header: " + header_problem(e));
            return;
          }
          if (rx_.phase() == TransferReceiver::Phase::header) {
            read_header();
            return;
          }
          stop_timer();  // the header's
          progress_ = std::make_unique<ProgressReporter>(rx_.header().size);
          if (auto e = rx_.reserve_body()) {
            refuse_reservation(e);
            return;
          }
          if (auto e = rx_.on_body_bytes(b)) {
            give_up(TransferStatus::write_failed, no_room(e) ? exit_no_room : exit_failed,
                    "writing the file: " + e.message());
            return;
          }
          rx_.on_trailer_bytes(b);
          start_idle_timer();
          receive_body();
        }));
  }

  // A chunk at a time straight from the socket into the file at the body offset, until the body
  // is complete.
  void receive_body() {
    progress_->update(rx_.body_offset());
    if (rx_.body_remaining() == 0) {
      if (rx_.phase() == TransferReceiver::Phase::trailer) {
        read_trailer();
      } else {
        verify();
      }
      return;
    }
    if (auto e = rx_.reserve_body()) {
      refuse_reservation(e);
      return;
    }
    std::size_t want =
        static_cast<std::size_t>(std::min<std::uint64_t>(receive_chunk, rx_.body_remaining()));
    waiting_for_sender(loop_.transfer_from(
        fd_.get(), rx_.fd(), static_cast<std::int64_t>(rx_.body_offset()), want,
        [this](std::error_code ec, std::size_t n, TransferPath) {
          sender_answered();
          if (ending_) return;
          rx_.on_body_spliced(n);
          if (std::exchange(probing_, false) && ec == operation_aborted()) {
            // Stopped by the idle timer to see whether anything arrived during the chunk.
            if (n == 0) {
              time_out_idle();
              return;
            }
            arm_idle(timeouts_.idle);
            ec.clear();
          }
          if (ec == LoopError::end_of_file || connection_broke(ec)) {
            sender_gone("the sender stopped after " + std::to_string(rx_.body_offset()) + " of " +
                            std::to_string(rx_.header().size) + " bytes",
                        ec == LoopError::end_of_file ? std::error_code() : ec);
            return;
          }
          if (ec) {
            give_up(TransferStatus::write_failed, no_room(ec) ? exit_no_room : exit_failed,
                    "writing the file: " + ec.message());
            return;
          }
          // Hash what landed while it is still in the CPU's cache, so that little or nothing is
          // left to verify once the body is complete (each hash maps).
          if (rx_.body_offset() - rx_.bytes_hashed() >= receive_chunk) {
            std::error_code hash_ec;
            rx_.hash_received(SIZE_MAX, hash_ec);
            if (hash_ec) {
              give_up(TransferStatus::write_failed, exit_failed,
                      "reading back the file: " + hash_ec.message());
              return;
            }
          }
          receive_body();
        }));
  }

  // The stream ended (no ec) or broke while the receiver was `doing` something: the transfer
  // is over without a file, and nobody is left to tell.
  void sender_gone(const std::string& doing, std::error_code ec) {
    rx_.abort();
    finish(report(exit_failed,
                  doing + ": " + (ec ? ec : make_error_code(TransferErrc::truncated)).message()));
  }

  // What ends a transfer_from on the socket's side rather than the file's.
  static bool connection_broke(std::error_code ec) {
    return ec == std::errc::connection_reset || ec == std::errc::connection_aborted ||
           ec == std::errc::broken_pipe || ec == std::errc::not_connected ||
           ec == std::errc::timed_out || ec == std::errc::host_unreachable ||
           ec == std::errc::network_unreachable || ec == std::errc::network_reset;
  }

  // The checksum trailer (flag_checksum_trailer) after the body.
  void read_trailer() {
    waiting_for_sender(loop_.read(fd_.get(), ByteBuffer::allocate(rx_.trailer_missing()),
                                  [this](std::error_code ec, std::size_t n, ByteBuffer b) {
                                    sender_answered();
                                    if (ending_) return;
                                    if (ec || n == 0) {
                                      sender_gone("reading the checksum after the body", ec);
                                      return;
                                    }
                                    b.flip();
                                    rx_.on_trailer_bytes(b);
                                    if (rx_.phase() == TransferReceiver::Phase::trailer) {
                                      read_trailer();
                                    } else {
                                      verify();
                                    }
                                  }));
  }

  void verify() {
    stop_timer();
    progress_->finish();
    std::error_code ec;
    TransferStatus status = rx_.finish(ec);
    if (status != TransferStatus::ok) {
      if (!ec) ec = make_error_code(TransferErrc::receiver_failed);
      give_up(status, no_room(ec) ? exit_no_room : exit_failed, ec.message(),
              "the file was not stored");
      return;
    }
    ending_ = true;
    reply(status, {}, [this] {
      std::cerr << "niox-transfer: received " << rx_.path() << " (" << rx_.header().size
                << " bytes, checksum verified)\n";
      finish(exit_ok);
    });
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

  void refuse_reservation(std::error_code e) {
    const std::uint64_t size = rx_.header().size;
    if (e == TransferErrc::no_space) {
      give_up(TransferStatus::write_failed, exit_no_room,
              "not enough space for " + std::to_string(size) + " bytes (" + format_bytes(size) +
                  "): the receiver's file system has " + format_bytes(rx_.available_space()) +
                  " free");
      return;
    }
    std::string where =
        rx_.body_offset() == 0 ? "" : " (after " + std::to_string(rx_.body_offset()) + " arrived)";
    give_up(TransferStatus::write_failed, no_room(e) ? exit_no_room : exit_failed,
            "no room for " + std::to_string(size) + " bytes" + where + ": " + e.message());
  }

  // The transfer is over without a file: removes what was written, says why (here, and to the
  // sender, with `status`), then exits with `exit_status`. `context` prefixes only the local line.
  void give_up(TransferStatus status, int exit_status, const std::string& reason,
               const std::string& context = {}) {
    ending_ = true;
    stop_timer();
    rx_.abort();
    report(exit_status, context.empty() ? reason : context + ": " + reason);
    reply(status, reason, [this, exit_status] { finish(exit_status); });
  }

  // ---- timeouts ----
  // The header timer runs from the connection until the header is complete; then the idle
  // timer, which counts only while the receiver waits for the sender (a read or a body chunk
  // from the socket in flight), not while it hashes. A body chunk completes only once all of it
  // is stored: when the idle time has passed during one, the timer stops it to learn whether
  // anything arrived, and the idle time counts afresh if so.

  void waiting_for_sender(OperationHandle op) {
    sender_op_ = op;
    waiting_ = true;
    waiting_since_ = Clock::now();
  }
  void sender_answered() { waiting_ = false; }

  void start_header_timer() {
    if (timeouts_.header.count() <= 0) return;
    timer_ = loop_.schedule(timeouts_.header, [this] {
      if (ending_ || rx_.phase() != TransferReceiver::Phase::header) return;
      time_out(exit_header_timeout,
               "timed out after " + seconds(timeouts_.header) + " waiting for the header (" +
                   std::to_string(rx_.header_bytes_received()) + " bytes arrived)");
    });
  }

  void start_idle_timer() {
    if (timeouts_.idle.count() <= 0) return;
    idle_active_ = true;
    arm_idle(timeouts_.idle);
  }

  void arm_idle(std::chrono::nanoseconds delay) {
    timer_ = loop_.schedule(delay, [this] {
      if (ending_ || !idle_active_) return;
      if (!waiting_) {
        arm_idle(timeouts_.idle);
        return;
      }
      const auto waited = Clock::now() - waiting_since_;
      if (waited < timeouts_.idle) {
        arm_idle(timeouts_.idle - waited);
        return;
      }
      if (rx_.phase() == TransferReceiver::Phase::body) {
        // The wait is a body chunk (the only one in the body phase), which completes only once
        // all of it is stored: stop it, and its handler decides; if it has finished already, it
        // goes on and so does the timer.
        probing_ = loop_.cancel(sender_op_);
        if (!probing_) arm_idle(timeouts_.idle);
        return;
      }
      time_out_idle();
    });
  }

  void time_out_idle() {
    const std::string after = rx_.phase() == TransferReceiver::Phase::trailer
                                  ? "the body, waiting for its checksum"
                                  : std::to_string(rx_.body_offset()) + " of " +
                                        std::to_string(rx_.header().size) + " bytes";
    time_out(exit_idle_timeout,
             "timed out: nothing arrived for " + seconds(timeouts_.idle) + " after " + after);
  }

  void stop_timer() {
    idle_active_ = false;
    timer_.cancel();
  }

  void time_out(int exit_status, const std::string& reason) {
    if (waiting_) {
      loop_.cancel(sender_op_);  // its handler runs later and sees ending_
      waiting_ = false;
    }
    give_up(TransferStatus::timed_out, exit_status, reason);
  }

  static std::string seconds(std::chrono::nanoseconds d) {
    return fmt::format("{:g} s", std::chrono::duration<double>(d).count());
  }

  // Sends the verdict (and, when it is not ok, the reason). A refusal is followed by a lingering
  // close: the sender may still be sending, and closing with its bytes unread would reset the
  // connection, possibly before the sender read the verdict. So: shut our side down (FIN after
  // the verdict), read and drop what still arrives until the sender closes or linger_time
  // passes, then `then`.
  template <class F>
  void reply(TransferStatus status, const std::string& reason, F then) {
    loop_.write(fd_.get(), encode_reply(status, reason),
                [this, status, then](std::error_code ec, std::size_t, ByteBuffer) {
                  if (stopped_) return;
                  if (ec || status == TransferStatus::ok) {
                    then();
                    return;
                  }
                  ::shutdown(fd_.get(), SHUT_WR);
                  lingering_ = true;
                  after_linger_ = then;
                  linger_timer_ = loop_.schedule(linger_time, [this] { end_linger(); });
                  drain(ByteBuffer::allocate(64 * 1024));
                });
  }

  void drain(ByteBuffer buf) {
    drain_op_ = loop_.read(fd_.get(), std::move(buf),
                           [this](std::error_code ec, std::size_t n, ByteBuffer b) {
                             if (!lingering_) return;
                             if (ec || n == 0) {
                               end_linger();
                               return;
                             }
                             b.clear();
                             drain(std::move(b));
                           });
  }

  void end_linger() {
    if (!lingering_) return;
    lingering_ = false;
    linger_timer_.cancel();
    loop_.cancel(drain_op_);
    after_linger_();
  }

  // Prints `what` (the progress line cleared first) and returns `exit_status`.
  int report(int exit_status, const std::string& what) {
    if (progress_) progress_->abandon();
    std::cerr << "niox-transfer: " << what << "\n";
    return exit_status;
  }

  void finish(int status) {
    ending_ = true;
    stopped_ = true;
    status_ = status;
    loop_.stop();
  }

  EventLoop& loop_;
  // Owned here, all closed through loop_ when run() ends.
  FileDescriptor listen_fd_;
  TransferReceiver& rx_;
  ReceiverTimeouts timeouts_;
  std::uint64_t max_size_;
  std::unique_ptr<ProgressReporter> progress_;
  FileDescriptor fd_;  // the sender's connection
  int status_ = exit_failed;
  bool ending_ = false;    // the transfer is over (refused, failed or verified): its handlers stop
  bool stopped_ = false;   // the loop is stopping
  ScheduledFuture timer_;  // the header timer, then the idle timer
  bool idle_active_ = false;
  OperationHandle sender_op_;  // the read or body chunk from the socket in flight
  bool waiting_ = false;
  bool probing_ = false;  // the idle timer stopped it to see what arrived
  Clock::time_point waiting_since_{};
  bool lingering_ = false;
  std::function<void()> after_linger_;
  ScheduledFuture linger_timer_;
  OperationHandle drain_op_;
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
  sockaddr_storage native{};
  socklen_t native_len = where.to_native(native);
  FileDescriptor listener(::socket(where.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  const int lfd = listener.get();
  int one = 1;
  ::setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (lfd < 0 || ::bind(lfd, reinterpret_cast<sockaddr*>(&native), native_len) != 0 ||
      ::listen(lfd, 4) != 0) {
    die("cannot listen on " + where.to_string() + ": " +
        std::error_code(errno, std::system_category()).message());
  }
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  ::getsockname(lfd, reinterpret_cast<sockaddr*>(&ss), &len);
  auto bound = SocketAddress::from_sockaddr(reinterpret_cast<sockaddr*>(&ss), len);

  TransferLimits limits;
  limits.max_file_size = o.max_size;
  TransferReceiver rx(o.out, limits);
  EventLoop loop(loop_options(o.backend));
  std::cout << "niox-transfer listening on " << bound.to_string() << std::endl;
  ReceiverTimeouts timeouts;
  timeouts.header = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double>(o.header_timeout_seconds));
  timeouts.idle = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double>(o.idle_timeout_seconds));
  Receiver r(loop, std::move(listener), rx, timeouts, o.max_size);
  return r.run();
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
