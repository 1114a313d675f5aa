// A rank for the collective tests that run real processes (communicator_test.cpp), started
// by niox-collective-run or mpirun:
//
//   niox_collective_test_rank check            every operation once, each result checked
//   niox_collective_test_rank die VICTIM MS    rank VICTIM kills itself (SIGKILL) in the middle
//                                              of a large all_reduce; the others must fail
//                                              with a CollectiveError, their timeout MS
//
// Prints "rank R ok" or "rank R failed: WHAT [rank X]" on stdout; exit status 0, or 3 after a
// CollectiveError, or 1 for a wrong result.
#include <niox/collective/communicator.hpp>

#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

using niox::collective::CollectiveError;
using niox::collective::Communicator;
using niox::collective::CommunicatorOptions;
using niox::collective::ReduceOp;

namespace {

bool check_all(Communicator& comm) {
  const int p = comm.size();
  const int r = comm.rank();
  std::vector<double> v(1000);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(r + i);
  comm.all_reduce(std::span(v), ReduceOp::sum);
  for (std::size_t i = 0; i < v.size(); ++i)
    if (v[i] != static_cast<double>(p * (p - 1) / 2 + p * static_cast<int>(i))) return false;
  std::vector<std::int32_t> b(77, r == 0 ? 5 : 0);
  comm.broadcast(std::span(b), 0);
  for (auto x : b)
    if (x != 5) return false;
  std::vector<std::int64_t> all(p * 3);
  std::vector<std::int64_t> mine(3, r);
  comm.all_gather(std::span<const std::int64_t>(mine), std::span(all));
  for (int i = 0; i < p * 3; ++i)
    if (all[i] != i / 3) return false;
  comm.barrier();
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "check";
  int rank = -1;
  try {
    CommunicatorOptions options;
    int victim = -1;
    if (mode == "die" && argc > 3) {
      victim = std::atoi(argv[2]);
      options.timeout = std::chrono::milliseconds(std::atoi(argv[3]));
    }
    Communicator comm = Communicator::from_environment(options);
    rank = comm.rank();
    if (mode == "check") {
      if (!check_all(comm)) {
        std::printf("rank %d wrong result\n", rank);
        return 1;
      }
    } else if (mode == "die") {
      std::vector<float> big(16 << 20, 1.0f);
      if (rank == victim) {
        auto f = comm.start(comm.async_all_reduce(std::span(big), ReduceOp::sum));
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
        ::raise(SIGKILL);
      }
      // Several rounds, so that the victim dies in one of them whatever the scheduling.
      for (int i = 0; i < 1000; ++i) comm.all_reduce(std::span(big), ReduceOp::sum);
      std::printf("rank %d finished although rank %d died\n", rank, victim);
      return 1;
    }
    std::printf("rank %d ok\n", rank);
    return 0;
  } catch (const CollectiveError& e) {
    std::printf("rank %d failed: %s [rank %d]\n", rank, e.what(), e.rank());
    return 3;
  } catch (const std::exception& e) {
    std::printf("rank %d error: %s\n", rank, e.what());
    return 1;
  }
}
