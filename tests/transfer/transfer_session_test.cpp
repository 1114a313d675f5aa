#include "temp_dir.hpp"
#include "transfer_session.hpp"
#include "checksum.hpp"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <string>

namespace niox::transfer {
namespace {

using Names = std::vector<std::string>;

std::string body_pattern(std::size_t n) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 131 + i / 7) & 0xff);
  return s;
}

class TransferSessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    body_ = body_pattern(300000);
    src_.write("data.bin", body_);
  }

  // The sender's bytes: header, name and body.
  std::string stream() {
    std::error_code ec;
    auto plan = prepare_send(src_ / "data.bin", ec);
    EXPECT_FALSE(ec) << ec.message();
    return std::string(plan.header_bytes.string_view()) + body_;
  }

  // Delivers `bytes` in pieces of `piece` bytes, through memory only (no splice).
  TransferStatus receive(TransferReceiver& rx, const std::string& bytes, std::size_t piece,
                         std::error_code& ec) {
    for (std::size_t off = 0; off < bytes.size(); off += piece) {
      auto buf = ByteBuffer::wrap(std::string_view(bytes).substr(off, piece));
      if (rx.phase() == TransferReceiver::Phase::header) {
        ec = rx.on_header_bytes(buf);
        if (ec) return TransferStatus::refused;
      }
      ec = rx.on_body_bytes(buf);
      if (ec) return TransferStatus::write_failed;
      rx.on_trailer_bytes(buf);
      EXPECT_FALSE(buf.has_remaining());
    }
    return rx.finish(ec);
  }

  testing::TempDir src_;
  testing::TempDir dst_;
  std::string body_;
};

TEST_F(TransferSessionTest, PrepareSendHashesAndNamesTheFile) {
  std::error_code ec;
  auto plan = prepare_send(src_ / "data.bin", ec);
  ASSERT_FALSE(ec);
  EXPECT_TRUE(plan.fd);
  EXPECT_EQ(plan.size, body_.size());
  EXPECT_EQ(plan.header.name, "data.bin");
  EXPECT_EQ(plan.header.algorithm, ChecksumAlgorithm::xxh3_64);
  EXPECT_EQ(plan.header.checksum, xxh3_64(body_));
  EXPECT_EQ(plan.header_bytes.remaining(), header_size + 8);
  prepare_send(src_ / "missing", ec);
  EXPECT_EQ(ec, std::errc::no_such_file_or_directory);
  prepare_send(src_.str(), ec);
  EXPECT_EQ(ec, std::errc::is_a_directory);
  ASSERT_EQ(::mkfifo((src_ / "fifo").c_str(), 0600), 0);
  prepare_send(src_ / "fifo", ec);  // without a writer: must not wait for one
  EXPECT_EQ(ec, std::errc::invalid_argument);
  src_.write("bad..name", "x");
  prepare_send(src_ / "bad..name", ec);
  EXPECT_EQ(ec, TransferErrc::bad_name);
}

TEST_F(TransferSessionTest, ReceivesInAnyPieceSizes) {
  const auto bytes = stream();
  for (std::size_t piece : {1u, 7u, 32u, 40u, 4096u, 1000000u}) {
    // piece 1: byte at a time through the header (the body would only be slow), then the rest.
    TransferReceiver rx(dst_.str());
    std::error_code ec;
    auto status = piece == 1 ? [&] {
      for (std::size_t i = 0; i < header_size + 8; ++i) {
        auto b = ByteBuffer::wrap(std::string_view(bytes).substr(i, 1));
        EXPECT_FALSE(rx.on_header_bytes(b));
      }
      auto rest = ByteBuffer::wrap(std::string_view(bytes).substr(header_size + 8));
      EXPECT_FALSE(rx.on_body_bytes(rest));
      return rx.finish(ec);
    }() : receive(rx, bytes, piece, ec);
    ASSERT_EQ(status, TransferStatus::ok) << piece << ": " << ec.message();
    EXPECT_EQ(rx.phase(), TransferReceiver::Phase::done);
    EXPECT_TRUE(dst_.read("data.bin") == body_) << piece;
    std::filesystem::remove(dst_ / "data.bin");
  }
}

// The sender's bytes with the checksum as a trailer, hashed chunk by chunk as it would send.
std::string trailer_stream(const std::string& path, std::size_t chunk, const std::string& body) {
  std::error_code ec;
  auto plan = prepare_send(path, ec, {}, ChecksumPlacement::trailer);
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_TRUE(plan.header.checksum_trailer);
  std::string out(plan.header_bytes.string_view());
  for (std::uint64_t off = 0; off < plan.size; off += chunk) {
    auto n = std::min<std::uint64_t>(chunk, plan.size - off);
    EXPECT_FALSE(plan.hash_chunk(off, n));
  }
  EXPECT_EQ(plan.bytes_hashed(), plan.size);
  return out + body + std::string(plan.trailer().string_view());
}

TEST_F(TransferSessionTest, ChecksumTrailerHashesChunksInOrder) {
  std::error_code ec;
  auto plan = prepare_send(src_ / "data.bin", ec, {}, ChecksumPlacement::trailer);
  ASSERT_FALSE(ec);
  EXPECT_EQ(plan.header.checksum, 0u);
  EXPECT_EQ(plan.hash_chunk(1000, 10), std::errc::invalid_argument);  // a gap
  ASSERT_FALSE(plan.hash_chunk(0, 1000));
  EXPECT_EQ(plan.hash_chunk(0, 10), std::errc::invalid_argument);               // again
  EXPECT_EQ(plan.hash_chunk(1000, body_.size()), std::errc::invalid_argument);  // past the end
  ASSERT_FALSE(plan.hash_chunk(1000, body_.size() - 1000));
  auto trailer = plan.trailer();
  std::array<std::byte, trailer_size> t{};
  trailer.get(std::span(t));
  EXPECT_EQ(decode_trailer(t), xxh3_64(body_));
}

TEST_F(TransferSessionTest, ChecksumTrailerReceivedInAnyPieceSizes) {
  const auto bytes = trailer_stream(src_ / "data.bin", 65536, body_);
  for (std::size_t piece : {1000u, 4096u, 299999u, 1000000u}) {
    TransferReceiver rx(dst_.str());
    std::error_code ec;
    ASSERT_EQ(receive(rx, bytes, piece, ec), TransferStatus::ok) << piece << ": " << ec.message();
    EXPECT_TRUE(dst_.read("data.bin") == body_) << piece;
    std::filesystem::remove(dst_ / "data.bin");
  }
}

TEST_F(TransferSessionTest, ChecksumTrailerMissingOrWrongFails) {
  const auto bytes = trailer_stream(src_ / "data.bin", 100000, body_);
  {
    TransferReceiver rx(dst_.str());
    std::error_code ec;
    // Cut inside the trailer: the body is all there, the checksum is not.
    EXPECT_EQ(receive(rx, bytes.substr(0, bytes.size() - 3), 4096, ec),
              TransferStatus::write_failed);
    EXPECT_EQ(ec, TransferErrc::truncated);
    EXPECT_TRUE(dst_.list().empty());
  }
  {
    auto damaged = bytes;
    damaged.back() ^= 1;
    TransferReceiver rx(dst_.str());
    std::error_code ec;
    EXPECT_EQ(receive(rx, damaged, 4096, ec), TransferStatus::checksum_mismatch);
    EXPECT_TRUE(dst_.list().empty());
  }
  {
    src_.write("empty.bin", "");
    TransferReceiver rx(dst_.str());
    std::error_code ec;
    EXPECT_EQ(receive(rx, trailer_stream(src_ / "empty.bin", 4096, ""), 5, ec), TransferStatus::ok)
        << ec.message();
    EXPECT_EQ(dst_.read("empty.bin"), "");
  }
}

TEST_F(TransferSessionTest, SplicedBodyIsAccountedAndVerified) {
  const auto bytes = stream();
  TransferReceiver rx(dst_ / "copy.bin");
  auto first = ByteBuffer::wrap(std::string_view(bytes).substr(0, 100));  // header + some body
  ASSERT_FALSE(rx.on_header_bytes(first));
  ASSERT_FALSE(rx.on_body_bytes(first));
  EXPECT_EQ(rx.body_offset(), 100 - header_size - 8);
  // What a splice would have done: bytes written straight to the file at body_offset().
  const auto rest = std::string_view(body_).substr(rx.body_offset());
  ASSERT_EQ(::pwrite(rx.fd(), rest.data(), rest.size(), static_cast<off_t>(rx.body_offset())),
            static_cast<ssize_t>(rest.size()));
  rx.on_body_spliced(rest.size());
  EXPECT_EQ(rx.body_remaining(), 0u);
  std::error_code ec;
  EXPECT_EQ(rx.finish(ec), TransferStatus::ok);
  EXPECT_TRUE(dst_.read("copy.bin") == body_);
  EXPECT_FALSE(check_reply(encode_reply(TransferStatus::ok).bytes()));
}

TEST_F(TransferSessionTest, HashingBehindTheWriteOffsetGivesTheSameVerdict) {
  for (bool corrupt : {false, true}) {
    auto bytes = stream();
    if (corrupt) bytes[bytes.size() - 7] ^= 0x10;
    TransferReceiver rx(dst_ / "copy.bin");
    std::error_code ec;
    for (std::size_t off = 0; off < bytes.size(); off += 10000) {
      auto buf = ByteBuffer::wrap(std::string_view(bytes).substr(off, 10000));
      if (rx.phase() == TransferReceiver::Phase::header) {
        ASSERT_FALSE(rx.on_header_bytes(buf));
      }
      ASSERT_FALSE(rx.on_body_bytes(buf));
      rx.hash_received(4096, ec);  // a little at a time, like a loop between reads
      ASSERT_FALSE(ec);
      EXPECT_LE(rx.bytes_hashed(), rx.body_offset());
    }
    EXPECT_GT(rx.bytes_hashed(), 0u);
    EXPECT_LT(rx.bytes_hashed(), body_.size());
    auto status = rx.finish(ec);
    EXPECT_EQ(status, corrupt ? TransferStatus::checksum_mismatch : TransferStatus::ok);
    EXPECT_EQ(rx.bytes_hashed(), corrupt ? rx.bytes_hashed() : body_.size());
    EXPECT_EQ(dst_.list(), corrupt ? Names{} : Names{"copy.bin"});
    std::filesystem::remove(dst_ / "copy.bin");
  }
}

TEST_F(TransferSessionTest, CorruptedBodyIsRemovedAndReported) {
  auto bytes = stream();
  bytes[bytes.size() / 2] ^= 0x01;
  TransferReceiver rx(dst_ / "copy.bin");
  std::error_code ec;
  EXPECT_EQ(receive(rx, bytes, 65536, ec), TransferStatus::checksum_mismatch);
  EXPECT_EQ(ec, TransferErrc::checksum_mismatch);
  EXPECT_EQ(rx.phase(), TransferReceiver::Phase::failed);
  EXPECT_EQ(dst_.list(), Names{});
  EXPECT_EQ(check_reply(encode_reply(TransferStatus::checksum_mismatch).bytes()),
            TransferErrc::checksum_mismatch);
}

TEST_F(TransferSessionTest, TruncatedTransferIsRemoved) {
  const auto bytes = stream();
  TransferReceiver rx(dst_ / "copy.bin");
  std::error_code ec;
  receive(rx, bytes.substr(0, bytes.size() - 1), 65536, ec);
  EXPECT_EQ(ec, TransferErrc::truncated);
  EXPECT_EQ(dst_.list(), Names{});
}

TEST_F(TransferSessionTest, AbortMidBodyRemovesThePartialFile) {
  const auto bytes = stream();
  TransferReceiver rx(dst_ / "copy.bin");
  auto buf = ByteBuffer::wrap(std::string_view(bytes).substr(0, 5000));
  ASSERT_FALSE(rx.on_header_bytes(buf));
  ASSERT_FALSE(rx.on_body_bytes(buf));
  rx.abort();
  EXPECT_EQ(rx.phase(), TransferReceiver::Phase::failed);
  EXPECT_EQ(dst_.list(), Names{});
}

TEST_F(TransferSessionTest, RefusedHeaderCreatesNothing) {
  auto bytes = stream();
  bytes[0] = 'X';
  TransferReceiver rx(dst_.str());
  auto buf = ByteBuffer::wrap(std::string_view(bytes));
  EXPECT_EQ(rx.on_header_bytes(buf), TransferErrc::bad_magic);
  EXPECT_EQ(rx.phase(), TransferReceiver::Phase::failed);
  EXPECT_EQ(dst_.list(), Names{});
}

TEST_F(TransferSessionTest, OversizedFileIsRefusedBeforeAnyBody) {
  TransferLimits small;
  small.max_file_size = 1000;
  TransferReceiver rx(dst_.str(), small);
  const auto bytes = stream();
  auto buf = ByteBuffer::wrap(std::string_view(bytes).substr(0, header_size));
  EXPECT_EQ(rx.on_header_bytes(buf), TransferErrc::file_too_large);
  EXPECT_EQ(dst_.list(), Names{});
}

// The header's bytes for a body of `size` (nothing is read: the body never comes).
ByteBuffer header_announcing(std::uint64_t size, const TransferLimits& limits) {
  TransferHeader h;
  h.name = "big.bin";
  h.size = size;
  h.checksum_trailer = true;
  return encode_header(h, limits);
}

TEST_F(TransferSessionTest, DiskIsReservedAStepAheadOfWhatArrived) {
  const std::uint64_t size = 4 * reserve_step + 12345;
  TransferReceiver rx(dst_.str());
  auto head = header_announcing(size, {});
  ASSERT_FALSE(rx.on_header_bytes(head));
  ASSERT_FALSE(rx.reserve_body());
  EXPECT_EQ(rx.bytes_reserved(), reserve_step);
  EXPECT_GE(rx.available_space(), reserve_step);
  struct stat st {};
  ASSERT_EQ(::fstat(rx.fd(), &st), 0);
  EXPECT_LE(static_cast<std::uint64_t>(st.st_blocks) * 512, reserve_step + (1 << 20));
  // Nothing is due while at least half a step is reserved ahead of what arrived.
  rx.on_body_spliced(reserve_step / 2);
  ASSERT_FALSE(rx.reserve_body());
  EXPECT_EQ(rx.bytes_reserved(), reserve_step);
  rx.on_body_spliced(1);
  ASSERT_FALSE(rx.reserve_body());
  EXPECT_EQ(rx.bytes_reserved(), reserve_step / 2 + 1 + reserve_step);
  // Never past the end of the body.
  rx.on_body_spliced(size - rx.body_offset() - 10);
  ASSERT_FALSE(rx.reserve_body());
  EXPECT_EQ(rx.bytes_reserved(), size);
  rx.abort();
  EXPECT_EQ(dst_.list(), Names{});
}

TEST_F(TransferSessionTest, BodyLargerThanTheFreeSpaceIsRefusedBeforeAnyReservation) {
  TransferLimits high;
  high.max_file_size = std::uint64_t{1} << 62;
  TransferReceiver rx(dst_.str(), high);
  auto head = header_announcing(std::uint64_t{1} << 61, high);  // 2 EiB
  ASSERT_FALSE(rx.on_header_bytes(head));
  struct stat st {};
  ASSERT_EQ(::fstat(rx.fd(), &st), 0);
  EXPECT_EQ(rx.reserve_body(), TransferErrc::no_space);
  EXPECT_EQ(st.st_blocks, 0);
  EXPECT_EQ(rx.bytes_reserved(), 0u);
  EXPECT_GT(rx.available_space(), 0u);
  EXPECT_EQ(rx.phase(), TransferReceiver::Phase::failed);
  EXPECT_EQ(dst_.list(), Names{});
}

TEST_F(TransferSessionTest, OversizedHeaderKeepsTheAnnouncedSizeForTheMessage) {
  TransferLimits small;
  small.max_file_size = 1000;
  TransferReceiver rx(dst_.str(), small);
  auto head = header_announcing(5000, {});
  EXPECT_EQ(rx.on_header_bytes(head), TransferErrc::file_too_large);
  EXPECT_EQ(rx.header().size, 5000u);
}

TEST_F(TransferSessionTest, BytesBeyondTheBodyAreLeftInTheBuffer) {
  auto bytes = stream() + "EXTRA";
  TransferReceiver rx(dst_ / "copy.bin");
  auto buf = ByteBuffer::wrap(std::string_view(bytes));
  ASSERT_FALSE(rx.on_header_bytes(buf));
  ASSERT_FALSE(rx.on_body_bytes(buf));
  EXPECT_EQ(buf.string_view(), "EXTRA");
  std::error_code ec;
  EXPECT_EQ(rx.finish(ec), TransferStatus::ok);
}

TEST_F(TransferSessionTest, EmptyFile) {
  src_.write("empty", "");
  std::error_code ec;
  auto plan = prepare_send(src_ / "empty", ec);
  ASSERT_FALSE(ec);
  TransferReceiver rx(dst_.str());
  auto buf = plan.header_bytes.duplicate();
  ASSERT_FALSE(rx.on_header_bytes(buf));
  EXPECT_EQ(rx.body_remaining(), 0u);
  EXPECT_EQ(rx.finish(ec), TransferStatus::ok);
  EXPECT_EQ(dst_.list(), Names{"empty"});
}

}  // namespace
}  // namespace niox::transfer
