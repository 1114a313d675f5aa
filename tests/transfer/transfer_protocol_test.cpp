#include "transfer_protocol.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace niox::transfer {
namespace {

std::vector<std::byte> bytes_of(const ByteBuffer& b) {
  auto s = b.bytes();
  return {s.begin(), s.end()};
}

std::vector<std::byte> valid_header(std::string name = "report.pdf",
                                    std::uint64_t size = 123456789) {
  TransferHeader h;
  h.name = std::move(name);
  h.size = size;
  h.checksum = 0x0123456789ABCDEFULL;
  return bytes_of(encode_header(h));
}

TEST(TransferProtocol, HeaderLayoutIsBigEndianAndFixed) {
  auto b = valid_header("a.txt", 0xF203040506ULL);
  ASSERT_EQ(b.size(), header_size + 5);
  const unsigned char expected[32] = {'N', 'I', 'O',  'X',  1,    0,    2,    0,    0,    5,   0,
                                      0,   0,   0,    0,    0,    0,    0,    0,    0xF2, 3,   4,
                                      5,   6,   0x01, 0x23, 0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEF};
  for (std::size_t i = 0; i < 32; ++i) {
    EXPECT_EQ(static_cast<unsigned char>(b[i]), expected[i]) << "byte " << i;
  }
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(b.data()) + 32, 5), "a.txt");
}

TEST(TransferProtocol, ChecksumTrailerFlag) {
  TransferHeader h;
  h.name = "t.bin";
  h.size = 77;
  h.checksum = 0x1111;  // not sent: the trailer carries it
  h.checksum_trailer = true;
  auto b = bytes_of(encode_header(h));
  EXPECT_EQ(static_cast<unsigned char>(b[5]), flag_checksum_trailer);
  for (std::size_t i = 24; i < 32; ++i) EXPECT_EQ(static_cast<unsigned char>(b[i]), 0u) << i;
  TransferHeader out;
  auto r = decode_header(b, out);
  ASSERT_EQ(r.status, DecodeStatus::complete) << r.error.message();
  EXPECT_TRUE(out.checksum_trailer);
  EXPECT_EQ(out.checksum, 0u);
  // With the flag, a checksum in the header is a reserved field that is not zero.
  b[31] = std::byte{1};
  EXPECT_EQ(decode_header(b, out).error, make_error_code(TransferErrc::reserved_not_zero));
  b[31] = std::byte{0};
  b[5] = std::byte{flag_checksum_trailer | 0x02};
  EXPECT_EQ(decode_header(b, out).error, make_error_code(TransferErrc::unknown_flags));

  auto t = bytes_of(encode_trailer(0x0123456789ABCDEFULL));
  ASSERT_EQ(t.size(), trailer_size);
  EXPECT_EQ(static_cast<unsigned char>(t[0]), 0x01);
  EXPECT_EQ(static_cast<unsigned char>(t[7]), 0xEF);
  EXPECT_EQ(decode_trailer(std::span<const std::byte, trailer_size>(t.data(), trailer_size)),
            0x0123456789ABCDEFULL);
}

TEST(TransferProtocol, RoundTripAndBodyBytesLeftAlone) {
  auto b = valid_header();
  b.push_back(std::byte{0x42});  // the body's first byte follows in the same read
  TransferHeader h;
  auto r = decode_header(b, h);
  ASSERT_EQ(r.status, DecodeStatus::complete) << r.error.message();
  EXPECT_EQ(r.bytes, b.size() - 1);
  EXPECT_EQ(h.name, "report.pdf");
  EXPECT_EQ(h.size, 123456789u);
  EXPECT_EQ(h.checksum, 0x0123456789ABCDEFULL);
  EXPECT_EQ(h.algorithm, ChecksumAlgorithm::xxh3_64);
}

// XXH3-64 (2) is what a header names by default; XXH64 (1), what earlier senders used, still
// decodes; anything else is refused.
TEST(TransferProtocol, BothChecksumAlgorithmsRoundTrip) {
  for (auto a : {ChecksumAlgorithm::xxh3_64, ChecksumAlgorithm::xxh64}) {
    TransferHeader h;
    h.name = "x.bin";
    h.size = 5;
    h.algorithm = a;
    auto b = bytes_of(encode_header(h));
    EXPECT_EQ(static_cast<unsigned char>(b[6]), static_cast<unsigned char>(a));
    TransferHeader out;
    ASSERT_EQ(decode_header(b, out).status, DecodeStatus::complete);
    EXPECT_EQ(out.algorithm, a);
  }
  TransferHeader bad;
  bad.name = "x.bin";
  bad.algorithm = static_cast<ChecksumAlgorithm>(3);
  EXPECT_THROW(encode_header(bad), std::system_error);
  auto b = valid_header();
  b[6] = std::byte{3};
  TransferHeader out;
  EXPECT_EQ(decode_header(b, out).error, make_error_code(TransferErrc::unknown_checksum_algorithm));
}

TEST(TransferProtocol, EveryPrefixAsksForMoreOrDecodes) {
  const auto b = valid_header();
  for (std::size_t n = 0; n < b.size(); ++n) {
    TransferHeader h;
    auto r = decode_header(std::span(b).first(n), h);
    ASSERT_EQ(r.status, DecodeStatus::need_more) << n;
    EXPECT_GT(r.bytes, n);
    EXPECT_LE(r.bytes, b.size());
    EXPECT_EQ(r.bytes, n < header_size ? header_size : b.size());
  }
}

struct Corruption {
  const char* name;
  std::size_t offset;
  unsigned char value;
  TransferErrc expected;
};

class TransferHeaderRejects : public ::testing::TestWithParam<Corruption> {};

TEST_P(TransferHeaderRejects, WithAClearError) {
  auto b = valid_header();
  const auto& c = GetParam();
  b[c.offset] = std::byte{c.value};
  TransferHeader h;
  auto r = decode_header(b, h);
  EXPECT_EQ(r.status, DecodeStatus::error);
  EXPECT_EQ(r.error, make_error_code(c.expected)) << r.error.message();
  EXPECT_EQ(r.error.category().name(), std::string("niox.transfer"));
  // Errors in the fixed part are found before the name has arrived.
  if (c.offset < header_size) {
    auto early =
        decode_header(std::span(b).first(std::max<std::size_t>(c.offset + 1, header_size)), h);
    EXPECT_EQ(early.status, DecodeStatus::error);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Table, TransferHeaderRejects,
    ::testing::Values(Corruption{"magic0", 0, 'H', TransferErrc::bad_magic},
                      Corruption{"magic3", 3, 'Y', TransferErrc::bad_magic},
                      Corruption{"version0", 4, 0, TransferErrc::unsupported_version},
                      Corruption{"version2", 4, 2, TransferErrc::unsupported_version},
                      Corruption{"flags", 5, 0x80, TransferErrc::unknown_flags},
                      Corruption{"algorithm", 6, 9, TransferErrc::unknown_checksum_algorithm},
                      Corruption{"reserved7", 7, 1, TransferErrc::reserved_not_zero},
                      Corruption{"reserved15", 15, 1, TransferErrc::reserved_not_zero},
                      Corruption{"name_len_zero_hi", 9, 0, TransferErrc::bad_name_length},
                      Corruption{"name_len_huge", 8, 0xFF, TransferErrc::bad_name_length},
                      Corruption{"size_huge", 16, 0x80, TransferErrc::file_too_large},
                      Corruption{"name_slash", 33, '/', TransferErrc::bad_name},
                      Corruption{"name_nul", 34, 0, TransferErrc::bad_name},
                      Corruption{"name_newline", 32, '\n', TransferErrc::bad_name}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(TransferProtocol, BadMagicIsSeenOnTheFirstWrongByte) {
  const std::string http = "GET / HTTP/1.1\r\n";
  TransferHeader h;
  auto r = decode_header(std::as_bytes(std::span(http.data(), 1)), h);
  EXPECT_EQ(r.error, TransferErrc::bad_magic);
  std::vector<std::byte> empty;
  EXPECT_EQ(decode_header(empty, h).status, DecodeStatus::need_more);
}

TEST(TransferProtocol, NameRules) {
  for (const char* good :
       {"a", "report.pdf", "with space.txt", "caf\xC3\xA9", ".hidden", "a.b.c"}) {
    EXPECT_FALSE(validate_name(good)) << good;
  }
  for (const char* bad :
       {"..", ".", "a/b", "/etc/passwd", "a\\b", "..hidden", "x..y", "tab\there", "del\x7f"}) {
    EXPECT_EQ(validate_name(bad), TransferErrc::bad_name) << bad;
  }
  EXPECT_EQ(validate_name(""), TransferErrc::bad_name_length);
  EXPECT_EQ(validate_name(std::string(256, 'n')), TransferErrc::bad_name_length);
  EXPECT_FALSE(validate_name(std::string(255, 'n')));
  TransferLimits tight;
  tight.max_name_length = 8;
  EXPECT_EQ(validate_name("123456789", tight), TransferErrc::bad_name_length);
}

TEST(TransferProtocol, LimitsApplyToDecodeAndEncode) {
  TransferLimits limits;
  limits.max_file_size = 1000;
  limits.max_name_length = 4;
  TransferHeader h;
  EXPECT_EQ(decode_header(valid_header("abcd", 1000), h, limits).status, DecodeStatus::complete);
  EXPECT_EQ(decode_header(valid_header("abcd", 1001), h, limits).error,
            TransferErrc::file_too_large);
  EXPECT_EQ(decode_header(valid_header("abcde", 10), h, limits).error,
            TransferErrc::bad_name_length);
  TransferHeader big;
  big.name = "x";
  big.size = 1001;
  EXPECT_THROW(encode_header(big, limits), std::system_error);
  TransferHeader bad;
  bad.name = "../x";
  try {
    encode_header(bad);
    FAIL() << "no exception";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), TransferErrc::bad_name);
  }
}

TEST(TransferProtocol, Replies) {
  for (auto s :
       {TransferStatus::ok, TransferStatus::checksum_mismatch, TransferStatus::write_failed,
        TransferStatus::refused, TransferStatus::timed_out}) {
    auto b = bytes_of(encode_reply(s));
    // Only a reply other than ok has a reason after it (here an empty one: its length, 0).
    ASSERT_EQ(b.size(), s == TransferStatus::ok ? reply_size : reply_size + 2);
    EXPECT_EQ(reply_length(b), b.size());
    TransferStatus out{};
    EXPECT_FALSE(decode_reply(b, out));
    EXPECT_EQ(out, s);
    EXPECT_EQ(decode_reason(b), "");
  }
  EXPECT_FALSE(error_for(TransferStatus::ok));
  EXPECT_EQ(error_for(TransferStatus::checksum_mismatch), TransferErrc::checksum_mismatch);
  EXPECT_EQ(error_for(TransferStatus::write_failed), TransferErrc::receiver_failed);
  EXPECT_EQ(error_for(TransferStatus::refused), TransferErrc::refused);
  EXPECT_EQ(error_for(TransferStatus::timed_out), TransferErrc::timed_out);
  auto b = bytes_of(encode_reply(TransferStatus::ok));
  TransferStatus out{};
  EXPECT_EQ(decode_reply(std::span(b).first(7), out), TransferErrc::truncated);
  b[4] = std::byte{77};
  EXPECT_EQ(decode_reply(b, out), TransferErrc::receiver_failed);
  b[4] = std::byte{0};
  b[7] = std::byte{1};
  EXPECT_EQ(decode_reply(b, out), TransferErrc::reserved_not_zero);
  b[0] = std::byte{'X'};
  EXPECT_EQ(decode_reply(b, out), TransferErrc::bad_magic);
}

TEST(TransferProtocol, RefusalsCarryTheReceiversReason) {
  auto b = bytes_of(encode_reply(TransferStatus::write_failed, "no room for 3145728 bytes"));
  ASSERT_EQ(b.size(), reply_size + 2 + 25);
  // The 8 bytes are what older senders read: unchanged, reserved bytes zero.
  EXPECT_EQ(static_cast<unsigned char>(b[4]), 2);
  for (std::size_t i = 5; i < reply_size; ++i) EXPECT_EQ(static_cast<unsigned char>(b[i]), 0u) << i;
  EXPECT_EQ(static_cast<unsigned char>(b[8]), 0);  // length, big-endian
  EXPECT_EQ(static_cast<unsigned char>(b[9]), 25);
  EXPECT_EQ(decode_reason(b), "no room for 3145728 bytes");
  // Arriving piece by piece: the length says how much is still to come.
  EXPECT_EQ(reply_length(std::span(b).first(3)), reply_size);
  EXPECT_EQ(reply_length(std::span(b).first(reply_size)), reply_size + 2);
  EXPECT_EQ(reply_length(std::span(b).first(reply_size + 2)), b.size());
  EXPECT_EQ(decode_reason(std::span(b).first(b.size() - 1)), "");  // not all there
  // A receiver that predates the reason: 8 bytes, then the end of the connection.
  EXPECT_EQ(decode_reason(std::span(b).first(reply_size)), "");
  // An ok reply has no reason, whatever the receiver passed.
  EXPECT_EQ(bytes_of(encode_reply(TransferStatus::ok, "ignored")).size(), reply_size);
  // Control bytes (terminal escapes) never reach the sender's terminal; long reasons are cut.
  EXPECT_EQ(decode_reason(bytes_of(encode_reply(TransferStatus::refused, "a\x1b[2Jb\nc"))),
            "a?[2Jb?c");
  auto longest = bytes_of(encode_reply(TransferStatus::refused, std::string(5000, 'x')));
  EXPECT_EQ(longest.size(), reply_size + 2 + max_reason_length);
  EXPECT_EQ(decode_reason(longest), std::string(max_reason_length, 'x'));
  // A length beyond the maximum is not waited for, and gives no reason.
  longest[8] = std::byte{0xff};
  EXPECT_EQ(reply_length(longest), reply_size + 2 + max_reason_length);
  EXPECT_EQ(decode_reason(longest), "");
}

TEST(TransferProtocol, ErrorMessagesAreReadable) {
  EXPECT_EQ(make_error_code(TransferErrc::bad_magic).message(),
            "bad magic (not a niox-transfer stream)");
  for (int e = 1; e <= static_cast<int>(TransferErrc::refused); ++e) {
    EXPECT_NE(transfer_category().message(e).find_first_not_of(' '), std::string::npos);
    EXPECT_EQ(transfer_category().message(e).find("unknown niox"), std::string::npos) << e;
  }
}

}  // namespace
}  // namespace niox::transfer

namespace niox::transfer {
namespace {

// Random and mutated headers: never a crash (the sanitizers watch), and the same verdict whether
// the bytes come at once or one by one.
TEST(TransferProtocol, MutatedHeadersGetTheSameVerdictWholeOrByteByByte) {
  std::mt19937 rng(777);
  TransferHeader base;
  base.name = "file.bin";
  base.size = 4096;
  base.checksum = 42;
  const auto good = encode_header(base);
  for (int round = 0; round < 2000; ++round) {
    std::vector<std::byte> b(good.bytes().begin(), good.bytes().end());
    const int edits = static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      b[rng() % b.size()] = static_cast<std::byte>(rng() & 0xff);
    }
    if (rng() % 8 == 0) {
      b.resize(rng() % (b.size() + 1));
    }
    TransferHeader whole_h;
    const auto whole = decode_header(b, whole_h);
    // Byte by byte, asking again after each, as a receiver that reads one byte at a time would.
    TransferHeader step_h;
    HeaderDecodeResult step;
    for (std::size_t n = 0; n <= b.size(); ++n) {
      step = decode_header(std::span(b).first(n), step_h);
      if (step.status != DecodeStatus::need_more) break;
      ASSERT_GT(step.bytes, n);
    }
    ASSERT_EQ(step.status, whole.status) << round;
    ASSERT_EQ(step.error, whole.error) << round;
    if (whole.status == DecodeStatus::complete) {
      EXPECT_EQ(step.bytes, whole.bytes);
      EXPECT_EQ(step_h.name, whole_h.name);
      EXPECT_FALSE(validate_name(whole_h.name));
      EXPECT_LE(whole_h.size, TransferLimits{}.max_file_size);
    }
  }
}

}  // namespace
}  // namespace niox::transfer
