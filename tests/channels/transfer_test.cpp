// FileChannel::transfer_to / transfer_from: every kernel path, big files checked end to end with
// a checksum on the far side, counts beyond the end of the file, a file shrinking mid-transfer.
#include <niox/channels/file_channel.hpp>
#include <niox/channels/pipe.hpp>
#include <niox/channels/selector.hpp>
#include <niox/channels/socket_channel.hpp>

#include "support/channels_support.hpp"

#include <csignal>
#include <thread>

#include <unistd.h>

namespace niox {
namespace {

using test::Checksum;

constexpr std::uint64_t MiB = 1024 * 1024;

// Writes `size` pseudo-random bytes and returns their checksum.
std::uint64_t make_file(const std::filesystem::path& path, std::uint64_t size, std::uint64_t seed) {
  auto ch = FileChannel::open(
      path, OpenOption::write | OpenOption::create | OpenOption::truncate_existing);
  test::Xorshift rng(seed);
  Checksum sum;
  auto buf = ByteBuffer::allocate(4 * MiB);
  for (std::uint64_t done = 0; done < size;) {
    std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(size - done, buf.capacity()));
    buf.clear();
    rng.fill(buf.array().first(n));
    buf.limit(n);
    sum.update(buf.bytes());
    ch.write(buf);
    done += n;
  }
  return sum.value();
}

struct Received {
  std::uint64_t bytes = 0;
  std::uint64_t checksum = 0;
};

Received checksum_until_eof(ReadableByteChannel& ch) {
  Checksum sum;
  auto buf = ByteBuffer::allocate(1 * MiB);
  for (;;) {
    buf.clear();
    if (ch.read(buf) < 0) break;
    buf.flip();
    sum.update(buf.bytes());
  }
  return {sum.bytes(), sum.value()};
}

Received checksum_file(const std::filesystem::path& path) {
  auto ch = FileChannel::open(path, OpenOption::read);
  return checksum_until_eof(ch);
}

class TransferTest : public test::FdLeakCheck {
 protected:
  test::TempDir dir_;
};

// ---- 256 MiB end to end (64 MiB under sanitizers) ---------------------------------------

constexpr std::uint64_t big_size = (test::sanitized_build ? 64 : 256) * MiB;

TEST_F(TransferTest, BigFileIntoSocket) {
  auto src_path = dir_ / "big";
  auto sum = make_file(src_path, big_size, 1);
  auto src = FileChannel::open(src_path, OpenOption::read);
  auto pair = test::tcp_pair();
  Received got;
  std::thread reader([&] { got = checksum_until_eof(pair.server); });
  auto r = src.transfer_to(0, big_size, pair.client);
  pair.client.shutdown_output();
  reader.join();
  EXPECT_EQ(r.bytes, big_size);
  EXPECT_EQ(r.path, TransferPath::sendfile);
  EXPECT_FALSE(r.end_of_input);
  EXPECT_EQ(src.position(), 0u);  // transfer_to never moves the source position
  EXPECT_EQ(got.bytes, big_size);
  EXPECT_EQ(got.checksum, sum);
}

TEST_F(TransferTest, BigFileIntoFile) {
  auto src_path = dir_ / "big";
  auto sum = make_file(src_path, big_size, 2);
  auto src = FileChannel::open(src_path, OpenOption::read);
  auto dst = FileChannel::open(dir_ / "copy", OpenOption::write | OpenOption::create_new);
  std::uint64_t done = 0;
  TransferResult r;
  while (done < big_size) {  // Java style: loop until all is moved
    r = src.transfer_to(done, big_size - done, dst);
    ASSERT_GT(r.bytes, 0u);
    done += r.bytes;
  }
  EXPECT_EQ(r.path, TransferPath::copy_file_range);
  EXPECT_EQ(dst.position(), big_size);  // the target's position advances
  dst.close();
  auto got = checksum_file(dir_ / "copy");
  EXPECT_EQ(got.bytes, big_size);
  EXPECT_EQ(got.checksum, sum);
}

// ---- Each path, forced ------------------------------------------------------------------

class TransferPathTest : public TransferTest, public ::testing::WithParamInterface<TransferPath> {};

TEST_P(TransferPathTest, ToSocketAndToFile) {
  const TransferPath path = GetParam();
  constexpr std::uint64_t size = 8 * MiB + 12345;
  auto sum = make_file(dir_ / "src", size, 3);
  auto src = FileChannel::open(dir_ / "src", OpenOption::read);
  src.position(77);

  // Into a socket (copy_file_range cannot: the call reports that no allowed path could run).
  auto pair = test::tcp_pair();
  if (path == TransferPath::copy_file_range) {
    std::error_code ec;
    auto r = src.transfer_to(0, size, pair.client, ec, static_cast<TransferPaths>(path));
    EXPECT_EQ(ec, std::errc::operation_not_supported);
    EXPECT_EQ(r.bytes, 0u);
  } else {
    Received got;
    std::thread reader([&] { got = checksum_until_eof(pair.server); });
    auto r = src.transfer_to(0, size, pair.client, static_cast<TransferPaths>(path));
    pair.client.shutdown_output();
    reader.join();
    EXPECT_EQ(r.bytes, size);
    EXPECT_EQ(r.path, path);
    EXPECT_EQ(got.bytes, size);
    EXPECT_EQ(got.checksum, sum);
  }

  // Into a file, from a non-zero position, twice, so the target's position is used.
  auto dst = FileChannel::open(dir_ / "dst", OpenOption::write | OpenOption::create_new);
  auto r1 = src.transfer_to(0, 1000, dst, static_cast<TransferPaths>(path));
  auto r2 = src.transfer_to(1000, size, dst, static_cast<TransferPaths>(path));
  EXPECT_EQ(r1.bytes, 1000u);
  EXPECT_EQ(r1.path, path);
  EXPECT_EQ(r2.bytes, size - 1000);
  EXPECT_TRUE(r2.end_of_input);  // asked for more than the file holds
  EXPECT_EQ(dst.position(), size);
  EXPECT_EQ(src.position(), 77u);
  dst.close();
  auto got = checksum_file(dir_ / "dst");
  EXPECT_EQ(got.bytes, size);
  EXPECT_EQ(got.checksum, sum);
}

// Socket targets: copy_file_range has no part here.
class TransferShrinkTest : public TransferPathTest {};

TEST_P(TransferShrinkTest, FileShrinksMidTransfer) {
  const TransferPath path = GetParam();
  constexpr std::uint64_t size = 32 * MiB;
  make_file(dir_ / "shrinking", size, 4);
  auto src = FileChannel::open(dir_ / "shrinking", OpenOption::read);
  auto pair = test::tcp_pair();
  pair.client.set_option(StandardSocketOptions::so_sndbuf, 65536);
  pair.server.set_option(StandardSocketOptions::so_rcvbuf, 65536);
  std::vector<std::byte> got;
  std::thread reader([&] {
    auto buf = ByteBuffer::allocate(65536);
    bool truncated = false;
    for (;;) {
      buf.clear();
      if (pair.server.read(buf) < 0) break;
      got.insert(got.end(), buf.array_view().begin(), buf.array_view().begin() + buf.position());
      if (!truncated && got.size() >= 1 * MiB) {
        // The sender is blocked on a full socket a little past 1 MiB; cut the file at 4 MiB.
        ASSERT_EQ(::truncate((dir_ / "shrinking").c_str(), 4 * MiB), 0);
        truncated = true;
      }
    }
  });
  auto r = src.transfer_to(0, size, pair.client, static_cast<TransferPaths>(path));
  pair.client.shutdown_output();
  reader.join();
  EXPECT_TRUE(r.end_of_input);
  EXPECT_EQ(r.bytes, 4 * MiB);
  EXPECT_EQ(got.size(), r.bytes);
  // What arrived is the file's original beginning.
  std::vector<std::byte> expect(4 * MiB);
  test::Xorshift(4).fill(expect);
  EXPECT_TRUE(std::equal(got.begin(), got.end(), expect.begin()));
  // Asking again past the new end is an immediate, clear result.
  auto again = src.transfer_to(r.bytes, size, pair.client, static_cast<TransferPaths>(path));
  EXPECT_EQ(again.bytes, 0u);
  EXPECT_TRUE(again.end_of_input);
}

INSTANTIATE_TEST_SUITE_P(Paths, TransferPathTest,
                         ::testing::Values(TransferPath::copy_file_range, TransferPath::sendfile,
                                           TransferPath::splice, TransferPath::copy),
                         [](const auto& info) { return std::string(to_string(info.param)); });
INSTANTIATE_TEST_SUITE_P(Paths, TransferShrinkTest,
                         ::testing::Values(TransferPath::sendfile, TransferPath::splice,
                                           TransferPath::copy),
                         [](const auto& info) { return std::string(to_string(info.param)); });

// ---- Edges --------------------------------------------------------------------------------

TEST_F(TransferTest, CountBeyondEndOfFile) {
  make_file(dir_ / "small", 1000, 5);
  auto src = FileChannel::open(dir_ / "small", OpenOption::read);
  auto dst = FileChannel::open(dir_ / "out", OpenOption::write | OpenOption::create);
  auto r = src.transfer_to(500, 1 << 30, dst);
  EXPECT_EQ(r.bytes, 500u);
  EXPECT_TRUE(r.end_of_input);
  r = src.transfer_to(1000, 10, dst);
  EXPECT_EQ(r.bytes, 0u);
  EXPECT_TRUE(r.end_of_input);
  r = src.transfer_to(5000, 10, dst);
  EXPECT_EQ(r.bytes, 0u);
  EXPECT_TRUE(r.end_of_input);
  r = src.transfer_to(0, 0, dst);
  EXPECT_EQ(r.bytes, 0u);
  EXPECT_FALSE(r.end_of_input);
  EXPECT_EQ(dst.size(), 500u);
}

TEST_F(TransferTest, IntoAppendModeFile) {
  auto sum = make_file(dir_ / "src", 3 * MiB, 9);
  auto src = FileChannel::open(dir_ / "src", OpenOption::read);
  {
    auto out = FileChannel::open(dir_ / "log", OpenOption::write | OpenOption::create);
    auto head = ByteBuffer::wrap(std::string_view("head"));
    out.write(head);
  }
  auto out = FileChannel::open(dir_ / "log", OpenOption::append);
  auto r = src.transfer_to(0, 3 * MiB, out);
  EXPECT_EQ(r.bytes, 3 * MiB);
  EXPECT_NE(r.path, TransferPath::copy_file_range) << to_string(r.path);  // it refuses O_APPEND
  EXPECT_EQ(out.size(), 3 * MiB + 4);
  out.close();
  auto all = FileChannel::open(dir_ / "log", OpenOption::read);
  all.position(4);
  EXPECT_EQ(checksum_until_eof(all).checksum, sum);
}

// splice refuses an O_APPEND output only after the bytes left the socket for the pipe: the
// transfer must not start there and lose them, but go by the copy loop from the first byte.
TEST_F(TransferTest, FromASocketIntoAnAppendModeFile) {
  constexpr std::uint64_t size = 2 * MiB + 5;
  auto sum = make_file(dir_ / "src", size, 10);
  auto src = FileChannel::open(dir_ / "src", OpenOption::read);
  {
    auto out = FileChannel::open(dir_ / "log", OpenOption::write | OpenOption::create);
    auto head = ByteBuffer::wrap(std::string_view("head"));
    out.write(head);
  }
  auto out = FileChannel::open(dir_ / "log", OpenOption::append);
  auto pair = test::tcp_pair();
  std::thread sender([&] {
    src.transfer_to(0, size, pair.client);
    pair.client.shutdown_output();
  });
  std::uint64_t done = 0;
  TransferResult r;
  std::error_code ec;
  while (!r.end_of_input && !ec) {
    r = out.transfer_from(pair.server, 4 + done, size + 1 - done, ec);
    done += r.bytes;
  }
  EXPECT_FALSE(ec) << ec.message();
  if (ec) pair.server.close();  // the sender stops too
  sender.join();
  EXPECT_EQ(done, size);
  EXPECT_EQ(r.path, TransferPath::copy);
  EXPECT_EQ(out.size(), size + 4);
  out.close();
  auto all = FileChannel::open(dir_ / "log", OpenOption::read);
  all.position(4);
  EXPECT_EQ(checksum_until_eof(all).checksum, sum);
}

TEST_F(TransferTest, NonBlockingSocketTakesWhatItCan) {
  constexpr std::uint64_t size = 16 * MiB;
  auto sum = make_file(dir_ / "nb", size, 6);
  auto src = FileChannel::open(dir_ / "nb", OpenOption::read);
  auto pair = test::tcp_pair();
  pair.client.configure_blocking(false);
  auto selector = Selector::open();
  pair.client.register_with(selector, SelectionKey::OP_WRITE);
  auto first = src.transfer_to(0, size, pair.client);  // nobody reads yet
  EXPECT_GT(first.bytes, 0u);
  EXPECT_LT(first.bytes, size);
  EXPECT_FALSE(first.end_of_input);
  Received got;
  std::thread reader([&] { got = checksum_until_eof(pair.server); });
  std::uint64_t done = first.bytes;
  while (done < size) {
    selector.select(std::chrono::milliseconds(2000));
    selector.selected_keys().clear();
    done += src.transfer_to(done, size - done, pair.client).bytes;
  }
  pair.client.shutdown_output();
  reader.join();
  EXPECT_EQ(got.bytes, size);
  EXPECT_EQ(got.checksum, sum);
}

TEST_F(TransferTest, ClosedPeerIsEpipeNotSigpipe) {
  auto old = std::signal(SIGPIPE, SIG_DFL);
  make_file(dir_ / "f", 4 * MiB, 7);
  auto src = FileChannel::open(dir_ / "f", OpenOption::read);
  for (TransferPaths p :
       {static_cast<unsigned>(TransferPath::sendfile), static_cast<unsigned>(TransferPath::splice),
        static_cast<unsigned>(TransferPath::copy)}) {
    auto pair = test::tcp_pair();
    pair.server.close();
    std::error_code ec;
    std::uint64_t done = 0;
    for (int i = 0; i < 100 && !ec; ++i) {
      done += src.transfer_to(done % (4 * MiB), 4 * MiB, pair.client, ec, p).bytes;
    }
    EXPECT_TRUE(ec == std::errc::broken_pipe || ec == std::errc::connection_reset) << ec.message();
  }
  auto pipe = Pipe::open();
  pipe.source().close();
  std::error_code ec;
  src.transfer_to(0, 100, pipe.sink(), ec);
  EXPECT_EQ(ec, std::errc::broken_pipe);
  std::signal(SIGPIPE, old);
}

TEST_F(TransferTest, TransferFromSocketPipeAndFile) {
  constexpr std::uint64_t size = 8 * MiB + 3;
  auto sum = make_file(dir_ / "src", size, 8);
  auto src = FileChannel::open(dir_ / "src", OpenOption::read);

  // Socket -> file: splice; the stream ends before count.
  {
    auto pair = test::tcp_pair();
    std::thread sender([&] {
      src.transfer_to(0, size, pair.client);
      pair.client.shutdown_output();
    });
    auto dst = FileChannel::open(dir_ / "from_socket", OpenOption::write | OpenOption::create);
    auto r = dst.transfer_from(pair.server, 0, size + 100);
    sender.join();
    EXPECT_EQ(r.bytes, size);
    EXPECT_EQ(r.path, TransferPath::splice);
    EXPECT_TRUE(r.end_of_input);
    EXPECT_EQ(dst.position(), 0u);  // this channel's position is unchanged
    EXPECT_EQ(checksum_file(dir_ / "from_socket").checksum, sum);
  }
  // File -> file: copy_file_range, from the source's position, which advances.
  {
    auto in = FileChannel::open(dir_ / "src", OpenOption::read);
    auto dst = FileChannel::open(dir_ / "from_file", OpenOption::write | OpenOption::create);
    auto r = dst.transfer_from(in, 0, size);
    EXPECT_EQ(r.bytes, size);
    EXPECT_EQ(r.path, TransferPath::copy_file_range);
    EXPECT_EQ(in.position(), size);
    EXPECT_EQ(checksum_file(dir_ / "from_file").checksum, sum);
  }
  // Pipe -> file at an offset, and the copy path.
  for (TransferPaths allowed : {all_transfer_paths, static_cast<unsigned>(TransferPath::copy)}) {
    auto pipe = Pipe::open();
    std::thread sender([&] {
      src.transfer_to(0, size, pipe.sink());
      pipe.sink().close();
    });
    auto dst = FileChannel::open(dir_ / "from_pipe", OpenOption::read | OpenOption::write |
                                                         OpenOption::create |
                                                         OpenOption::truncate_existing);
    std::uint64_t done = 0;
    TransferResult r;
    while (!r.end_of_input) {
      r = dst.transfer_from(pipe.source(), done, size + 1 - done, allowed);
      done += r.bytes;
    }
    sender.join();
    EXPECT_EQ(done, size);
    EXPECT_EQ(r.path, allowed == all_transfer_paths ? TransferPath::splice : TransferPath::copy);
    dst.close();
    EXPECT_EQ(checksum_file(dir_ / "from_pipe").checksum, sum);
  }
  // A non-blocking source with nothing to give: 0 bytes, not the end.
  {
    auto pair = test::tcp_pair();
    pair.server.configure_blocking(false);
    auto dst = FileChannel::open(dir_ / "nothing", OpenOption::write | OpenOption::create);
    auto r = dst.transfer_from(pair.server, 0, 100);
    EXPECT_EQ(r.bytes, 0u);
    EXPECT_FALSE(r.end_of_input);
  }
}

}  // namespace
}  // namespace niox
