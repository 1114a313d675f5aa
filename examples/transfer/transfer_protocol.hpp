// The niox-transfer wire protocol: one file over one TCP connection.
//
//   sender -> receiver:  header (32 bytes) | name (name_length bytes) | body (file_size bytes)
//   receiver -> sender:  reply (8 bytes), after the body has been written and verified
//
// Header, all integers big-endian (network order, like Java's DataOutput):
//
//   offset size  field
//        0    4  magic "NIOX"
//        4    1  version (1)
//        5    1  flags (0, or flag_checksum_trailer; any other bit is refused)
//        6    1  checksum algorithm (2 = XXH3-64, what niox-transfer sends; 1 = XXH64; seed 0)
//        7    1  reserved (0)
//        8    2  name length (1 .. limits.max_name_length, at most 255)
//       10    6  reserved (0)
//       16    8  file size in bytes
//       24    8  checksum of the whole body; 0 with flag_checksum_trailer
//
// Without flags the checksum travels in the header, so the sender must hash the whole file
// before it sends the first body byte: a full extra pass over the file on the critical path.
// With flag_checksum_trailer (what niox-transfer sends) the checksum follows the body as an
// 8-byte big-endian trailer: the sender hashes each chunk just before it sends that chunk
// zero-copy (the pages are then hot for the send), and the receiver hashes each chunk right
// after it landed in the file. Both ends still hash the bytes of the file itself (the sender
// what it read, the receiver what is on disk), so the verification stays end to end.
//
//   sender -> receiver with the flag:  header | name | body | trailer (8 bytes: checksum)
//
// The name is only a suggestion for the receiver's file name: UTF-8 bytes, no '/', '\', NUL or
// other control byte, and no ".." anywhere (stricter than needed once '/' is excluded, so that no
// consumer can ever turn it into a path step). Reserved bytes and unknown flags are errors rather
// than ignored, so a future version cannot be misread as this one.
//
// Reply: magic "NIOX", status (TransferStatus), 3 reserved bytes (0). A reply other than ok is
// followed by the receiver's reason, in words for the sender's user:
//
//   reason length u16 (0 .. max_reason_length) | reason (UTF-8 text)
//
// Receivers that predate the reason close after the 8 bytes, and senders that predate it read
// only the 8 bytes; so a sender takes the end of the connection before the reason as "no
// reason", and receivers send it only after a status that is not ok.
#pragma once

#include <niox/buffer/byte_buffer.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>

namespace niox::transfer {

inline constexpr std::uint8_t protocol_version = 1;
inline constexpr std::size_t header_size = 32;
inline constexpr std::size_t reply_size = 8;
inline constexpr std::size_t trailer_size = 8;
// Header flag: the checksum is not in the header but follows the body (trailer_size bytes).
inline constexpr std::uint8_t flag_checksum_trailer = 0x01;

enum class ChecksumAlgorithm : std::uint8_t { xxh64 = 1, xxh3_64 = 2 };

// Why a header or reply was refused, or a transfer failed. An std::error_code category, so
// errors read "niox.transfer: bad magic (not a niox-transfer stream)".
enum class TransferErrc {
  bad_magic = 1,
  unsupported_version,
  unknown_flags,
  unknown_checksum_algorithm,
  reserved_not_zero,
  bad_name_length,
  bad_name,
  file_too_large,
  checksum_mismatch,
  truncated,
  receiver_failed,
  no_space,   // the body is larger than the receiver's free disk space
  timed_out,  // the receiver gave up waiting for the sender
  refused,    // the receiver refused the header
};

const std::error_category& transfer_category() noexcept;
std::error_code make_error_code(TransferErrc e) noexcept;

struct TransferLimits {
  std::size_t max_name_length = 255;  // NAME_MAX; larger values are clamped to it
  std::uint64_t max_file_size = std::uint64_t{1} << 40;  // 1 TiB
};

struct TransferHeader {
  std::string name;
  std::uint64_t size = 0;
  ChecksumAlgorithm algorithm = ChecksumAlgorithm::xxh3_64;
  std::uint64_t checksum = 0;     // with checksum_trailer: 0 in the header, set from the trailer
  bool checksum_trailer = false;  // flag_checksum_trailer
};

// The trailer that follows the body when the header has flag_checksum_trailer.
ByteBuffer encode_trailer(std::uint64_t checksum);
std::uint64_t decode_trailer(std::span<const std::byte, trailer_size> in) noexcept;

// Empty error_code when `name` is acceptable under `limits`, else bad_name_length or bad_name.
std::error_code validate_name(std::string_view name, const TransferLimits& limits = {}) noexcept;

// The header and name, ready to send (position 0, limit header_size + name length). Throws
// std::system_error with a TransferErrc if the header would be refused by a receiver with the
// same limits.
ByteBuffer encode_header(const TransferHeader& header, const TransferLimits& limits = {});

enum class DecodeStatus : std::uint8_t { need_more, complete, error };

struct HeaderDecodeResult {
  DecodeStatus status = DecodeStatus::need_more;
  // complete: bytes of `in` that were the header and name (the body starts right after).
  // need_more: total bytes needed before decoding can go on (header_size, then header + name).
  std::size_t bytes = 0;
  std::error_code error;  // set when status is error
};

// Decodes a header from the start of `in` (which may hold more, the body's first bytes). Every
// check that can be made is made as soon as the bytes are there: a wrong magic fails on its
// first wrong byte, the fixed fields fail before the name is awaited, so a peer can never make
// the receiver wait for or buffer more than header_size + max_name_length bytes. `out` is set
// once the header is complete; on file_too_large, out.size is the size that was announced.
HeaderDecodeResult decode_header(std::span<const std::byte> in, TransferHeader& out,
                                 const TransferLimits& limits = {});

enum class TransferStatus : std::uint8_t {
  ok = 0,                 // written and verified
  checksum_mismatch = 1,  // written, but the checksum did not match: removed
  write_failed = 2,       // the receiver could not store the file (no space, I/O error)
  refused = 3,            // the header was refused
  timed_out = 4,          // the receiver gave up waiting for the sender (older senders: 2's error)
};

// The longest reason a receiver sends (longer ones are cut) and a sender accepts.
inline constexpr std::size_t max_reason_length = 1024;

// The 8-byte reply and, for a status other than ok, its reason (cut to max_reason_length bytes).
ByteBuffer encode_reply(TransferStatus status, std::string_view reason = {});
// Decodes the 8-byte reply. Errors: truncated (fewer than reply_size bytes), bad_magic,
// reserved_not_zero, and receiver_failed for a status value this version does not know.
std::error_code decode_reply(std::span<const std::byte> in, TransferStatus& out) noexcept;
// How many bytes the reply that starts `in` takes, as far as `in` tells: reply_size for an ok
// or malformed reply, else reply_size + 2 until the reason's length is there, then the whole.
std::size_t reply_length(std::span<const std::byte> in) noexcept;
// The reason of a reply other than ok once it is complete in `in`, control bytes replaced by
// '?' (it is printed on a terminal); empty when there is none, or not all of it arrived.
std::string decode_reason(std::span<const std::byte> in);

// The error a sender reports for a receiver's non-ok status.
std::error_code error_for(TransferStatus status) noexcept;

}  // namespace niox::transfer

template <>
struct std::is_error_code_enum<niox::transfer::TransferErrc> : std::true_type {};
