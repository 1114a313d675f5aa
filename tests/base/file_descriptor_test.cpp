#include <niox/base/file_descriptor.hpp>
#include <niox/loop/event_loop.hpp>

#include "support/backends.hpp"
#include "support/loop_sockets.hpp"

#include <gtest/gtest.h>

#include <cerrno>
#include <string>
#include <system_error>
#include <utility>

#include <fcntl.h>
#include <unistd.h>

namespace niox {
namespace {

using namespace std::chrono_literals;

// Whether `fd` names an open descriptor of this process.
bool is_open_number(int fd) { return ::fcntl(fd, F_GETFD) >= 0; }

std::pair<int, int> raw_pipe() {
  int p[2] = {-1, -1};
  EXPECT_EQ(::pipe2(p, O_CLOEXEC), 0) << errno;
  return {p[0], p[1]};
}

TEST(FileDescriptor, DefaultAndNegativeOwnNothing) {
  FileDescriptor none;
  EXPECT_EQ(none.get(), -1);
  EXPECT_FALSE(none.valid());
  EXPECT_FALSE(none);
  FileDescriptor negative(-7);
  EXPECT_EQ(negative.get(), -1);
  EXPECT_EQ(none.close(), std::errc::bad_file_descriptor);
  EXPECT_NO_THROW(none.close_or_throw());
}

TEST(FileDescriptor, TheDestructorClosesWhatItOwns) {
  auto [r, w] = raw_pipe();
  {
    FileDescriptor fr(r);
    FileDescriptor fw(w);
    EXPECT_EQ(fr.get(), r);
    EXPECT_TRUE(fr);
    EXPECT_TRUE(is_open_number(r));
  }
  EXPECT_FALSE(is_open_number(r));
  EXPECT_FALSE(is_open_number(w));
}

TEST(FileDescriptor, MoveTransfersOwnershipAndMoveAssignmentClosesTheOldOne) {
  auto [r, w] = raw_pipe();
  FileDescriptor a(r);
  FileDescriptor b(std::move(a));
  EXPECT_EQ(a.get(), -1);  // NOLINT(bugprone-use-after-move): moved-from is specified
  EXPECT_EQ(b.get(), r);
  FileDescriptor c(w);
  c = std::move(b);  // closes w, takes r
  EXPECT_FALSE(is_open_number(w));
  EXPECT_EQ(c.get(), r);
  EXPECT_EQ(b.get(), -1);  // NOLINT(bugprone-use-after-move)
  auto& self = c;
  c = std::move(self);  // self-move keeps the descriptor
  EXPECT_EQ(c.get(), r);
  EXPECT_TRUE(is_open_number(r));
  a = FileDescriptor(::dup(r));  // a moved-from object is reusable
  EXPECT_TRUE(a);
}

TEST(FileDescriptor, ReleaseGivesTheNumberBackUnclosed) {
  auto [r, w] = raw_pipe();
  FileDescriptor fr(r);
  FileDescriptor fw(w);
  int back = fr.release();
  EXPECT_EQ(back, r);
  EXPECT_FALSE(fr);
  fr.reset();  // owns nothing: closes nothing
  EXPECT_TRUE(is_open_number(r));
  ASSERT_EQ(::close(back), 0);
}

TEST(FileDescriptor, ResetClosesTheOldOneAndOwnsTheNewOne) {
  auto [r, w] = raw_pipe();
  FileDescriptor fd(r);
  fd.reset(w);
  EXPECT_FALSE(is_open_number(r));
  EXPECT_EQ(fd.get(), w);
  fd.reset();
  EXPECT_FALSE(is_open_number(w));
  EXPECT_FALSE(fd);
}

TEST(FileDescriptor, CloseTwiceReportsEbadfTheSecondTime) {
  auto [r, w] = raw_pipe();
  FileDescriptor fr(r);
  FileDescriptor fw(w);
  EXPECT_EQ(fr.close(), std::error_code());
  EXPECT_FALSE(fr);
  EXPECT_FALSE(is_open_number(r));
  EXPECT_EQ(fr.close(), std::errc::bad_file_descriptor);
  EXPECT_NO_THROW(fw.close_or_throw());
  EXPECT_FALSE(is_open_number(w));
}

TEST(FileDescriptor, DupIsAnIndependentCloexecDescriptorOfTheSameFile) {
  auto [r, w] = raw_pipe();
  FileDescriptor fr(r);
  FileDescriptor fw(w);
  FileDescriptor copy = fw.dup();
  ASSERT_TRUE(copy);
  EXPECT_NE(copy.get(), fw.get());
  EXPECT_EQ(fw.get(), w);
  EXPECT_NE(::fcntl(copy.get(), F_GETFD) & FD_CLOEXEC, 0);
  fw.reset();  // the duplicate keeps the pipe's write end open
  ASSERT_EQ(::write(copy.get(), "x", 1), 1);
  char c = 0;
  ASSERT_EQ(::read(fr.get(), &c, 1), 1);
  EXPECT_EQ(c, 'x');

  std::error_code ec;
  FileDescriptor none;
  EXPECT_FALSE(none.dup(ec));
  EXPECT_EQ(ec, std::errc::bad_file_descriptor);
  EXPECT_THROW((void)none.dup(), std::system_error);
}

TEST(FileDescriptor, OpenAddsCloexecAndReportsErrors) {
  FileDescriptor null = FileDescriptor::open("/dev/null", O_RDONLY);
  ASSERT_TRUE(null);
  EXPECT_NE(::fcntl(null.get(), F_GETFD) & FD_CLOEXEC, 0);
  std::error_code ec;
  FileDescriptor missing = FileDescriptor::open("/nonexistent/niox-no-such-file", O_RDONLY, 0, ec);
  EXPECT_FALSE(missing);
  EXPECT_EQ(ec, std::errc::no_such_file_or_directory);
  EXPECT_THROW(FileDescriptor::open("/nonexistent/niox-no-such-file", O_RDONLY), std::system_error);
}

// ---- Closing through the loop ---------------------------------------------------------------

class FileDescriptorLoopTest : public test::BackendTest {};

// A read pending on a descriptor closed through the loop completes once, with
// operation_aborted; a new descriptor that gets the same number at once sees only its own
// completions.
TEST_P(FileDescriptorLoopTest, ClosingThroughTheLoopAbortsOnceAndNothingStaleReachesTheNumber) {
  EventLoop loop(options());
  auto [a, peer_a] = test::loop_socket_pair();
  int old_calls = 0;
  std::error_code old_ec;
  loop.read(a.get(), ByteBuffer::allocate(16), [&](std::error_code ec, std::size_t, ByteBuffer) {
    ++old_calls;
    old_ec = ec;
  });
  loop.run_once();
  loop.run_once();  // the read is in the kernel (or armed) by now
  EXPECT_EQ(old_calls, 0);
  const int number = a.get();
  EXPECT_EQ(loop.close(std::move(a)), std::error_code());
  EXPECT_FALSE(a);  // NOLINT(bugprone-use-after-move): close() took it
  EXPECT_FALSE(is_open_number(number));

  // The lowest free number is reused by the next descriptor: take it before the aborted
  // completion was even reaped.
  auto [c, d] = test::loop_socket_pair();
  FileDescriptor* same = c.get() == number ? &c : d.get() == number ? &d : nullptr;
  FileDescriptor* other_end = same == &c ? &d : same == &d ? &c : nullptr;
  std::string got;
  int new_calls = 0;
  if (other_end != nullptr) {
    ASSERT_EQ(::write(other_end->get(), "new", 3), 3);
    loop.read(same->get(), ByteBuffer::allocate(8),
              [&](std::error_code ec, std::size_t n, ByteBuffer buf) {
                ++new_calls;
                EXPECT_FALSE(ec);
                EXPECT_EQ(n, 3u);
                buf.flip();
                got = std::string(buf.string_view());
              });
  } else {
    ADD_FAILURE() << "the closed number " << number << " was not reused";
  }
  ASSERT_TRUE(test::run_until(
      loop, [&] { return old_calls == 1 && (other_end == nullptr || new_calls == 1); }));
  for (int i = 0; i < 5; ++i) loop.run_once(1ms);
  EXPECT_EQ(old_calls, 1);
  EXPECT_EQ(old_ec, std::errc::operation_canceled);
  if (other_end != nullptr) {
    EXPECT_EQ(new_calls, 1);
    EXPECT_EQ(got, "new");
    EXPECT_EQ(loop.close(std::move(*same)), std::error_code());
  }
  EXPECT_EQ(loop.pending(), 0u);
}

// close() of an invalid (or moved-from) descriptor reports EBADF; release() aborts what is
// pending but leaves the descriptor open and owned by the caller.
TEST_P(FileDescriptorLoopTest, CloseOfNothingAndRelease) {
  EventLoop loop(options());
  EXPECT_EQ(loop.close(FileDescriptor()), std::errc::bad_file_descriptor);
  auto [a, b] = test::loop_socket_pair();
  int calls = 0;
  std::error_code first;
  loop.read(a.get(), ByteBuffer::allocate(8), [&](std::error_code ec, std::size_t, ByteBuffer) {
    ++calls;
    first = ec;
  });
  loop.run_once();
  loop.release(a);
  ASSERT_TRUE(test::run_until(loop, [&] { return calls == 1; }));
  EXPECT_EQ(first, std::errc::operation_canceled);
  ASSERT_TRUE(a);
  EXPECT_TRUE(is_open_number(a.get()));
  // Still usable with the loop afterwards.
  ASSERT_EQ(::write(b.get(), "k", 1), 1);
  std::size_t got = 0;
  loop.read(a.get(), ByteBuffer::allocate(8), [&](std::error_code ec, std::size_t n, ByteBuffer) {
    EXPECT_FALSE(ec);
    got = n;
  });
  ASSERT_TRUE(test::run_until(loop, [&] { return got == 1; }));
  EXPECT_EQ(loop.close(std::move(a)), std::error_code());
  EXPECT_EQ(calls, 1);
}

NIOX_INSTANTIATE_BACKENDS(FileDescriptorLoopTest);

}  // namespace
}  // namespace niox
