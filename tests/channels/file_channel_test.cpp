#include <niox/buffer/gather.hpp>
#include <niox/channels/file_channel.hpp>

#include "support/channels_support.hpp"

#include <array>
#include <fstream>
#include <thread>

#include <fcntl.h>
#include <unistd.h>

namespace niox {
namespace {

using test::TempDir;

class FileChannelTest : public test::FdLeakCheck {
 protected:
  TempDir dir_;
};

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void spit(const std::filesystem::path& p, std::string_view s) {
  std::ofstream out(p, std::ios::binary);
  out.write(s.data(), static_cast<std::streamsize>(s.size()));
}

TEST_F(FileChannelTest, WriteThenReadBackAtPosition) {
  auto path = dir_ / "a";
  {
    auto ch = FileChannel::open(path, OpenOption::write | OpenOption::create_new);
    auto src = ByteBuffer::wrap(std::string_view("hello, world"));
    EXPECT_EQ(ch.write(src), 12);
    EXPECT_FALSE(src.has_remaining());
    EXPECT_EQ(ch.position(), 12u);
    EXPECT_EQ(ch.size(), 12u);
  }
  EXPECT_EQ(slurp(path), "hello, world");
  auto ch = FileChannel::open(path, OpenOption::read);
  auto dst = ByteBuffer::allocate(5);
  EXPECT_EQ(ch.read(dst), 5);
  EXPECT_EQ(ch.position(), 5u);
  dst.flip();
  EXPECT_EQ(dst.string_view(), "hello");
  ch.position(7);
  dst.clear();
  EXPECT_EQ(ch.read(dst), 5);
  dst.flip();
  EXPECT_EQ(dst.string_view(), "world");
  dst.clear();
  EXPECT_EQ(ch.read(dst), -1);  // end of file
  auto full = ByteBuffer::allocate(0);
  EXPECT_EQ(ch.read(full), 0);  // no room: 0, not -1
}

TEST_F(FileChannelTest, OpenOptions) {
  auto path = dir_ / "opts";
  std::error_code ec;
  FileChannel::open(path, OpenOption::read, 0644, ec);
  EXPECT_EQ(ec, std::errc::no_such_file_or_directory);
  EXPECT_THROW(FileChannel::open(path, OpenOption::read), std::system_error);
  { auto ch = FileChannel::open(path, OpenOption::write | OpenOption::create_new); }
  FileChannel::open(path, OpenOption::write | OpenOption::create_new, 0644, ec);
  EXPECT_EQ(ec, std::errc::file_exists);
  EXPECT_THROW(FileChannel::open(path, OpenOption::read | OpenOption::append),
               IllegalArgumentException);
  spit(path, "0123456789");
  {
    auto ch = FileChannel::open(path, OpenOption::append);
    auto src = ByteBuffer::wrap(std::string_view("ab"));
    ch.write(src);
    EXPECT_EQ(ch.position(), 12u);
  }
  EXPECT_EQ(slurp(path), "0123456789ab");
  {
    auto ch = FileChannel::open(path, OpenOption::write | OpenOption::truncate_existing);
    EXPECT_EQ(ch.size(), 0u);
    auto dst = ByteBuffer::allocate(4);
    EXPECT_THROW(ch.read(dst), NonReadableChannelException);
  }
  {
    auto ch = FileChannel::open(path, OpenOption::read);
    auto src = ByteBuffer::wrap(std::string_view("x"));
    EXPECT_THROW(ch.write(src), NonWritableChannelException);
  }
  {
    auto ch = FileChannel::open(path, OpenOption::write | OpenOption::dsync | OpenOption::sync);
    auto src = ByteBuffer::wrap(std::string_view("sync"));
    EXPECT_EQ(ch.write(src), 4);
    ch.force(true);
    ch.force(false);
  }
  EXPECT_EQ(slurp(path), "sync");
  EXPECT_TRUE(::fcntl(FileChannel::open(path, OpenOption::read).native_handle(), F_GETFD) &
              FD_CLOEXEC);
}

TEST_F(FileChannelTest, DirectIo) {
  auto path = dir_ / "direct";
  std::error_code ec;
  auto ch = FileChannel::open(
      path, OpenOption::read | OpenOption::write | OpenOption::create | OpenOption::direct, 0644,
      ec);
  if (ec == std::errc::invalid_argument) {
    GTEST_SKIP() << "the temp file system does not support O_DIRECT";
  }
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_TRUE(::fcntl(ch.native_handle(), F_GETFL) & O_DIRECT);
  auto src = ByteBuffer::allocate_direct(4096);
  test::Xorshift(7).fill(src.array());
  EXPECT_EQ(ch.write(src, 0), 4096);
  auto dst = ByteBuffer::allocate_direct(4096);
  EXPECT_EQ(ch.read(dst, 0), 4096);
  src.flip();
  dst.flip();
  EXPECT_EQ(src, dst);
}

TEST_F(FileChannelTest, PositionalIoLeavesPositionAlone) {
  auto ch =
      FileChannel::open(dir_ / "p", OpenOption::read | OpenOption::write | OpenOption::create);
  auto a = ByteBuffer::wrap(std::string_view("AAAA"));
  auto b = ByteBuffer::wrap(std::string_view("BB"));
  EXPECT_EQ(ch.write(a, 10), 4);
  EXPECT_EQ(ch.position(), 0u);
  EXPECT_EQ(ch.size(), 14u);
  EXPECT_EQ(ch.write(b, 2), 2);
  auto dst = ByteBuffer::allocate(14);
  EXPECT_EQ(ch.read(dst, 0), 14);
  EXPECT_EQ(ch.position(), 0u);
  dst.flip();
  EXPECT_EQ(dst.string_view(), std::string_view("\0\0BB\0\0\0\0\0\0AAAA", 14));
  dst.clear();
  EXPECT_EQ(ch.read(dst, 14), -1);
  EXPECT_EQ(ch.read(dst, 1000), -1);
}

TEST_F(FileChannelTest, PositionalVectoredReadWrite) {
  auto ch =
      FileChannel::open(dir_ / "v", OpenOption::read | OpenOption::write | OpenOption::create);
  test::Xorshift rng(42);
  // 1500 pieces: more than IOV_MAX, with empty ones among them.
  std::vector<std::vector<std::byte>> pieces(1500);
  std::vector<ByteBuffer> srcs;
  std::string expected;
  for (auto& p : pieces) {
    p.resize(rng.below(40));
    rng.fill(p);
    srcs.push_back(ByteBuffer::wrap(std::span<std::byte>(p)));
    expected.append(reinterpret_cast<const char*>(p.data()), p.size());
  }
  const std::uint64_t at = 4096 + 3;
  EXPECT_EQ(ch.write(std::span<ByteBuffer>(srcs), at), static_cast<std::int64_t>(expected.size()));
  for (auto& s : srcs) {
    EXPECT_FALSE(s.has_remaining());
  }
  EXPECT_EQ(ch.position(), 0u);
  EXPECT_EQ(ch.size(), at + expected.size());

  // Read back into buffers of other sizes (positional: one preadv per call, so loop).
  std::vector<ByteBuffer> dsts;
  for (std::size_t i = 0; i < 900; ++i) {
    dsts.push_back(ByteBuffer::allocate(rng.below(90)));
  }
  std::size_t want = std::min(total_remaining(dsts), expected.size());
  std::size_t got = 0;
  while (got < want) {
    auto n = ch.read(std::span<ByteBuffer>(dsts), at + got);
    ASSERT_GT(n, 0);
    got += static_cast<std::size_t>(n);
  }
  std::string back;
  for (auto& d : dsts) {
    back.append(reinterpret_cast<const char*>(d.array_view().data()), d.position());
  }
  EXPECT_EQ(back, expected.substr(0, back.size()));
  EXPECT_EQ(ch.position(), 0u);
}

TEST_F(FileChannelTest, ScatterReadHeaderThenBody) {
  auto path = dir_ / "msg";
  auto body = test::random_bytes(10000, 3);
  {
    auto ch = FileChannel::open(path, OpenOption::write | OpenOption::create);
    auto header = ByteBuffer::allocate(8);
    header.put_long(static_cast<std::int64_t>(body.size())).flip();
    std::array<ByteBuffer, 2> out{header, ByteBuffer::wrap(std::span<std::byte>(body))};
    EXPECT_EQ(ch.write(out), 8 + 10000);
  }
  auto ch = FileChannel::open(path, OpenOption::read);
  std::array<ByteBuffer, 2> in{ByteBuffer::allocate(8), ByteBuffer::allocate(10000)};
  std::int64_t total = 0;
  while (in[1].has_remaining()) {
    auto n = ch.read(in);
    ASSERT_GT(n, 0);
    total += n;
  }
  EXPECT_EQ(total, 10008);
  EXPECT_EQ(in[0].flip().get_long(), 10000);
  EXPECT_EQ(std::memcmp(in[1].array_view().data(), body.data(), body.size()), 0);
  std::array<ByteBuffer, 1> more{ByteBuffer::allocate(1)};
  EXPECT_EQ(ch.read(more), -1);
  // offset/length forms check their range like Java.
  EXPECT_THROW(ch.read(std::span<ByteBuffer>(in), 1, 2), IndexOutOfBoundsException);
}

TEST_F(FileChannelTest, TruncateSizeAndPosition) {
  auto path = dir_ / "t";
  spit(path, "0123456789");
  auto ch = FileChannel::open(path, OpenOption::read | OpenOption::write);
  ch.position(8);
  ch.truncate(20);  // never grows
  EXPECT_EQ(ch.size(), 10u);
  EXPECT_EQ(ch.position(), 8u);
  ch.truncate(4);
  EXPECT_EQ(ch.size(), 4u);
  EXPECT_EQ(ch.position(), 4u);
  ch.position(100);  // seeking past the end is allowed; a write there leaves a hole
  auto src = ByteBuffer::wrap(std::string_view("z"));
  ch.write(src);
  EXPECT_EQ(ch.size(), 101u);
}

TEST_F(FileChannelTest, MapModes) {
  auto path = dir_ / "m";
  spit(path, std::string(10000, 'a'));
  ByteBuffer ro;
  {
    auto ch = FileChannel::open(path, OpenOption::read | OpenOption::write);
    ro = ch.map(MapMode::read_only, 5000, 100);  // unaligned start
    EXPECT_TRUE(ro.is_read_only());
    EXPECT_EQ(ro.capacity(), 100u);
    EXPECT_THROW(ro.put(static_cast<std::uint8_t>(1)), ReadOnlyBufferException);

    auto rw = ch.map(MapMode::read_write, 4999, 3);
    rw.put(std::string_view("XYZ"));
    auto priv = ch.map(MapMode::private_copy, 0, 10000);
    priv.put(0, static_cast<std::uint8_t>('P'));
    // Mapping past the end of a read-write file grows it.
    auto grow = ch.map(MapMode::read_write, 10000, 10);
    EXPECT_EQ(ch.size(), 10010u);
    EXPECT_EQ(ch.map(MapMode::read_only, 0, 0).capacity(), 0u);
  }
  // The channel is closed; the read-only mapping still lives and sees the shared write.
  EXPECT_EQ(ro.get(0), 'Y');
  EXPECT_EQ(ro.get(1), 'Z');
  auto content = slurp(path);
  EXPECT_EQ(content.substr(4999, 3), "XYZ");
  EXPECT_EQ(content[0], 'a');  // the private change stayed private

  auto rd = FileChannel::open(path, OpenOption::read);
  EXPECT_THROW(rd.map(MapMode::read_write, 0, 10), NonWritableChannelException);
}

TEST_F(FileChannelTest, LockExcludesOtherChannels) {
  auto path = dir_ / "l";
  spit(path, "data");
  auto a = FileChannel::open(path, OpenOption::read | OpenOption::write);
  auto b = FileChannel::open(path, OpenOption::read | OpenOption::write);
  {
    auto lock = a.lock();
    EXPECT_TRUE(lock.is_valid());
    EXPECT_FALSE(lock.is_shared());
    EXPECT_FALSE(b.try_lock().has_value());
    EXPECT_FALSE(b.try_lock(0, 1, true).has_value());
  }
  // Released by destruction.
  auto shared1 = a.try_lock(0, 100, true);
  ASSERT_TRUE(shared1.has_value());
  auto shared2 = b.try_lock(0, 100, true);
  ASSERT_TRUE(shared2.has_value());
  EXPECT_FALSE(b.try_lock(50, 10, false).has_value());
  auto disjoint = b.try_lock(200, 10, false);
  EXPECT_TRUE(disjoint.has_value());
  shared1->release();
  EXPECT_FALSE(shared1->is_valid());
  shared2->release();
  auto excl = b.try_lock(0, 100, false);
  ASSERT_TRUE(excl.has_value());
  b.close();  // closing the channel drops its locks
  EXPECT_FALSE(excl->is_valid());
  EXPECT_TRUE(a.try_lock().has_value());

  // A blocking lock waits for the holder.
  auto c = FileChannel::open(path, OpenOption::read | OpenOption::write);
  auto held = std::make_optional(a.lock());
  std::atomic<bool> got{false};
  std::thread t([&] {
    auto l = c.lock();
    got = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(got.load());
  held.reset();
  t.join();
  EXPECT_TRUE(got.load());
}

TEST_F(FileChannelTest, ErrorCodeOverloadsAndClosedChannel) {
  auto ch =
      FileChannel::open(dir_ / "c", OpenOption::read | OpenOption::write | OpenOption::create);
  ch.close();
  ch.close();  // idempotent
  EXPECT_FALSE(ch.is_open());
  auto b = ByteBuffer::allocate(4);
  std::error_code ec;
  EXPECT_EQ(ch.read(b, ec), 0);
  EXPECT_EQ(ec, std::errc::bad_file_descriptor);
  EXPECT_EQ(ch.write(b, ec), 0);
  EXPECT_EQ(ec, std::errc::bad_file_descriptor);
  try {
    ch.read(b);
    ADD_FAILURE() << "no exception";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), std::errc::bad_file_descriptor);
  }
}

TEST_F(FileChannelTest, FromNativeAndRelease) {
  int fd = ::open((dir_ / "n").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  auto ch = FileChannel::from_native(fd);
  auto src = ByteBuffer::wrap(std::string_view("abc"));
  EXPECT_EQ(ch.write(src), 3);
  int back = ch.release();
  EXPECT_EQ(back, fd);
  EXPECT_FALSE(ch.is_open());
  EXPECT_FALSE(FileDescriptor(back).close());  // the caller's now, still open
}

}  // namespace
}  // namespace niox
