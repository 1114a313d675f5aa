/* mpi_collective_bench: the Open MPI peer of bench/run's collective workload. It measures
 * MPI_Allreduce (float, MPI_SUM, in place), MPI_Allgather and MPI_Bcast (root 0), with the
 * algorithms Open MPI chooses by itself, over its TCP transport:
 *
 *   mpirun --oversubscribe --mca pml ob1 --mca btl tcp,self -np N \
 *       mpi_collective_bench --op all_reduce
 *
 * (plus --allow-run-as-root as root). `--mca btl tcp,self` keeps ranks off shared memory, so
 * MPI moves its bytes through the kernel's TCP stack as Gloo and niox do; `--mca pml ob1` makes
 * sure the btl list applies: an Open MPI built with UCX may otherwise pick the UCX pml, which
 * brings its own shared-memory transports (Debian's configuration excludes it already).
 *
 * usage: mpi_collective_bench --op all_reduce|all_gather|broadcast [--min BYTES] [--max BYTES]
 *            [--iters K] [--warmup W]
 *
 * The same command line, output and checks as gloo_collective_bench, from collective_peer.h:
 * sizes double from --min (8) to --max (256 MiB), and rank 0 prints one line per size on stdout
 * and nothing else, `bytes=N us=T algbw_GBps=A busbw_GBps=B ok=1`. The exit status is 1 when a
 * check failed on any rank. Each call is timed alone, after a reset and a barrier: no rank's
 * reset falls inside another rank's timed call, where it would count (a rank still resetting
 * keeps the others waiting, and with more ranks than cores it takes a core from them).
 */
#define _GNU_SOURCE
#include "collective_peer.h"

#include <mpi.h>

#include <limits.h>

static struct collective_peer peer = {.program = "mpi_collective_bench"};

static void collective(size_t count) {
  int c = (int)count;
  switch (peer.a.op) {
    case ALL_REDUCE:
      MPI_Allreduce(MPI_IN_PLACE, peer.buf, c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      break;
    case ALL_GATHER:
      MPI_Allgather(peer.in, c, MPI_FLOAT, peer.buf, c, MPI_FLOAT, MPI_COMM_WORLD);
      break;
    case BROADCAST: MPI_Bcast(peer.buf, c, MPI_FLOAT, 0, MPI_COMM_WORLD); break;
  }
}

static void barrier(void) { MPI_Barrier(MPI_COMM_WORLD); }

static void max2(double v[2]) {
  MPI_Allreduce(MPI_IN_PLACE, v, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &peer.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &peer.nranks);
  if (!collective_parse_args(argc, argv, 0, &peer.a)) {
    if (peer.rank == 0) collective_usage(peer.program, 0);
    MPI_Finalize();
    return 2;
  }
  if (peer.a.max / sizeof(float) > INT_MAX) {
    if (peer.rank == 0) fprintf(stderr, "mpi_collective_bench: --max is beyond MPI's int counts\n");
    MPI_Finalize();
    return 2;
  }
  if (!collective_allocate(&peer)) {
    fprintf(stderr, "mpi_collective_bench: rank %d: out of memory for %zu bytes\n", peer.rank,
            peer.a.max);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const struct collective_hooks hooks = {collective, barrier, max2};
  int all_ok = collective_run(&peer, &hooks);
  free(peer.buf);
  free(peer.in);
  MPI_Finalize();
  return all_ok ? 0 : 1;
}
