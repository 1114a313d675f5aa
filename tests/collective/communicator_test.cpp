// Communicator: every operation x type x reduce op for 1, 2, 3, 4 and 7 ranks, checked against
// a direct computation; failures (mismatched calls, garbage, a silent rank, a killed rank) as
// errors; the launchers' conventions. In-process ranks are threads, each with a Communicator of
// its own on its own loop, on every backend; the process tests run niox-collective-run and,
// where it is installed, mpirun.
#include <niox/async/spawn.hpp>
#include <niox/collective/communicator.hpp>
#include <niox/loop/event_loop_group.hpp>

#include "collective/frame.hpp"
#include "support/backends.hpp"
#include "support/run_command.hpp"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <future>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

namespace niox::collective {
namespace {

using namespace std::chrono_literals;
using niox::test::BackendVariant;

// This test process's own loopback address, 127.P.Q.1 from its pid. ctest runs test processes
// side by side, and two of them can be handed the same free port (each closes its probe before
// its rank 0 binds): on one address the ranks of one test would join the other's rank 0.
const std::string& test_host() {
  static const std::string host = [] {
    const auto pid = static_cast<unsigned>(::getpid());
    return std::to_string(127) + "." + std::to_string((pid >> 8) & 0xffu) + "." +
           std::to_string(pid & 0xffu) + ".1";
  }();
  return host;
}

in_addr_t test_host_address() { return ::inet_addr(test_host().c_str()); }

// A port free on test_host() now.
std::uint16_t free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = test_host_address();
  socklen_t len = sizeof a;
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

// A blocking connection to test_host():port, retried every millisecond until something listens
// there or `stop` is set; -1 then.
int connect_when_listening(std::uint16_t port, const std::atomic<bool>& stop) {
  while (!stop) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = test_host_address();
    a.sin_port = htons(port);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) return fd;
    ::close(fd);
    std::this_thread::sleep_for(1ms);
  }
  return -1;
}

// Runs body(comm) on `n` ranks, one thread each; returns each rank's exception (or null).
std::vector<std::exception_ptr> run_ranks(int n, const CommunicatorOptions& options,
                                          const std::function<void(Communicator&)>& body,
                                          std::uint16_t port = 0) {
  if (port == 0) port = free_port();
  std::vector<std::exception_ptr> errors(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        Rendezvous rz;
        rz.rank = r;
        rz.size = n;
        rz.master_host = test_host();
        rz.master_port = port;
        Communicator comm(rz, options);
        body(comm);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

std::string what(const std::exception_ptr& e) {
  if (!e) return "no error";
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  }
}

void expect_no_errors(const std::vector<std::exception_ptr>& errors) {
  for (std::size_t r = 0; r < errors.size(); ++r)
    EXPECT_FALSE(errors[r]) << "rank " << r << ": " << what(errors[r]);
}

// ---- the matrix ------------------------------------------------------------------------------

// Inputs whose every combination is exact in every type: sums of at most 7 values under 8,
// products of 1s and 2s, and min / max over values of either sign where the type has one.
template <class T>
T input(int rank, std::size_t i, ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return static_cast<T>((rank + 1 + i) % 8);
    case ReduceOp::prod: return static_cast<T>(1 + (rank + i) % 2);
    default: {
      int v = static_cast<int>((rank * 31 + i * 17) % 100);
      if constexpr (std::is_signed_v<T> || std::is_floating_point_v<T>) v -= 50;
      return static_cast<T>(v);
    }
  }
}

template <class T>
T combined(int p, std::size_t i, ReduceOp op) {
  T acc = input<T>(0, i, op);
  for (int r = 1; r < p; ++r) {
    T x = input<T>(r, i, op);
    switch (op) {
      case ReduceOp::sum: acc = static_cast<T>(acc + x); break;
      case ReduceOp::prod: acc = static_cast<T>(acc * x); break;
      case ReduceOp::min: acc = x < acc ? x : acc; break;
      case ReduceOp::max: acc = acc < x ? x : acc; break;
    }
  }
  return acc;
}

template <class T>
std::vector<T> inputs(int rank, std::size_t n, ReduceOp op) {
  std::vector<T> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = input<T>(rank, i, op);
  return v;
}

// A value for (rank, index) that says where an element came from, for the moving operations.
template <class T>
T mark(int rank, std::size_t i) {
  return static_cast<T>((rank * 13 + i * 7) % 101);
}

constexpr ReduceOp kOps[] = {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max};

// Every operation on `T` for element counts `sizes`. The forms alternate: blocking, co_await
// (with a progress thread: from a coroutine), future.
template <class T>
void exercise(Communicator& comm, const std::vector<std::size_t>& sizes, bool progress_thread) {
  const int p = comm.size();
  const int r = comm.rank();
  int form = 0;
  auto run = [&](Task<void> t) {
    switch (form++ % 3) {
      case 0:
        if (progress_thread) {
          sync_wait(std::move(t));
        } else {
          comm.start(std::move(t)).get();
        }
        break;
      case 1: {
        auto outer = [](Task<void> inner) -> Task<void> { co_await inner; };
        if (progress_thread) {
          sync_wait(outer(std::move(t)));
        } else {
          comm.start(outer(std::move(t))).get();
        }
        break;
      }
      default: {
        Future f = comm.start(std::move(t));
        if (!progress_thread) comm.poll();
        f.get();
        break;
      }
    }
  };
  for (std::size_t n : sizes) {
    SCOPED_TRACE(::testing::Message() << "n=" << n << " type=" << to_string(data_type_of<T>()));
    for (ReduceOp op : kOps) {
      SCOPED_TRACE(to_string(op));
      // all_reduce
      auto v = inputs<T>(r, n, op);
      run(comm.async_all_reduce(std::span(v), op));
      for (std::size_t i = 0; i < n; ++i)
        ASSERT_EQ(v[i], combined<T>(p, i, op)) << "all_reduce " << i;
      // reduce, to two roots, out of place and in place
      for (int root : {0, p - 1}) {
        auto in = inputs<T>(r, n, op);
        std::vector<T> out(r == root ? n : 0);
        run(comm.async_reduce(std::span<const T>(in), std::span(out), op, root));
        if (r == root) {
          for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], combined<T>(p, i, op)) << "reduce";
        }
        for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(in[i], input<T>(r, i, op)) << "reduce's send";
      }
      {
        auto inout = inputs<T>(r, n, op);
        comm.reduce(std::span<const T>(inout), std::span(inout), op, 0);
        if (r == 0) {
          for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(inout[i], combined<T>(p, i, op));
        }
      }
      // reduce_scatter
      {
        auto in = inputs<T>(r, n, op);
        auto [first, count] = Communicator::block(n, p, r);
        std::vector<T> out(count);
        run(comm.async_reduce_scatter(std::span<const T>(in), std::span(out), op));
        for (std::size_t i = 0; i < count; ++i)
          ASSERT_EQ(out[i], combined<T>(p, first + i, op)) << "reduce_scatter";
      }
    }
    // broadcast from two roots
    for (int root : {0, p / 2}) {
      std::vector<T> v(n);
      for (std::size_t i = 0; i < n; ++i) v[i] = r == root ? mark<T>(root, i) : T{};
      run(comm.async_broadcast(std::span(v), root));
      for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(v[i], mark<T>(root, i)) << "broadcast";
    }
    // scatter and gather with the last rank as root
    const int root = p - 1;
    {
      std::vector<T> all(r == root ? n : 0);
      for (std::size_t i = 0; i < all.size(); ++i) all[i] = mark<T>(root, i);
      auto [first, count] = Communicator::block(n, p, r);
      std::vector<T> mine(count);
      run(comm.async_scatter(std::span<const T>(all), std::span(mine), root));
      for (std::size_t i = 0; i < count; ++i)
        ASSERT_EQ(mine[i], mark<T>(root, first + i)) << "scatter";
    }
    {
      auto [first, count] = Communicator::block(n, p, r);
      std::vector<T> mine(count);
      for (std::size_t i = 0; i < count; ++i) mine[i] = mark<T>(r, first + i);
      std::vector<T> all(r == root ? n : 0);
      run(comm.async_gather(std::span<const T>(mine), std::span(all), root));
      if (r == root) {
        for (int k = 0; k < p; ++k) {
          auto [f, c] = Communicator::block(n, p, k);
          for (std::size_t i = f; i < f + c; ++i) ASSERT_EQ(all[i], mark<T>(k, i)) << "gather";
        }
      }
      // all_gather
      std::vector<T> everyone(n);
      run(comm.async_all_gather(std::span<const T>(mine), std::span(everyone)));
      for (int k = 0; k < p; ++k) {
        auto [f, c] = Communicator::block(n, p, k);
        for (std::size_t i = f; i < f + c; ++i)
          ASSERT_EQ(everyone[i], mark<T>(k, i)) << "all_gather";
      }
    }
    // all_to_all: n elements per pair
    {
      std::vector<T> send(n * p);
      for (std::size_t i = 0; i < send.size(); ++i) send[i] = mark<T>(r, i);
      std::vector<T> recv(n * p);
      run(comm.async_all_to_all(std::span<const T>(send), std::span(recv)));
      for (int k = 0; k < p; ++k)
        for (std::size_t i = 0; i < n; ++i)
          ASSERT_EQ(recv[k * n + i], mark<T>(k, r * n + i)) << "all_to_all from " << k;
    }
    // send / recv around the ring: the even ranks send first, so that it also works for
    // messages larger than the sockets' buffers.
    if (p > 1) {
      std::vector<T> out(n);
      for (std::size_t i = 0; i < n; ++i) out[i] = mark<T>(r, i);
      std::vector<T> in(n);
      const int to = (r + 1) % p;
      const int from = (r + p - 1) % p;
      if (r % 2 == 0) {
        comm.send(std::span<const T>(out), to);
        comm.recv(std::span(in), from);
      } else {
        comm.recv(std::span(in), from);
        comm.send(std::span<const T>(out), to);
      }
      for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(in[i], mark<T>(from, i)) << "recv";
    }
    run(comm.async_barrier());
  }
}

class CommunicatorMatrixTest
    : public ::testing::TestWithParam<std::tuple<BackendVariant, int, bool>> {
 protected:
  void SetUp() override {
    if (auto why = niox::test::backend_skip_reason(std::get<0>(GetParam()).kind))
      GTEST_SKIP() << *why;
  }
  CommunicatorOptions options() const {
    const BackendVariant& b = std::get<0>(GetParam());
    CommunicatorOptions o;
    o.loop_options.backend = b.kind;
    o.loop_options.io_uring_readiness_only = b.io_uring_readiness_only;
    o.loop_options.multishot_receive = b.multishot_receive;
    // Small chunks and a low crossover, so that small counts take every path: several
    // chunks per message, both all_reduce algorithms, the pipelined broadcast.
    o.chunk_bytes = 64;
    o.ring_threshold_bytes = 96;
    o.timeout = 60s;
    o.progress_thread = std::get<2>(GetParam());
    return o;
  }
};

TEST_P(CommunicatorMatrixTest, EveryOperationTypeAndReduceOpMatchesADirectComputation) {
  const int p = std::get<1>(GetParam());
  // 0, 1, a count no rank count divides, and one that takes many chunks and the ring.
  const std::vector<std::size_t> sizes = {0, 1, 37, 301};
  const bool pt = std::get<2>(GetParam());
  auto errors = run_ranks(p, options(), [&](Communicator& comm) {
    EXPECT_EQ(comm.size(), p);
    exercise<std::uint8_t>(comm, sizes, pt);
    exercise<std::int32_t>(comm, sizes, pt);
    exercise<std::int64_t>(comm, sizes, pt);
    exercise<float>(comm, sizes, pt);
    exercise<double>(comm, sizes, pt);
  });
  expect_no_errors(errors);
}

TEST_P(CommunicatorMatrixTest, LargeMessagesWithDefaultChunksArriveWhole) {
  const int p = std::get<1>(GetParam());
  CommunicatorOptions o = options();
  o.chunk_bytes = CommunicatorOptions{}.chunk_bytes;
  o.ring_threshold_bytes = CommunicatorOptions{}.ring_threshold_bytes;
  auto errors = run_ranks(p, o, [&](Communicator& comm) {
    const std::size_t n = (3 << 20) / 4 + 3;  // 3 MiB of floats and a bit: chunks and a tail
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>((comm.rank() + i) % 16);
    comm.all_reduce(std::span(v), ReduceOp::sum);
    for (std::size_t i = 0; i < n; ++i) {
      float want = 0;
      for (int r = 0; r < p; ++r) want += static_cast<float>((r + i) % 16);
      ASSERT_EQ(v[i], want) << i;
    }
    std::vector<float> b(n, comm.rank() == 0 ? 2.5f : 0.0f);
    comm.broadcast(std::span(b), 0);
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(b[i], 2.5f) << i;
  });
  expect_no_errors(errors);
}

// Sums of floats of every magnitude depend on the order they are added in: every rank must
// still end with the same bits, whichever algorithm the size takes (recursive doubling,
// halving and doubling, the ring).
TEST_P(CommunicatorMatrixTest, AllReduceLeavesTheSameBitsOnEveryRank) {
  const int p = std::get<1>(GetParam());
  auto errors = run_ranks(p, options(), [&](Communicator& comm) {
    for (std::size_t n : {std::size_t{5}, std::size_t{37}, std::size_t{301}, std::size_t{4099}}) {
      std::vector<float> v(n);
      for (std::size_t i = 0; i < n; ++i) {
        v[i] = std::ldexp(std::sin(static_cast<float>(comm.rank() * 7919 + i)),
                          static_cast<int>((i + comm.rank()) % 41) - 20);
      }
      comm.all_reduce(std::span(v), ReduceOp::sum);
      std::vector<float> all(n * static_cast<std::size_t>(p));
      comm.all_gather(std::span<const float>(v), std::span(all));
      for (int r = 0; r < p; ++r) {
        ASSERT_EQ(std::memcmp(all.data() + r * n, v.data(), n * sizeof(float)), 0)
            << n << " floats: rank " << r << " and rank " << comm.rank() << " differ";
      }
    }
  });
  expect_no_errors(errors);
}

std::string matrix_name(
    const ::testing::TestParamInfo<std::tuple<BackendVariant, int, bool>>& info) {
  return std::string(std::get<0>(info.param).name) + "_" + std::to_string(std::get<1>(info.param)) +
         "_ranks" + (std::get<2>(info.param) ? "_progress_thread" : "_caller_driven");
}

INSTANTIATE_TEST_SUITE_P(Backends, CommunicatorMatrixTest,
                         ::testing::Combine(::testing::ValuesIn(niox::test::all_backends()),
                                            ::testing::Values(1, 2, 3, 4, 7), ::testing::Bool()),
                         matrix_name);

// ---- failures -------------------------------------------------------------------------------

class CommunicatorFailureTest : public niox::test::BackendTest {
 protected:
  CommunicatorOptions options() const {
    CommunicatorOptions o;
    o.loop_options = niox::test::BackendTest::options();
    o.timeout = 60s;
    return o;
  }
};

CollectiveError collective_error(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const CollectiveError& c) {
    return c;
  } catch (const std::exception& x) {
    ADD_FAILURE() << "not a CollectiveError: " << x.what();
  }
  return CollectiveError(std::error_code(), "", -2);
}

TEST_P(CommunicatorFailureTest, MismatchedCountsFailEveryRankAndNameTheRank) {
  auto errors = run_ranks(3, options(), [](Communicator& comm) {
    std::vector<float> v(comm.rank() == 1 ? 10 : 20, 1.0f);
    comm.all_reduce(std::span(v), ReduceOp::sum);
  });
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(errors[r]) << "rank " << r << " did not fail";
    CollectiveError e = collective_error(errors[r]);
    EXPECT_EQ(e.code(), std::errc::invalid_argument) << e.what();
    EXPECT_NE(std::string(e.what()).find("mismatched calls"), std::string::npos) << e.what();
  }
  // A rank that receives from rank 1 sees its call and names it; the others hear of it.
  for (int r : {0, 2}) {
    CollectiveError e = collective_error(errors[r]);
    EXPECT_TRUE(e.rank() == 1 || std::string(e.what()).find("rank 1 called") != std::string::npos)
        << e.what();
  }
}

TEST_P(CommunicatorFailureTest, MismatchedOperationsAndTypesFailEveryRank) {
  auto errors = run_ranks(2, options(), [](Communicator& comm) {
    if (comm.rank() == 0) {
      std::vector<float> v(8, 1.0f);
      comm.all_reduce(std::span(v), ReduceOp::sum);
    } else {
      std::vector<double> v(8, 1.0);
      comm.broadcast(std::span(v), 0);
    }
  });
  // Rank 1 receives rank 0's frame and sees both calls; rank 0 (broadcast's root only sends)
  // hears it from rank 1.
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(errors[r]) << "rank " << r << " did not fail";
    CollectiveError e = collective_error(errors[r]);
    EXPECT_EQ(e.code(), std::errc::invalid_argument) << e.what();
    EXPECT_NE(std::string(e.what()).find("rank 0 called all_reduce of 8 float32 (sum) where rank 1 "
                                         "called broadcast of 8 float64 with root 0"),
              std::string::npos)
        << e.what();
  }
}

TEST_P(CommunicatorFailureTest, AnErrorClosesTheCommunicatorForEveryLaterCall) {
  auto errors = run_ranks(2, options(), [](Communicator& comm) {
    std::vector<std::int32_t> v(comm.rank() == 0 ? 4 : 5);
    EXPECT_THROW(comm.all_reduce(std::span(v), ReduceOp::max), CollectiveError);
    std::vector<std::int32_t> w(4);
    try {
      comm.all_reduce(std::span(w), ReduceOp::max);
      ADD_FAILURE() << "a call after the error succeeded";
    } catch (const CollectiveError& e) {
      EXPECT_EQ(e.code(), std::errc::invalid_argument) << e.what();
    }
  });
  expect_no_errors(errors);
}

TEST_P(CommunicatorFailureTest, ARankThatStopsMovingTimesOutTheOthersNamingIt) {
  CommunicatorOptions o = options();
  o.timeout = 300ms;
  std::atomic<int> ended{0};
  auto errors = run_ranks(3, o, [&](Communicator& comm) {
    if (comm.rank() == 2) {
      // Alive and connected, but it never calls: the others' all_reduce waits on it.
      for (int i = 0; i < 6000 && ended < 2; ++i) std::this_thread::sleep_for(10ms);
      return;
    }
    std::vector<double> v(1000, 1.0);
    try {
      comm.all_reduce(std::span(v), ReduceOp::sum);
    } catch (...) {
      ++ended;
      throw;
    }
    ++ended;
  });
  // Rank 1 waits on rank 2 and names it; rank 0 waits on rank 1 (recursive doubling among
  // three ranks), and its own watchdog may fire first, naming the rank it waits on.
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(errors[r]) << "rank " << r << " did not fail";
    CollectiveError e = collective_error(errors[r]);
    EXPECT_EQ(e.code(), std::errc::timed_out) << e.what();
    EXPECT_NE(e.rank(), r) << e.what();
  }
  EXPECT_NE(std::string(collective_error(errors[1]).what()).find("rank 2"), std::string::npos)
      << collective_error(errors[1]).what();
  EXPECT_FALSE(errors[2]);
}

TEST_P(CommunicatorFailureTest, GarbageOnALinkIsABadFrameNamingTheSender) {
  const std::uint16_t port = free_port();
  std::exception_ptr error;
  std::thread rank0([&] {
    try {
      Rendezvous rz;
      rz.rank = 0;
      rz.size = 2;
      rz.master_host = test_host();
      rz.master_port = port;
      Communicator comm(rz, options());
      std::vector<float> v(100, 1.0f);
      comm.all_reduce(std::span(v), ReduceOp::sum);
    } catch (...) {
      error = std::current_exception();
    }
  });
  // Rank 1 by hand: a proper hello, then bytes that are not a frame, on the connection it
  // writes its frames on. Rank 0's connection to it lands in the backlog of a listener that
  // never accepts.
  std::atomic<bool> never{false};
  int fd = connect_when_listening(port, never);
  ASSERT_GE(fd, 0);
  int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof at;
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&at), sizeof at), 0);
  ASSERT_EQ(::listen(listener, 4), 0);
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&at), &len), 0);
  detail::FrameHeader h;
  h.kind = detail::FrameKind::hello;
  detail::HelloBody hello;
  hello.rank = 1;
  hello.size = 2;
  hello.port = ntohs(at.sin_port);
  hello.chunk_bytes = CommunicatorOptions{}.chunk_bytes;
  hello.ring_threshold_bytes = CommunicatorOptions{}.ring_threshold_bytes;
  std::strcpy(hello.host, "127.0.0.1");
  h.length = sizeof hello;
  ASSERT_EQ(::send(fd, &h, sizeof h, MSG_NOSIGNAL), static_cast<ssize_t>(sizeof h));
  ASSERT_EQ(::send(fd, &hello, sizeof hello, MSG_NOSIGNAL), static_cast<ssize_t>(sizeof hello));
  std::string junk(200, 'x');
  ASSERT_EQ(::send(fd, junk.data(), junk.size(), MSG_NOSIGNAL), 200);
  rank0.join();
  ::close(fd);
  ::close(listener);
  ASSERT_TRUE(error);
  CollectiveError e = collective_error(error);
  EXPECT_EQ(e.code(), std::errc::protocol_error) << e.what();
  EXPECT_EQ(e.rank(), 1) << e.what();
  EXPECT_NE(std::string(e.what()).find("not a niox collective frame"), std::string::npos)
      << e.what();
}

TEST_P(CommunicatorFailureTest, TheRendezvousDropsAStrangerAndGoesOn) {
  const std::uint16_t port = free_port();
  std::atomic<bool> stop{false};
  std::thread stranger([&] {
    // Knocks on the master's port with bytes that are not a hello.
    int fd = connect_when_listening(port, stop);
    if (fd >= 0) {
      ::send(fd, "GET / HTTP/1.0\r\n\r\n", 18, MSG_NOSIGNAL);
      ::close(fd);
    }
  });
  auto errors = run_ranks(
      3, options(),
      [](Communicator& comm) {
        std::vector<std::int64_t> v(5, comm.rank());
        comm.all_reduce(std::span(v), ReduceOp::sum);
        EXPECT_EQ(v[0], 3);
      },
      port);
  stop = true;
  stranger.join();
  expect_no_errors(errors);
}

TEST_P(CommunicatorFailureTest, TheRendezvousDropsASilentStrangerAndGoesOn) {
  const std::uint16_t port = free_port();
  CommunicatorOptions o = options();
  o.connect_timeout = 2s;  // a stranger gets a quarter of it to say hello
  std::atomic<bool> done{false};
  std::thread stranger([&] {
    // Connects first and says nothing until the ranks are done.
    int fd = connect_when_listening(port, done);
    while (!done) std::this_thread::sleep_for(5ms);
    if (fd >= 0) ::close(fd);
  });
  std::this_thread::sleep_for(50ms);  // rank 0 listens and the stranger gets in first
  std::vector<std::exception_ptr> errors(2);
  auto join = [&](int r) {
    try {
      Rendezvous rz;
      rz.rank = r;
      rz.size = 2;
      rz.master_host = test_host();
      rz.master_port = port;
      Communicator comm(rz, o);
      comm.barrier();
    } catch (...) {
      errors[r] = std::current_exception();
    }
  };
  std::thread rank0(join, 0);
  std::this_thread::sleep_for(100ms);
  join(1);
  rank0.join();
  done = true;
  stranger.join();
  expect_no_errors(errors);
}

TEST_P(CommunicatorFailureTest, TheRendezvousRefusesADuplicateRankOrAnotherWorldSize) {
  for (int twist = 0; twist < 2; ++twist) {
    const std::uint16_t port = free_port();
    std::vector<std::exception_ptr> errors(2);
    std::vector<std::thread> ts;
    for (int r = 0; r < 2; ++r) {
      ts.emplace_back([&, r] {
        try {
          Rendezvous rz;
          rz.rank = r;
          rz.size = 2;
          rz.master_host = test_host();
          rz.master_port = port;
          if (r == 1 && twist == 1) rz.size = 3;
          CommunicatorOptions o = options();
          o.connect_timeout = 20s;
          if (r == 1 && twist == 0) o.chunk_bytes = 1024;
          Communicator comm(rz, o);
        } catch (...) {
          errors[r] = std::current_exception();
        }
      });
    }
    for (auto& t : ts) t.join();
    for (int r = 0; r < 2; ++r) {
      ASSERT_TRUE(errors[r]) << "rank " << r << " joined";
      CollectiveError e = collective_error(errors[r]);
      EXPECT_EQ(e.code(), std::errc::invalid_argument) << e.what();
      EXPECT_NE(std::string(e.what()).find(twist == 0 ? "chunk_bytes" : "world has 3"),
                std::string::npos)
          << e.what();
    }
  }
}

TEST_P(CommunicatorFailureTest, TheRendezvousTimesOutWhenARankNeverComes) {
  CommunicatorOptions o = options();
  o.connect_timeout = 300ms;
  Rendezvous rz;
  rz.rank = 0;
  rz.size = 3;
  rz.master_host = test_host();
  rz.master_port = free_port();
  try {
    Communicator comm(rz, o);
    FAIL() << "joined without the others";
  } catch (const CollectiveError& e) {
    EXPECT_EQ(e.code(), std::errc::timed_out) << e.what();
    EXPECT_NE(std::string(e.what()).find("0 of its 2 peers"), std::string::npos) << e.what();
  }
}

TEST_P(CommunicatorFailureTest, CloseFailsAPendingOperationAndTellsThePeer) {
  std::atomic<Communicator*> zero{nullptr};
  auto errors = run_ranks(2, options(), [&](Communicator& comm) {
    std::vector<float> v(16);
    if (comm.rank() == 0) {
      auto f = comm.start(comm.async_recv(std::span(v), 1));
      comm.close();
      try {
        f.get();
        ADD_FAILURE() << "recv after close succeeded";
      } catch (const CollectiveError& e) {
        EXPECT_EQ(e.code(), std::errc::operation_canceled) << e.what();
      }
      return;
    }
    try {
      comm.recv(std::span(v), 0);
      ADD_FAILURE() << "recv from a closed rank succeeded";
    } catch (const CollectiveError& e) {
      EXPECT_EQ(e.rank(), 0) << e.what();
    }
  });
  expect_no_errors(errors);
}

TEST_P(CommunicatorFailureTest, BadArgumentsFailTheCallOnEveryRank) {
  auto errors = run_ranks(2, options(), [](Communicator& comm) {
    std::vector<float> v(6);
    std::vector<float> w(6);
    if (comm.rank() == 0) {
      // 7 elements cannot be split evenly for all_to_all among 2.
      std::vector<float> odd(7);
      EXPECT_THROW(comm.all_to_all(std::span<const float>(odd), std::span(odd)), CollectiveError);
    } else {
      EXPECT_THROW(comm.all_to_all(std::span<const float>(v), std::span(w)), CollectiveError);
    }
  });
  expect_no_errors(errors);
  auto errors2 = run_ranks(1, options(), [](Communicator& comm) {
    std::vector<float> v(6);
    EXPECT_THROW(comm.broadcast(std::span(v), 3), CollectiveError);
  });
  expect_no_errors(errors2);
}

TEST_P(CommunicatorFailureTest, TheBlockingFormsRefuseAnEventLoopThread) {
  CommunicatorOptions o = options();
  o.progress_thread = true;
  auto errors = run_ranks(1, o, [](Communicator& comm) {
    std::promise<bool> threw;
    comm.loop().execute([&] {
      try {
        comm.barrier();
        threw.set_value(false);
      } catch (const BlockingOperationException&) {
        threw.set_value(true);
      }
    });
    EXPECT_TRUE(threw.get_future().get());
    comm.barrier();  // still usable
  });
  expect_no_errors(errors);
}

TEST_P(CommunicatorFailureTest, ACallerDrivenCommunicatorRefusesOtherThreads) {
  std::atomic<bool> checked{false};
  auto errors = run_ranks(2, options(), [&](Communicator& comm) {
    std::vector<float> v(4, 1.0f);
    if (comm.rank() == 1) {
      while (!checked) std::this_thread::sleep_for(1ms);
      comm.send(std::span<const float>(v), 0);
      return;
    }
    // Pending until rank 1 sends, which it does once the other thread has tried.
    Future f = comm.start(comm.async_recv(std::span(v), 1));
    std::thread other([&] {
      EXPECT_THROW(comm.barrier(), std::logic_error);
      EXPECT_THROW(f.wait(), std::logic_error);
      checked = true;
    });
    other.join();
    // Its own thread may not sync_wait a Task either: nobody would drive the loop meanwhile.
    EXPECT_THROW(sync_wait(comm.async_barrier()), std::logic_error);
    f.get();
  });
  expect_no_errors(errors);
}

TEST_P(CommunicatorFailureTest, OperationsCoAwaitedOnTheCallersOwnLoop) {
  // Each rank on a loop of the test's, its operations awaited by a coroutine running there.
  const std::uint16_t port = free_port();
  std::vector<std::exception_ptr> errs(3);
  std::vector<std::thread> ts;
  for (int r = 0; r < 3; ++r) {
    ts.emplace_back([&, r] {
      try {
        EventLoopGroup::Options go;
        go.threads = 1;
        go.loop = options().loop_options;
        EventLoopGroup group(go);
        CommunicatorOptions o = options();
        o.loop = &group.loop(0);
        Rendezvous rz;
        rz.rank = r;
        rz.size = 3;
        rz.master_host = test_host();
        rz.master_port = port;
        Communicator comm(rz, o);
        auto body = [](Communicator& c) -> Task<std::int64_t> {
          std::vector<std::int64_t> v(10, c.rank() + 1);
          co_await c.async_all_reduce(std::span(v), ReduceOp::prod);
          co_await c.async_barrier();
          co_return v[9];
        };
        std::promise<std::int64_t> got;
        co_spawn(group.loop(0), body(comm), [&](std::exception_ptr e, std::int64_t v) {
          if (e) {
            got.set_exception(e);
          } else {
            got.set_value(v);
          }
        });
        EXPECT_EQ(got.get_future().get(), 6);
      } catch (...) {
        errs[r] = std::current_exception();
      }
    });
  }
  for (auto& t : ts) t.join();
  expect_no_errors(errs);
}

NIOX_INSTANTIATE_BACKENDS(CommunicatorFailureTest);

// ---- launchers ------------------------------------------------------------------------------

TEST(RendezvousTest, ReadsEachLaunchersVariables) {
  struct Env {
    const char* rank;
    const char* size;
  };
  const Env conventions[] = {{"RANK", "WORLD_SIZE"},
                             {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                             {"PMI_RANK", "PMI_SIZE"},
                             {"SLURM_PROCID", "SLURM_NTASKS"}};
  auto clear = [&] {
    for (auto& c : conventions) {
      ::unsetenv(c.rank);
      ::unsetenv(c.size);
    }
  };
  ::setenv("MASTER_ADDR", "10.1.2.3", 1);
  ::setenv("MASTER_PORT", "29500", 1);
  for (auto& c : conventions) {
    clear();
    ::setenv(c.rank, "3", 1);
    ::setenv(c.size, "8", 1);
    Rendezvous rz = Rendezvous::from_environment();
    EXPECT_EQ(rz.rank, 3) << c.rank;
    EXPECT_EQ(rz.size, 8) << c.size;
    EXPECT_EQ(rz.master_host, "10.1.2.3");
    EXPECT_EQ(rz.master_port, 29500);
  }
  clear();
  EXPECT_THROW(Rendezvous::from_environment(), std::invalid_argument);
  ::setenv("RANK", "8", 1);
  ::setenv("WORLD_SIZE", "8", 1);
  EXPECT_THROW(Rendezvous::from_environment(), std::invalid_argument);
  ::setenv("RANK", "1", 1);
  ::unsetenv("MASTER_PORT");
  EXPECT_THROW(Rendezvous::from_environment(), std::invalid_argument);
  clear();
  ::unsetenv("MASTER_ADDR");
}

#if defined(NIOX_COLLECTIVE_RUN_PROGRAM) && defined(NIOX_COLLECTIVE_TEST_RANK_PROGRAM)

class CollectiveProcessTest : public niox::test::BackendTest {
 protected:
  std::string env() const {
    return "NIOX_BACKEND=" + std::string(to_string(GetParam().kind)) + " ";
  }
  // The launcher, its rank 0 on this test process's own address (see test_host()).
  static std::string launcher() {
    return std::string(NIOX_COLLECTIVE_RUN_PROGRAM) + " --master-addr " + test_host() + " ";
  }
};

TEST_P(CollectiveProcessTest, NioxCollectiveRunStartsEveryRank) {
  int status = -1;
  std::string out = niox::test::run_command(
      env() + launcher() + "-n 4 " NIOX_COLLECTIVE_TEST_RANK_PROGRAM " check 2>&1", &status);
  EXPECT_EQ(status, 0) << out;
  for (int r = 0; r < 4; ++r)
    EXPECT_NE(out.find("rank " + std::to_string(r) + " ok"), std::string::npos) << out;
}

TEST_P(CollectiveProcessTest, ARankKilledMidAllReduceFailsTheOthersNamingIt) {
  int status = -1;
  // A timeout far above what failing takes: the others must learn of the death from the
  // links, and the launcher's grace is longer still, so that it never ends them itself.
  std::string out = niox::test::run_command(
      env() + launcher() +
          "--grace 120 -n 3 " NIOX_COLLECTIVE_TEST_RANK_PROGRAM " die 1 30000 2>&1",
      &status);
  EXPECT_NE(status, 0) << out;
  EXPECT_NE(out.find("rank 1 was killed by signal 9"), std::string::npos) << out;
  for (int r : {0, 2}) {
    std::string line = "rank " + std::to_string(r) + " failed: ";
    auto at = out.find(line);
    ASSERT_NE(at, std::string::npos) << out;
    auto end = out.find('\n', at);
    EXPECT_NE(out.substr(at, end - at).find("[rank 1]"), std::string::npos) << out;
  }
  EXPECT_EQ(out.find("terminating"), std::string::npos) << out;
}

TEST_P(CollectiveProcessTest, TheTrainingExampleAgreesAcrossRanksAndWithOneProcess) {
#ifdef NIOX_COLLECTIVE_TRAIN_PROGRAM
  int status = -1;
  std::string out = niox::test::run_command(
      env() + launcher() + "-n 3 " NIOX_COLLECTIVE_TRAIN_PROGRAM " --epochs 30 2>&1", &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find("identical bit for bit"), std::string::npos) << out;
#else
  GTEST_SKIP() << "the examples are not built";
#endif
}

TEST_P(CollectiveProcessTest, OpenMpisMpirunStartsTheRanks) {
  if (!niox::test::have_command("mpirun")) GTEST_SKIP() << "mpirun (Open MPI) is not installed";
  const std::string port = std::to_string(free_port());
  int status = -1;
  std::string out = niox::test::run_command(
      "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 " + env() +
          "mpirun --oversubscribe -np 3 -x NIOX_BACKEND -x MASTER_ADDR=" + test_host() +
          " -x MASTER_PORT=" + port + " " NIOX_COLLECTIVE_TEST_RANK_PROGRAM " check 2>&1",
      &status);
  EXPECT_EQ(status, 0) << out;
  for (int r = 0; r < 3; ++r)
    EXPECT_NE(out.find("rank " + std::to_string(r) + " ok"), std::string::npos) << out;
}

// A process's loop takes no variant options: the two backends.
INSTANTIATE_TEST_SUITE_P(Backends, CollectiveProcessTest,
                         ::testing::Values(niox::test::all_backends().front(),
                                           niox::test::all_backends().back()),
                         niox::test::backend_test_name);

#endif

}  // namespace
}  // namespace niox::collective
