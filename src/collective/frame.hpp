// The wire format of the collectives: every message is frames, each a 48-byte header and its
// body. Headers are in the host's byte order: the ranks of a communicator are assumed to share
// it (the rendezvous checks, through the magic number, and refuses a rank that does not).
//
//   0        4    5    6    7    8        12       16               24               32               40               48
//   | magic  |kind| op |type|red | seq    | root   | count          | offset         | length         | aux            | body...
//
//   kind   data, abort (body: the reason, text), hello, table, peer_hello (rendezvous)
//   seq    the link's count of frames in this direction: a lost or extra frame is a bad frame
//   count  the call's element count as the sender sees it (the whole buffer, or the block for
//          scatter / gather), compared with the receiver's call: a mismatch fails the call
//   offset the first byte of the body within the message; length the body's bytes
//   aux    abort: the rank the failure is about; hello: the job's options
#pragma once

#include <niox/collective/communicator.hpp>

#include <cstdint>
#include <cstring>

namespace niox::collective::detail {

inline constexpr std::uint32_t kFrameMagic = 0x3143584e;  // "NXC1" in little-endian memory

enum class FrameKind : std::uint8_t { data = 1, abort = 2, hello = 3, table = 4, peer_hello = 5 };

enum class Op : std::uint8_t {
  none = 0,
  barrier,
  broadcast,
  scatter,
  gather,
  all_gather,
  reduce,
  all_reduce,
  reduce_scatter,
  all_to_all,
  send_recv,
  rendezvous,
};
const char* to_string(Op op) noexcept;

struct FrameHeader {
  std::uint32_t magic = kFrameMagic;
  FrameKind kind = FrameKind::data;
  Op op = Op::none;
  DataType type = DataType::u8;
  ReduceOp redop = ReduceOp::sum;
  std::uint32_t seq = 0;
  std::int32_t root = -1;
  std::uint64_t count = 0;
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
  std::uint64_t aux = 0;
};
static_assert(sizeof(FrameHeader) == 48);

// Rendezvous bodies. Hosts are numeric addresses.
struct HelloBody {
  std::int32_t rank = 0;
  std::int32_t size = 0;
  std::uint32_t port = 0;  // where this rank accepts its peers
  std::uint32_t reserved = 0;
  std::uint64_t chunk_bytes = 0;
  std::uint64_t ring_threshold_bytes = 0;
  std::uint64_t job = 0;  // peer_hello: the job id the table gave
  char host[64] = {};
};
struct TableEntry {
  char host[64] = {};
  std::uint32_t port = 0;
  std::uint32_t reserved = 0;
};

}  // namespace niox::collective::detail
