#include "transfer_protocol.hpp"

#include <algorithm>
#include <cstring>

namespace niox::transfer {
namespace {

bool known_algorithm(std::uint8_t a) noexcept {
  return a == static_cast<std::uint8_t>(ChecksumAlgorithm::xxh64) ||
         a == static_cast<std::uint8_t>(ChecksumAlgorithm::xxh3_64);
}

constexpr char magic[4] = {'N', 'I', 'O', 'X'};

class TransferCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "niox.transfer"; }
  std::string message(int ev) const override {
    switch (static_cast<TransferErrc>(ev)) {
      case TransferErrc::bad_magic: return "bad magic (not a niox-transfer stream)";
      case TransferErrc::unsupported_version: return "unsupported protocol version";
      case TransferErrc::unknown_flags: return "unknown header flags";
      case TransferErrc::unknown_checksum_algorithm: return "unknown checksum algorithm";
      case TransferErrc::reserved_not_zero: return "reserved header bytes are not zero";
      case TransferErrc::bad_name_length: return "file name empty or too long";
      case TransferErrc::bad_name: return "file name contains '/', '\\', '..' or a control byte";
      case TransferErrc::file_too_large: return "file larger than the allowed maximum";
      case TransferErrc::checksum_mismatch: return "checksum mismatch: the file arrived damaged";
      case TransferErrc::truncated: return "connection closed before the transfer completed";
      case TransferErrc::receiver_failed: return "the receiver could not store the file";
      case TransferErrc::no_space: return "not enough free space on the receiver's disk";
      case TransferErrc::timed_out: return "the receiver gave up waiting for the sender";
      case TransferErrc::refused: return "the receiver refused the transfer";
    }
    return "unknown niox.transfer error";
  }
};

std::uint16_t load16(const unsigned char* p) noexcept {
  return static_cast<std::uint16_t>(p[0] << 8 | p[1]);
}

std::uint64_t load64(const unsigned char* p) noexcept {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) {
    v = v << 8 | p[i];
  }
  return v;
}

std::size_t name_limit(const TransferLimits& limits) noexcept {
  return std::min<std::size_t>(limits.max_name_length, 255);
}

HeaderDecodeResult failure(TransferErrc e) { return {DecodeStatus::error, 0, make_error_code(e)}; }

}  // namespace

const std::error_category& transfer_category() noexcept {
  static const TransferCategory category;
  return category;
}

std::error_code make_error_code(TransferErrc e) noexcept {
  return {static_cast<int>(e), transfer_category()};
}

std::error_code validate_name(std::string_view name, const TransferLimits& limits) noexcept {
  if (name.empty() || name.size() > name_limit(limits)) {
    return TransferErrc::bad_name_length;
  }
  if (name.find("..") != std::string_view::npos || name == ".") {
    return TransferErrc::bad_name;
  }
  for (char ch : name) {
    auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7f || c == '/' || c == '\\') {
      return TransferErrc::bad_name;
    }
  }
  return {};
}

ByteBuffer encode_header(const TransferHeader& header, const TransferLimits& limits) {
  if (auto ec = validate_name(header.name, limits)) {
    throw std::system_error(ec);
  }
  if (header.size > limits.max_file_size) {
    throw std::system_error(TransferErrc::file_too_large);
  }
  if (!known_algorithm(static_cast<std::uint8_t>(header.algorithm))) {
    throw std::system_error(TransferErrc::unknown_checksum_algorithm);
  }
  auto buf = ByteBuffer::allocate(header_size + header.name.size());  // zero-filled
  buf.order(ByteOrder::big_endian);
  buf.put(std::string_view(magic, 4));
  buf.put(protocol_version);
  buf.put(header.checksum_trailer ? flag_checksum_trailer : std::uint8_t{0});
  buf.put(static_cast<std::uint8_t>(header.algorithm));
  buf.put(std::uint8_t{0});
  buf.put_short(static_cast<std::int16_t>(header.name.size()));
  buf.position(16);
  buf.put_long(static_cast<std::int64_t>(header.size));
  buf.put_long(header.checksum_trailer ? 0 : static_cast<std::int64_t>(header.checksum));
  buf.put(std::string_view(header.name));
  buf.flip();
  return buf;
}

HeaderDecodeResult decode_header(std::span<const std::byte> in, TransferHeader& out,
                                 const TransferLimits& limits) {
  const auto* p = reinterpret_cast<const unsigned char*>(in.data());
  const std::size_t have = in.size();
  if (have > 0 && std::memcmp(p, magic, std::min<std::size_t>(have, 4)) != 0) {
    return failure(TransferErrc::bad_magic);
  }
  if (have >= 5 && p[4] != protocol_version) {
    return failure(TransferErrc::unsupported_version);
  }
  if (have < header_size) {
    return {DecodeStatus::need_more, header_size, {}};
  }
  if ((p[5] & ~flag_checksum_trailer) != 0) {
    return failure(TransferErrc::unknown_flags);
  }
  const bool trailer = (p[5] & flag_checksum_trailer) != 0;
  if (!known_algorithm(p[6])) {
    return failure(TransferErrc::unknown_checksum_algorithm);
  }
  if (p[7] != 0 || std::any_of(p + 10, p + 16, [](unsigned char c) { return c != 0; }) ||
      (trailer && std::any_of(p + 24, p + 32, [](unsigned char c) { return c != 0; }))) {
    return failure(TransferErrc::reserved_not_zero);
  }
  const std::size_t name_length = load16(p + 8);
  if (name_length == 0 || name_length > name_limit(limits)) {
    return failure(TransferErrc::bad_name_length);
  }
  const std::uint64_t size = load64(p + 16);
  if (size > limits.max_file_size) {
    out.size = size;  // for the receiver's message
    return failure(TransferErrc::file_too_large);
  }
  if (have < header_size + name_length) {
    return {DecodeStatus::need_more, header_size + name_length, {}};
  }
  std::string_view name(reinterpret_cast<const char*>(p + header_size), name_length);
  if (auto ec = validate_name(name, limits)) {
    return {DecodeStatus::error, 0, ec};
  }
  out.name.assign(name);
  out.size = size;
  out.algorithm = static_cast<ChecksumAlgorithm>(p[6]);
  out.checksum = load64(p + 24);
  out.checksum_trailer = trailer;
  return {DecodeStatus::complete, header_size + name_length, {}};
}

ByteBuffer encode_trailer(std::uint64_t checksum) {
  auto buf = ByteBuffer::allocate(trailer_size);
  buf.order(ByteOrder::big_endian);
  buf.put_long(static_cast<std::int64_t>(checksum));
  buf.flip();
  return buf;
}

std::uint64_t decode_trailer(std::span<const std::byte, trailer_size> in) noexcept {
  return load64(reinterpret_cast<const unsigned char*>(in.data()));
}

ByteBuffer encode_reply(TransferStatus status, std::string_view reason) {
  if (status == TransferStatus::ok) {
    reason = {};
  }
  reason = reason.substr(0, max_reason_length);
  const std::size_t frame = status == TransferStatus::ok ? 0 : 2 + reason.size();
  auto buf = ByteBuffer::allocate(reply_size + frame);
  buf.order(ByteOrder::big_endian);
  buf.put(std::string_view(magic, 4));
  buf.put(static_cast<std::uint8_t>(status));
  buf.position(reply_size);
  if (frame != 0) {
    buf.put_short(static_cast<std::int16_t>(reason.size()));
    buf.put(reason);
  }
  buf.flip();
  return buf;
}

std::error_code decode_reply(std::span<const std::byte> in, TransferStatus& out) noexcept {
  const auto* p = reinterpret_cast<const unsigned char*>(in.data());
  if (in.size() < reply_size) {
    return TransferErrc::truncated;
  }
  if (std::memcmp(p, magic, 4) != 0) {
    return TransferErrc::bad_magic;
  }
  if (p[5] != 0 || p[6] != 0 || p[7] != 0) {
    return TransferErrc::reserved_not_zero;
  }
  if (p[4] > static_cast<std::uint8_t>(TransferStatus::timed_out)) {
    return TransferErrc::receiver_failed;
  }
  out = static_cast<TransferStatus>(p[4]);
  return {};
}

std::size_t reply_length(std::span<const std::byte> in) noexcept {
  TransferStatus status{};
  if (decode_reply(in, status) || status == TransferStatus::ok) {
    return reply_size;
  }
  if (in.size() < reply_size + 2) {
    return reply_size + 2;
  }
  const std::size_t length = load16(reinterpret_cast<const unsigned char*>(in.data()) + reply_size);
  return reply_size + 2 + std::min(length, max_reason_length);
}

std::string decode_reason(std::span<const std::byte> in) {
  TransferStatus status{};
  if (decode_reply(in, status) || status == TransferStatus::ok || in.size() < reply_size + 2) {
    return {};
  }
  const std::size_t length = load16(reinterpret_cast<const unsigned char*>(in.data()) + reply_size);
  if (length > max_reason_length || in.size() < reply_size + 2 + length) {
    return {};
  }
  std::string reason(reinterpret_cast<const char*>(in.data()) + reply_size + 2, length);
  for (auto& ch : reason) {
    auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7f) {
      ch = '?';
    }
  }
  return reason;
}

std::error_code error_for(TransferStatus status) noexcept {
  switch (status) {
    case TransferStatus::ok: return {};
    case TransferStatus::checksum_mismatch: return TransferErrc::checksum_mismatch;
    case TransferStatus::write_failed: return TransferErrc::receiver_failed;
    case TransferStatus::refused: return TransferErrc::refused;
    case TransferStatus::timed_out: return TransferErrc::timed_out;
  }
  return TransferErrc::receiver_failed;
}

}  // namespace niox::transfer
