// niox::collective from the installed package: a world of one rank.
#include <niox/collective/communicator.hpp>

#include <cstdio>
#include <span>
#include <vector>

int main() {
  niox::collective::Rendezvous one;  // rank 0 of 1
  niox::collective::Communicator comm(one);
  std::vector<int> v{1, 2, 3};
  comm.all_reduce(std::span(v), niox::collective::ReduceOp::sum);
  std::printf("collective: %d rank(s), %d %d %d\n", comm.size(), v[0], v[1], v[2]);
  return v == std::vector<int>{1, 2, 3} ? 0 : 1;
}
