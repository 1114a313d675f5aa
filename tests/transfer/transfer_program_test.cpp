// End to end: the real niox-transfer program at both ends (or a hand-made sender that breaks the
// rules), on each backend, over loopback.
#include <niox/base/file_descriptor.hpp>

#include "support/backends.hpp"
#include "support/blocking_sockets.hpp"
#include "support/child_process.hpp"
#include "temp_dir.hpp"
#include "transfer_protocol.hpp"
#include "checksum.hpp"

#include <arpa/inet.h>
#include <cerrno>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <thread>

namespace {

using niox::BackendKind;
using niox::test::ChildProcess;
using niox::test::send_all;
using niox::transfer::testing::TempDir;
namespace xfer = niox::transfer;

struct Case {
  BackendKind kind;
  const char* name;
  friend std::ostream& operator<<(std::ostream& os, const Case& c) { return os << c.name; }
};

std::string pattern(std::size_t n, unsigned seed) {
  std::string s(n, '\0');
  std::uint32_t x = seed * 2654435761u + 1;
  for (auto& c : s) {
    x = x * 1664525u + 1013904223u;
    c = static_cast<char>(x >> 24);
  }
  return s;
}

// A program whose stderr is a terminal (the slave side of a pseudo-terminal) and whose stdout is
// a pipe: what a user at a terminal sees on stderr, progress bar included.
class OnTerminal {
 public:
  explicit OnTerminal(const std::vector<std::string>& argv) {
    master_.reset(::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
    if (!master_ || ::grantpt(master_.get()) != 0 || ::unlockpt(master_.get()) != 0) {
      throw std::runtime_error("no pseudo-terminal");
    }
    niox::FileDescriptor slave(::open(::ptsname(master_.get()), O_RDWR | O_NOCTTY | O_CLOEXEC));
    int out[2];
    if (!slave || ::pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("no terminal or pipe");
    out_.reset(out[0]);
    niox::FileDescriptor out_w(out[1]);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, out_w.get(), 1);
    posix_spawn_file_actions_adddup2(&fa, slave.get(), 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    const int rc = ::posix_spawn(&pid_, args[0], &fa, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) throw std::runtime_error("posix_spawn failed");
  }
  ~OnTerminal() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  OnTerminal(const OnTerminal&) = delete;
  OnTerminal& operator=(const OnTerminal&) = delete;

  // The first line on stdout.
  std::string read_line() {
    std::string line;
    char c;
    while (::read(out_.get(), &c, 1) == 1 && c != '\n') line += c;
    return line;
  }
  // Waits for the exit; then everything the terminal showed. Progress is throttled to 10
  // redraws a second, far less than a terminal buffers, so the program never waits for us.
  int wait_exit(std::string& shown) {
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(master_.get(), buf, sizeof buf)) > 0) {
      shown.append(buf, static_cast<std::size_t>(n));  // EIO once drained: the slave is closed
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

 private:
  pid_t pid_ = -1;
  niox::FileDescriptor master_;
  niox::FileDescriptor out_;
};

// A connected loopback client socket (blocking, 5 s timeouts), or an invalid descriptor.
niox::FileDescriptor connect_to(std::uint16_t port) {
  niox::FileDescriptor fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{5, 0};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  if (niox::test::connect_blocking(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a, 5000) !=
      0) {
    return {};
  }
  return fd;
}

std::string header_for(const std::string& name, const std::string& body, std::uint64_t checksum) {
  xfer::TransferHeader h;
  h.name = name;
  h.size = body.size();
  h.algorithm = xfer::ChecksumAlgorithm::xxh64;  // what older senders send: still accepted
  h.checksum = checksum;
  auto b = xfer::encode_header(h);
  auto bytes = b.bytes();
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

// What a receiver answered on a raw connection, read until it shut its side down: the 8-byte
// reply and, after a refusal, the reason that follows it (a big-endian u16 length, then that many
// bytes of text; see transfer_protocol.hpp).
struct Answer {
  bool complete = false;  // a well-formed 8-byte reply arrived
  xfer::TransferStatus status{};
  std::string reason;
};

Answer read_answer(int fd) {
  timeval tv{20, 0};  // generous: the answers awaited here come within a second
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string raw;
  char buf[4096];
  while (true) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    raw.append(buf, static_cast<std::size_t>(n));
  }
  Answer a;
  if (raw.size() >= xfer::reply_size) {
    a.complete =
        !xfer::decode_reply(std::as_bytes(std::span(raw.data(), xfer::reply_size)), a.status);
  }
  if (raw.size() >= xfer::reply_size + 2) {
    const auto length = static_cast<std::size_t>(static_cast<unsigned char>(raw[8]) << 8 |
                                                 static_cast<unsigned char>(raw[9]));
    a.reason = raw.substr(xfer::reply_size + 2, length);
  }
  return a;
}

// The exit status of `p`, or nullopt if it still runs after a generous bound (it is then
// killed, so that reading its stderr cannot block).
std::optional<int> exit_status(ChildProcess& p) {
  if (auto rc = p.wait()) return rc;
  p.signal(SIGKILL);
  p.wait();
  return std::nullopt;
}

std::string as_string(const niox::ByteBuffer& b) {
  auto bytes = b.bytes();
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

// The /proc path of a descriptor through which `pid` holds a file in `dir`: the receiver's
// nameless O_TMPFILE shows there as "DIR/#INODE (deleted)" (a temporary name otherwise).
std::optional<std::string> open_file_in(pid_t pid, const std::string& dir) {
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/proc/" + std::to_string(pid) + "/fd", ec), end;
       !ec && it != end; it.increment(ec)) {
    std::error_code link_ec;
    auto target = std::filesystem::read_symlink(it->path(), link_ec);
    if (!link_ec && target.string().starts_with(dir + "/")) return it->path().string();
  }
  return std::nullopt;
}

std::uint64_t free_space(const std::string& dir) {
  struct statvfs v {};
  if (::statvfs(dir.c_str(), &v) != 0) return 0;
  return static_cast<std::uint64_t>(v.f_bavail) * v.f_frsize;
}

// The real receiver, started with the options a test gives (and --port 0 --bind 127.0.0.1).
class TransferProgramBase : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (auto why = niox::test::backend_skip_reason(GetParam().kind)) GTEST_SKIP() << *why;
  }

  void start_receiver(const std::vector<std::string>& options = {}) {
    std::vector<std::string> argv{
        NIOX_TRANSFER_PROGRAM, "recv",  "--port",   "0",         "--bind",
        "127.0.0.1",           "--out", out_.str(), "--backend", backend()};
    argv.insert(argv.end(), options.begin(), options.end());
    receiver_ = std::make_unique<ChildProcess>(argv);
    auto line = receiver_->read_line();
    ASSERT_TRUE(line) << "no start-up line; stderr: " << receiver_->read_stderr();
    auto colon = line->find("127.0.0.1:");
    ASSERT_NE(colon, std::string::npos) << *line;
    port_ = static_cast<std::uint16_t>(std::stoi(line->substr(colon + 10)));
  }

  std::unique_ptr<ChildProcess> sender(const std::string& file) {
    return std::make_unique<ChildProcess>(
        std::vector<std::string>{NIOX_TRANSFER_PROGRAM, "send", file, "--to",
                                 "127.0.0.1:" + std::to_string(port_), "--backend", backend()});
  }

  std::string backend() const { return std::string(niox::to_string(GetParam().kind)); }

  TempDir in_;
  TempDir out_;
  std::unique_ptr<ChildProcess> receiver_;
  std::uint16_t port_ = 0;
};

// The receiver with its default options, started before each test.
class TransferProgramTest : public TransferProgramBase {
 protected:
  void SetUp() override {
    TransferProgramBase::SetUp();
    if (IsSkipped()) return;
    ASSERT_NO_FATAL_FAILURE(start_receiver());
  }
};

// Each test starts the receiver with the options it is about.
class TransferReceiverOptionsTest : public TransferProgramBase {
 protected:
  // What the receiver did about the connection `fd`: its answer, exit status and stderr.
  struct Outcome {
    Answer answer;
    std::optional<int> rc;
    std::string said;
  };
  Outcome outcome_of(niox::FileDescriptor fd) {
    Outcome o{read_answer(fd.get()), std::nullopt, {}};
    fd.reset();
    o.rc = exit_status(*receiver_);
    o.said = receiver_->read_stderr();
    return o;
  }
  // The receiver answered `status`, exited with `rc`, said `message` and left nothing behind.
  void expect_refused(const Outcome& o, xfer::TransferStatus status, int rc,
                      std::string_view message) {
    ASSERT_TRUE(o.answer.complete) << "receiver: " << o.said;
    EXPECT_EQ(o.answer.status, status);
    EXPECT_EQ(o.rc, rc) << o.said;
    EXPECT_NE(o.said.find(message), std::string::npos) << o.said;
    EXPECT_TRUE(out_.list().empty());
  }
};

TEST_P(TransferProgramTest, VerifiedTransfer) {
  auto body = pattern(5 * 1024 * 1024 + 123, 1);
  in_.write("data.bin", body);
  auto s = sender(in_ / "data.bin");
  EXPECT_EQ(s->wait(), 0) << s->read_stderr();
  EXPECT_EQ(receiver_->wait(), 0) << receiver_->read_stderr();
  ASSERT_EQ(out_.list(), std::vector<std::string>{"data.bin"});
  EXPECT_TRUE(out_.read("data.bin") == body);
}

// The input read from disk during the transfer (written back and dropped from the page cache
// first): the sender reads it ahead of what it hashes and sends; every byte arrives verified.
TEST_P(TransferProgramTest, FileDroppedFromThePageCacheArrivesVerified) {
  auto body = pattern(9 * 1024 * 1024 + 321, 7);
  in_.write("cold.bin", body);
  {
    niox::FileDescriptor f(::open((in_ / "cold.bin").c_str(), O_RDONLY | O_CLOEXEC));
    ASSERT_TRUE(f.valid());
    ASSERT_EQ(::fdatasync(f.get()), 0);
    ASSERT_EQ(::posix_fadvise(f.get(), 0, 0, POSIX_FADV_DONTNEED), 0);
  }
  auto s = sender(in_ / "cold.bin");
  EXPECT_EQ(s->wait(), 0) << s->read_stderr();
  EXPECT_EQ(receiver_->wait(), 0) << receiver_->read_stderr();
  ASSERT_EQ(out_.list(), std::vector<std::string>{"cold.bin"});
  EXPECT_TRUE(out_.read("cold.bin") == body);
}

TEST_P(TransferProgramTest, SenderGoneMidBodyLeavesNothing) {
  auto body = pattern(4 * 1024 * 1024, 2);
  auto fd = connect_to(port_);
  ASSERT_TRUE(fd.valid());
  // A sender that dies after half the body: its socket closes, the receiver sees EOF early.
  EXPECT_TRUE(send_all(fd.get(), header_for("half.bin", body, niox::transfer::xxh64(body)) +
                                     body.substr(0, body.size() / 2)));
  fd.reset();
  EXPECT_EQ(receiver_->wait(), 1);
  EXPECT_NE(receiver_->read_stderr().find("stopped after"), std::string::npos);
  EXPECT_TRUE(out_.list().empty());
}

TEST_P(TransferProgramTest, RealSenderKilledMidBodyLeavesNothing) {
  auto body = pattern(64 * 1024 * 1024, 3);
  in_.write("big.bin", body);
  auto s = sender(in_ / "big.bin");
  // Killed at some point of its life (before, during or just after the body): whenever it is,
  // the receiver must not keep a file it could not verify, nor report success for it.
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  s->signal(SIGKILL);
  s->wait();
  auto rc = receiver_->wait();
  ASSERT_TRUE(rc);
  if (*rc == 0) {
    // The whole file got through and was verified before the kill.
    ASSERT_EQ(out_.list(), std::vector<std::string>{"big.bin"});
    EXPECT_TRUE(out_.read("big.bin") == body);
  } else {
    EXPECT_TRUE(out_.list().empty());
  }
}

TEST_P(TransferProgramTest, CorruptedBodyIsRefused) {
  auto body = pattern(2 * 1024 * 1024, 4);
  auto checksum = niox::transfer::xxh64(body);
  body[body.size() / 3] ^= 0x10;
  auto fd = connect_to(port_);
  ASSERT_TRUE(fd.valid());
  EXPECT_TRUE(send_all(fd.get(), header_for("flip.bin", body, checksum) + body));
  auto answer = read_answer(fd.get());
  fd.reset();
  auto rc = exit_status(*receiver_);
  auto said = receiver_->read_stderr();
  ASSERT_TRUE(answer.complete) << "receiver: " << said;
  EXPECT_EQ(answer.status, xfer::TransferStatus::checksum_mismatch);
  // The sender is told why, in the receiver's words.
  EXPECT_NE(answer.reason.find("checksum mismatch"), std::string::npos) << answer.reason;
  EXPECT_EQ(rc, 1) << said;
  EXPECT_TRUE(out_.list().empty());
}

// A sender that trickles the body in small writes (hand-made clients, slow links) gives the
// receiver's splices many small pieces, each its own pipe slot: every byte is stored, in order.
TEST_P(TransferProgramTest, BodyInSmallWritesIsStoredExactly) {
  auto body = pattern(3 * 1024 * 1024 + 77, 6);
  auto fd = connect_to(port_);
  ASSERT_TRUE(fd.valid());
  int one = 1;
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  ASSERT_TRUE(send_all(fd.get(), header_for("small.bin", body, niox::transfer::xxh64(body))));
  for (std::size_t at = 0; at < body.size(); at += 100) {
    ASSERT_TRUE(send_all(fd.get(), body.substr(at, 100)));
  }
  char reply[xfer::reply_size];
  std::size_t got = 0;
  while (got < sizeof reply) {
    ssize_t n = ::recv(fd.get(), reply + got, sizeof reply - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  fd.reset();
  ASSERT_EQ(got, sizeof reply) << "receiver: " << receiver_->read_stderr();
  xfer::TransferStatus status{};
  EXPECT_FALSE(xfer::decode_reply(std::as_bytes(std::span(reply)), status));
  EXPECT_EQ(status, xfer::TransferStatus::ok);
  EXPECT_EQ(receiver_->wait(), 0) << receiver_->read_stderr();
  ASSERT_EQ(out_.list(), std::vector<std::string>{"small.bin"});
  EXPECT_TRUE(out_.read("small.bin") == body);
}

TEST_P(TransferProgramTest, StreamThatIsNotATransferIsRefused) {
  auto fd = connect_to(port_);
  ASSERT_TRUE(fd.valid());
  EXPECT_TRUE(send_all(fd.get(), "GET / HTTP/1.1\r\nHost: x\r\n\r\n" + std::string(100, 'x')));
  // The receiver refuses, then lingers until this end closes its side (or a few seconds pass).
  ::shutdown(fd.get(), SHUT_WR);
  EXPECT_EQ(receiver_->wait(), 1);
  fd.reset();
  EXPECT_TRUE(out_.list().empty());
}

TEST_P(TransferProgramTest, ReceiverOutOfSpaceFailsBothEnds) {
  // RLIMIT_FSIZE stands in for a full disk: reserving 3 MiB past a 1 MiB limit fails with EFBIG.
  rlimit lim{1 << 20, 1 << 20};
  ASSERT_EQ(::prlimit(receiver_->pid(), RLIMIT_FSIZE, &lim, nullptr), 0);
  in_.write("large.bin", pattern(3 * 1024 * 1024, 5));
  auto s = sender(in_ / "large.bin");
  EXPECT_EQ(exit_status(*s), 1);
  // The receiver gives up at the header, before any body byte is stored, while the sender is
  // already sending: its lingering close makes sure the sender reads the verdict instead of a
  // reset. The sender prints the receiver's reason.
  auto err = s->read_stderr();
  EXPECT_NE(err.find("did not store the file: no room for 3145728 bytes"), std::string::npos)
      << err;
  EXPECT_EQ(err.find("could not store"), std::string::npos) << err;
  auto rc = exit_status(*receiver_);
  auto said = receiver_->read_stderr();
  EXPECT_EQ(rc, 5) << said;  // no room
  EXPECT_NE(said.find("no room for 3145728 bytes"), std::string::npos) << said;
  EXPECT_TRUE(out_.list().empty());
}

// A body announced large and then stalled: the receiver has reserved disk for what arrived and
// a bounded step ahead of it (64 MiB), not for the whole announced size.
TEST_P(TransferProgramTest, StalledLargeBodyReservesLittleMoreThanWhatArrived) {
  const std::uint64_t announced =
      std::min<std::uint64_t>(free_space(out_.str()) / 4, std::uint64_t{4} << 30);
  if (announced < (std::uint64_t{1} << 30))
    GTEST_SKIP() << "needs 4 GiB free on the test file system";
  const auto first = pattern(1 << 20, 7);
  xfer::TransferHeader h;
  h.name = "huge.bin";
  h.size = announced;
  h.checksum_trailer = true;
  auto fd = connect_to(port_);
  ASSERT_TRUE(fd.valid());
  ASSERT_TRUE(send_all(fd.get(), as_string(xfer::encode_header(h)) + first));
  // Wait (bounded) until what was sent is in the receiver's file: whatever the receiver reserves
  // before writing those bytes, it has reserved by then.
  std::optional<std::string> file;
  bool landed = false;
  for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
       !landed && std::chrono::steady_clock::now() < deadline;) {
    file = open_file_in(receiver_->pid(), out_.str());
    if (niox::FileDescriptor f(file ? ::open(file->c_str(), O_RDONLY | O_CLOEXEC) : -1); f) {
      std::string back(first.size(), '\0');
      landed = ::pread(f.get(), back.data(), back.size(), 0) == static_cast<ssize_t>(back.size()) &&
               back == first;
    }
    if (!landed) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(landed) << "the first MiB never appeared in the receiver's file";
  struct stat st {};
  ASSERT_EQ(::stat(file->c_str(), &st), 0);
  const auto reserved = static_cast<std::uint64_t>(st.st_blocks) * 512;
  EXPECT_LE(reserved, first.size() + (std::uint64_t{128} << 20))
      << reserved << " bytes reserved for " << first.size() << " received of " << announced
      << " announced";
  fd.reset();
  EXPECT_EQ(exit_status(*receiver_), 1);
  EXPECT_TRUE(out_.list().empty());
}

INSTANTIATE_TEST_SUITE_P(Backends, TransferProgramTest,
                         ::testing::Values(Case{BackendKind::io_uring, "io_uring"},
                                           Case{BackendKind::epoll, "epoll"}),
                         [](const auto& info) { return std::string(info.param.name); });

INSTANTIATE_TEST_SUITE_P(Backends, TransferReceiverOptionsTest,
                         ::testing::Values(Case{BackendKind::io_uring, "io_uring"},
                                           Case{BackendKind::epoll, "epoll"}),
                         [](const auto& info) { return std::string(info.param.name); });

const std::vector<std::string> short_timeouts{"--header-timeout", "0.5", "--idle-timeout", "0.5"};

// A sender that connects and says nothing: the receiver gives up after --header-timeout, tells
// the sender why, exits with its own status and leaves nothing.
TEST_P(TransferReceiverOptionsTest, SilentSenderTimesOutWaitingForTheHeader) {
  ASSERT_NO_FATAL_FAILURE(start_receiver(short_timeouts));
  auto fd = connect_to(port_);
  ASSERT_TRUE(fd.valid());
  auto o = outcome_of(std::move(fd));
  expect_refused(o, xfer::TransferStatus::timed_out, 3,
                 "timed out after 0.5 s waiting for the header (0 bytes arrived)");
  EXPECT_NE(o.answer.reason.find("timed out"), std::string::npos) << o.answer.reason;
  EXPECT_NE(o.answer.reason.find("header"), std::string::npos) << o.answer.reason;
}

TEST_P(TransferReceiverOptionsTest, SenderStalledMidHeaderTimesOut) {
  ASSERT_NO_FATAL_FAILURE(start_receiver(short_timeouts));
  auto fd = connect_to(port_);
  ASSERT_TRUE(fd.valid());
  const std::string body = pattern(1000, 9);
  ASSERT_TRUE(
      send_all(fd.get(), header_for("stall.bin", body, niox::transfer::xxh64(body)).substr(0, 20)));
  auto o = outcome_of(std::move(fd));
  expect_refused(o, xfer::TransferStatus::timed_out, 3,
                 "timed out after 0.5 s waiting for the header");
  EXPECT_NE(o.answer.reason.find("timed out"), std::string::npos) << o.answer.reason;
}

// A sender that stops part way through the body: --idle-timeout, the partial file removed.
TEST_P(TransferReceiverOptionsTest, SenderStalledMidBodyTimesOut) {
  ASSERT_NO_FATAL_FAILURE(start_receiver(short_timeouts));
  auto body = pattern(4 * 1024 * 1024, 10);
  auto fd = connect_to(port_);
  ASSERT_TRUE(fd.valid());
  ASSERT_TRUE(send_all(fd.get(), header_for("stall.bin", body, niox::transfer::xxh64(body)) +
                                     body.substr(0, 1 << 20)));
  auto o = outcome_of(std::move(fd));
  expect_refused(o, xfer::TransferStatus::timed_out, 4,
                 "timed out: nothing arrived for 0.5 s after");
  EXPECT_NE(o.answer.reason.find("timed out"), std::string::npos) << o.answer.reason;
  EXPECT_NE(o.said.find("of 4194304 bytes"), std::string::npos) << o.said;
}

// The whole body, then silence where the checksum trailer should follow.
TEST_P(TransferReceiverOptionsTest, SenderStalledBeforeTheChecksumTimesOut) {
  ASSERT_NO_FATAL_FAILURE(start_receiver(short_timeouts));
  const auto body = pattern(300000, 11);
  xfer::TransferHeader h;
  h.name = "notrailer.bin";
  h.size = body.size();
  h.checksum_trailer = true;
  auto fd = connect_to(port_);
  ASSERT_TRUE(fd.valid());
  ASSERT_TRUE(send_all(fd.get(), as_string(xfer::encode_header(h)) + body));
  auto o = outcome_of(std::move(fd));
  expect_refused(o, xfer::TransferStatus::timed_out, 4,
                 "nothing arrived for 0.5 s after the body, waiting for its checksum");
}

// A sender that keeps sending, but too slowly to fill one of the receiver's body chunks within
// the idle time, is not idle: the receiver stops the chunk to look, finds bytes, and goes on.
TEST_P(TransferReceiverOptionsTest, SlowButSteadySenderIsNotIdle) {
  ASSERT_NO_FATAL_FAILURE(start_receiver({"--idle-timeout", "1"}));
  // Under one chunk (256 KiB) in 3 s: each idle second passes in the middle of one.
  const auto body = pattern(200 * 1024, 12);
  auto fd = connect_to(port_);
  ASSERT_TRUE(fd.valid());
  int one = 1;
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  ASSERT_TRUE(send_all(fd.get(), header_for("slow.bin", body, niox::transfer::xxh64(body))));
  const std::size_t piece = body.size() / 30;
  for (std::size_t at = 0; at < body.size(); at += piece) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ASSERT_TRUE(send_all(fd.get(), body.substr(at, piece)));
  }
  auto o = outcome_of(std::move(fd));
  ASSERT_TRUE(o.answer.complete) << "receiver: " << o.said;
  EXPECT_EQ(o.answer.status, xfer::TransferStatus::ok) << o.answer.reason;
  EXPECT_EQ(o.rc, 0) << o.said;
  ASSERT_EQ(out_.list(), std::vector<std::string>{"slow.bin"});
  EXPECT_TRUE(out_.read("slow.bin") == body);
}

// More than the output file system has free (1 PiB) under a --max-size that allows it: refused
// as soon as the header is in, with the reason sent back, a status of its own, nothing kept.
TEST_P(TransferReceiverOptionsTest, HeaderAnnouncingMoreThanTheFreeSpaceIsRefusedAtOnce) {
  const std::uint64_t pebibyte = std::uint64_t{1} << 50;
  if (free_space(out_.str()) >= pebibyte) GTEST_SKIP() << "a file system with a PiB free";
  ASSERT_NO_FATAL_FAILURE(start_receiver({"--max-size", std::to_string(std::uint64_t{1} << 62)}));
  xfer::TransferHeader h;
  h.name = "huge.bin";
  h.size = pebibyte;
  h.checksum_trailer = true;
  xfer::TransferLimits high;
  high.max_file_size = std::uint64_t{1} << 62;
  auto fd = connect_to(port_);
  ASSERT_TRUE(fd.valid());
  ASSERT_TRUE(send_all(fd.get(), as_string(xfer::encode_header(h, high))));  // and no body byte
  auto o = outcome_of(std::move(fd));
  expect_refused(o, xfer::TransferStatus::write_failed, 5,
                 "not enough space for 1125899906842624 bytes");
  EXPECT_NE(o.answer.reason.find("free"), std::string::npos) << o.answer.reason;
}

// The real sender prints what the receiver said, not a generic failure.
// At a terminal both ends draw their progress bar, to the whole size, and the file arrives.
TEST_P(TransferReceiverOptionsTest, BothEndsShowTheirProgressOnATerminal) {
  const auto body = pattern(4 * 1024 * 1024, 11);
  in_.write("shown.bin", body);
  OnTerminal receiver({NIOX_TRANSFER_PROGRAM, "recv", "--port", "0", "--bind", "127.0.0.1", "--out",
                       out_.str(), "--backend", backend()});
  const auto line = receiver.read_line();
  const auto colon = line.find("127.0.0.1:");
  ASSERT_NE(colon, std::string::npos) << line;
  OnTerminal sender({NIOX_TRANSFER_PROGRAM, "send", in_ / "shown.bin", "--to",
                     "127.0.0.1:" + line.substr(colon + 10), "--backend", backend()});
  std::string sender_shown;
  std::string receiver_shown;
  EXPECT_EQ(sender.wait_exit(sender_shown), 0) << sender_shown;
  EXPECT_EQ(receiver.wait_exit(receiver_shown), 0) << receiver_shown;
  for (const std::string* shown : {&sender_shown, &receiver_shown}) {
    EXPECT_NE(shown->find("100%"), std::string::npos) << *shown;
    EXPECT_NE(shown->find("4.00 MiB / 4.00 MiB"), std::string::npos) << *shown;
  }
  ASSERT_EQ(out_.list(), std::vector<std::string>{"shown.bin"});
  EXPECT_TRUE(out_.read("shown.bin") == body);
}

TEST_P(TransferReceiverOptionsTest, SenderPrintsTheReceiversReason) {
  ASSERT_NO_FATAL_FAILURE(start_receiver({"--max-size", "1000"}));
  in_.write("large.bin", pattern(3 * 1024 * 1024, 8));
  auto s = sender(in_ / "large.bin");
  EXPECT_EQ(exit_status(*s), 1);
  auto err = s->read_stderr();
  EXPECT_NE(err.find("the receiver did not store the file: "), std::string::npos) << err;
  EXPECT_NE(err.find("3145728 bytes"), std::string::npos) << err;
  EXPECT_NE(err.find("larger than the receiver accepts (--max-size 1000)"), std::string::npos)
      << err;
  EXPECT_EQ(err.find("could not store"), std::string::npos) << err;
  EXPECT_EQ(exit_status(*receiver_), 1);
  EXPECT_TRUE(out_.list().empty());
}

// --out in a directory that does not exist is refused before the receiver listens, not when a
// transfer arrives.
TEST(TransferProgram, OutInAMissingDirectoryIsRefusedAtStartUp) {
  TempDir dir;
  for (const std::string& out : {dir / "missing/", dir / "missing/file.bin"}) {
    ChildProcess r(
        {NIOX_TRANSFER_PROGRAM, "recv", "--port", "0", "--bind", "127.0.0.1", "--out", out});
    auto rc = exit_status(r);
    auto said = r.read_stderr();
    EXPECT_EQ(rc, 2) << out << ": " << said;
    EXPECT_NE(said.find("the directory '" + dir / "missing" + "' does not exist"),
              std::string::npos)
        << said;
    EXPECT_FALSE(r.read_line(std::chrono::milliseconds(100))) << "it listened anyway";
  }
  dir.write("plain", "x");
  ChildProcess r({NIOX_TRANSFER_PROGRAM, "recv", "--port", "0", "--bind", "127.0.0.1", "--out",
                  dir / "plain/file.bin"});
  auto rc = exit_status(r);
  auto said = r.read_stderr();
  EXPECT_EQ(rc, 2) << said;
  EXPECT_NE(said.find("'" + dir / "plain" + "' is not a directory"), std::string::npos) << said;
}

TEST(TransferProgram, SendingADirectorySaysItIsADirectory) {
  TempDir dir;
  ChildProcess s({NIOX_TRANSFER_PROGRAM, "send", dir.str(), "--to", "127.0.0.1:9"});
  auto rc = exit_status(s);
  auto err = s.read_stderr();
  EXPECT_EQ(rc, 1) << err;
  EXPECT_NE(err.find("cannot send '" + dir.str() + "': it is a directory"), std::string::npos)
      << err;
}

TEST(TransferProgram, UsageErrorExitsWith2) {
  ChildProcess bad({NIOX_TRANSFER_PROGRAM, "fly"});
  EXPECT_EQ(bad.wait(), 2);
  ChildProcess missing(
      {NIOX_TRANSFER_PROGRAM, "send", "/nonexistent-file-for-test", "--to", "127.0.0.1:9"});
  EXPECT_EQ(missing.wait(), 1);
}

}  // namespace
