// The two ends of one transfer, without the I/O: what to send, and what to do with what arrives.
//
// Sender:
//   auto plan = prepare_send(path, ec);            // opens, hashes (XXH3-64) and encodes the header
//   write(plan.header); send_file(plan.fd, 0, plan.size);   // header, then the body zero-copy
//   read reply_size bytes -> check_reply(bytes)    // the receiver's verdict, as an error_code
// or, with the checksum as a trailer (no hashing pass before the first byte leaves):
//   auto plan = prepare_send(path, ec, limits, ChecksumPlacement::trailer);
//   write(plan.header);
//   for each chunk in order: plan.hash_chunk(offset, n); send_file(plan.fd, offset, n);
//   write(plan.trailer());
//
// Receiver:
//   TransferReceiver rx(out_path, limits);
//   while (rx.phase() == Phase::header) { read into buf; rx.on_header_bytes(buf); }
//   rx.reserve_body();                             // no room for the body fails here; disk for its first part
//   rx.on_body_bytes(buf);                         // body bytes that came with the header
//   while (rx.body_remaining() > 0) {
//     rx.reserve_body();                           // the next part, a step ahead of what arrived
//     n = transfer_from(socket -> rx.fd() at rx.body_offset()); rx.on_body_spliced(n);
//   }
//   while (rx.phase() == Phase::trailer) { read rx.trailer_missing() bytes; rx.on_trailer_bytes(buf); }
//   write(encode_reply(rx.finish(ec)));            // verifies, then names or removes the file
//   (peer gone, or any error: rx.abort())          // the partial file is removed
#pragma once

#include "output_file.hpp"
#include "transfer_protocol.hpp"
#include "checksum.hpp"

#include <niox/base/file_descriptor.hpp>
#include <niox/buffer/byte_buffer.hpp>

#include <array>
#include <memory>
#include <cstdint>
#include <string>
#include <system_error>

namespace niox::transfer {

// Where the sender puts the checksum (see transfer_protocol.hpp): in the header, which needs a
// whole pass over the file before sending, or in a trailer after the body, hashed chunk by chunk
// as the body leaves.
enum class ChecksumPlacement : std::uint8_t { header, trailer };

struct SendPlan {
  FileDescriptor fd;  // owned by the plan, closed with it; borrowed by send_file
  std::uint64_t size = 0;
  TransferHeader header;
  ByteBuffer header_bytes;  // encode_header(header): send first

  // Trailer placement: adds [offset, offset + n) of the file to the checksum. Chunks must come
  // in order and without gaps (offset == bytes_hashed()), each before it is sent. Errors: the
  // errno of the read, io_error if the file ended early, invalid_argument out of order.
  std::error_code hash_chunk(std::uint64_t offset, std::uint64_t n);
  std::uint64_t bytes_hashed() const noexcept { return hash.total_length(); }
  // Trailer placement, once the whole body was hashed: the trailer to send after the body.
  ByteBuffer trailer() const { return encode_trailer(hash.digest()); }

  Checksum hash;      // trailer placement: over the body hashed so far
  FileHasher hasher;  // reads fd for hash_chunk

  SendPlan() = default;  // not an aggregate: `return {}` is an empty plan
};

// Opens `path` (a regular file), hashes it and builds the header, the name being the path's last
// component. Errors: the open/read errno, std::errc::is_a_directory for a directory,
// std::errc::invalid_argument for another file that is not regular (a FIFO, a device: opened
// without waiting for a writer), or a TransferErrc when the name or size would be refused
// under `limits`.
// With ChecksumPlacement::trailer the file is not read here: the header carries
// flag_checksum_trailer, and hash_chunk() / trailer() do the hashing as the body leaves.
SendPlan prepare_send(const std::string& path, std::error_code& ec,
                      const TransferLimits& limits = {},
                      ChecksumPlacement placement = ChecksumPlacement::header);

// The receiver's reply as the sender's result: empty when the file was stored and verified.
std::error_code check_reply(std::span<const std::byte> reply) noexcept;

// How far ahead of the body bytes that arrived the receiver reserves disk (reserve_body): a
// sender can make it hold at most this much more than it sent.
inline constexpr std::uint64_t reserve_step = std::uint64_t{64} << 20;

class TransferReceiver {
 public:
  // trailer: the body is complete, the checksum trailer (flag_checksum_trailer) is awaited.
  enum class Phase : std::uint8_t { header, body, trailer, verifying, done, failed };

  // `destination`: the file to write, or an existing directory to write the sent name into.
  TransferReceiver(std::string destination, TransferLimits limits = {});

  Phase phase() const noexcept { return phase_; }
  // Valid from the body phase on; after a file_too_large refusal, header().size is the size
  // that was announced.
  const TransferHeader& header() const noexcept { return header_; }
  // Header phase: the bytes of header and name received so far.
  std::size_t header_bytes_received() const noexcept { return head_len_; }
  const std::string& path() const noexcept { return file_.path(); }

  // Header phase: takes bytes from `in` (advancing it) until the header and name are complete,
  // then creates the output file and moves to the body phase; bytes after the header stay in
  // `in` for on_body_bytes(). Buffers at most header_size + 255 bytes. An error (a refused
  // header, the file cannot be created) moves to the failed phase.
  std::error_code on_header_bytes(ByteBuffer& in);

  // Body phase: keeps disk reserved (OutputFile::reserve) ahead of what arrived. The first call,
  // before the first body byte, refuses a body larger than the free space of the output file
  // system (TransferErrc::no_space; available_space() says how much there was). Every call
  // then reserves up to reserve_step bytes beyond body_offset() (at most to the body's end)
  // once less than half of that is left, so that no room fails now rather than part way, and
  // a sender that announces much and sends little holds little. Cheap when nothing is due:
  // call it before each piece is written. An error (no_space, ENOSPC, EFBIG) moves to the
  // failed phase (file removed).
  std::error_code reserve_body();
  std::uint64_t bytes_reserved() const noexcept { return reserved_; }
  // The free space the first reserve_body() found (0 before it, or if the file system did not say).
  std::uint64_t available_space() const noexcept { return available_; }

  // Body phase: writes body bytes that arrived in memory at body_offset(), up to
  // body_remaining() (advancing `in` by what was used; anything beyond the body is left).
  std::error_code on_body_bytes(ByteBuffer& in);
  // Body phase: `n` bytes were written straight into fd() at body_offset() (by splice, as
  // EventLoop::transfer_from does).
  void on_body_spliced(std::uint64_t n) noexcept;
  // Trailer phase: takes up to trailer_missing() bytes from `in` (advancing it); once the
  // trailer is complete the checksum is known and the phase is verifying.
  void on_trailer_bytes(ByteBuffer& in) noexcept;
  std::size_t trailer_missing() const noexcept { return trailer_size - trailer_len_; }

  int fd() const noexcept { return file_.fd(); }
  std::uint64_t body_offset() const noexcept { return received_; }
  std::uint64_t body_remaining() const noexcept { return header_.size - received_; }

  // Hashes up to `max_bytes` of the body already written, from the file (page cache), so that
  // finish() has less left to verify. Call it whenever the loop would otherwise wait for the
  // network; never required. Returns how many bytes it hashed (0: caught up). On a read error
  // the transfer fails (ec set, file removed).
  std::size_t hash_received(std::size_t max_bytes, std::error_code& ec);
  std::uint64_t bytes_hashed() const noexcept { return hashed_; }

  // The body is complete (or the peer ended it): checks length and checksum, then names the
  // file (done) or removes it (failed). Returns the reply to send; `ec` says what went wrong:
  // truncated, checksum_mismatch, or the errno of reading or linking the file.
  TransferStatus finish(std::error_code& ec);

  // The transfer is broken (peer gone, write failed): removes the partial file.
  void abort() noexcept;

 private:
  std::error_code fail(std::error_code ec) noexcept;
  void end_of_body() noexcept;

  std::string destination_;
  TransferLimits limits_;
  Phase phase_ = Phase::header;
  std::array<std::byte, header_size + 255> head_{};
  std::size_t head_len_ = 0;
  TransferHeader header_;
  OutputFile file_;
  std::uint64_t received_ = 0;
  std::uint64_t reserved_ = 0;  // [0, reserved_) allocated by reserve_body()
  bool space_checked_ = false;
  std::uint64_t available_ = 0;
  std::array<std::byte, trailer_size> trailer_{};
  std::size_t trailer_len_ = 0;
  Checksum hash_;  // over [0, hashed_) of the body, read back from the file
  std::uint64_t hashed_ = 0;
  FileHasher hasher_;  // reads the body back from file_
};

}  // namespace niox::transfer
