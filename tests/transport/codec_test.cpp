#include <niox/transport/codec/header_body_decoder.hpp>
#include <niox/transport/codec/length_field_based_frame_decoder.hpp>
#include <niox/transport/codec/length_field_prepender.hpp>
#include <niox/transport/codec/line_based_frame_decoder.hpp>
#include <niox/transport/embedded_channel.hpp>

#include "support/decoder_harness.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace niox;
using niox::testing::DecodeResult;
using niox::testing::DecoderFactory;
using niox::testing::run_decoder;

namespace {

std::vector<std::byte> bytes_of(std::string_view s) {
  auto* p = reinterpret_cast<const std::byte*>(s.data());
  return {p, p + s.size()};
}

// Every 2-way split, byte-by-byte, and random multi-way splits must give the same result as
// the whole input at once. Returns that result.
DecodeResult expect_split_independent(const DecoderFactory& make, std::string_view input_text,
                                      unsigned random_splits = 200) {
  auto input = bytes_of(input_text);
  DecodeResult whole = run_decoder(make, input);
  for (std::size_t cut = 1; cut < input.size(); ++cut) {
    std::size_t cuts[] = {cut};
    EXPECT_EQ(run_decoder(make, input, cuts), whole) << "2-way split at " << cut;
  }
  std::vector<std::size_t> every;
  for (std::size_t i = 1; i < input.size(); ++i) {
    every.push_back(i);
  }
  EXPECT_EQ(run_decoder(make, input, every), whole) << "byte by byte";
  std::mt19937 rng(1234);
  for (unsigned k = 0; k < random_splits && input.size() > 2; ++k) {
    std::vector<std::size_t> cuts;
    std::size_t pos = 0;
    while (true) {
      pos += 1 + rng() % std::max<std::size_t>(1, input.size() / 3);
      if (pos >= input.size()) {
        break;
      }
      cuts.push_back(pos);
    }
    EXPECT_EQ(run_decoder(make, input, cuts), whole) << "random split " << k;
  }
  return whole;
}

std::string be_length(std::uint64_t v, int width) {
  std::string s;
  for (int i = width - 1; i >= 0; --i) {
    s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
  return s;
}
std::string le_length(std::uint64_t v, int width) {
  std::string s;
  for (int i = 0; i < width; ++i) {
    s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
  return s;
}

DecoderFactory length_field(LengthFieldBasedFrameDecoder::Options o, bool close_on_error = true) {
  return [o, close_on_error] {
    auto d = std::make_shared<LengthFieldBasedFrameDecoder>(o);
    d->set_close_on_decode_error(close_on_error);
    return d;
  };
}

}  // namespace

// ---- LengthFieldBasedFrameDecoder ---------------------------------------------------------

TEST(LengthFieldBasedFrameDecoder, NettyJavadocExamples) {
  // 2 bytes length, strip 0.
  auto r = run_decoder(length_field({.max_frame_length = 100, .length_field_length = 2}),
                       bytes_of(be_length(12, 2) + "HELLO, WORLD"));
  EXPECT_EQ(r.events, (std::vector<std::string>{"F:" + be_length(12, 2) + "HELLO, WORLD"}));
  // Strip the header.
  r = run_decoder(
      length_field(
          {.max_frame_length = 100, .length_field_length = 2, .initial_bytes_to_strip = 2}),
      bytes_of(be_length(12, 2) + "HELLO, WORLD"));
  EXPECT_EQ(r.events, (std::vector<std::string>{"F:HELLO, WORLD"}));
  // Length includes the header: adjustment -2.
  r = run_decoder(length_field({.max_frame_length = 100,
                                .length_field_length = 2,
                                .length_adjustment = -2,
                                .initial_bytes_to_strip = 2}),
                  bytes_of(be_length(14, 2) + "HELLO, WORLD"));
  EXPECT_EQ(r.events, (std::vector<std::string>{"F:HELLO, WORLD"}));
  // 3-byte length after a 2-byte header, full frame kept.
  r = run_decoder(
      length_field({.max_frame_length = 100, .length_field_offset = 2, .length_field_length = 3}),
      bytes_of("\xCA\xFE" + be_length(12, 3) + "HELLO, WORLD"));
  EXPECT_EQ(r.events, (std::vector<std::string>{"F:\xCA\xFE" + be_length(12, 3) + "HELLO, WORLD"}));
  // HDR1 | LEN | HDR2 | body, strip HDR1 and LEN.
  r = run_decoder(length_field({.max_frame_length = 100,
                                .length_field_offset = 1,
                                .length_field_length = 2,
                                .length_adjustment = 1,
                                .initial_bytes_to_strip = 3}),
                  bytes_of("\xCA" + be_length(12, 2) + "\xFE" + "HELLO, WORLD"));
  EXPECT_EQ(r.events, (std::vector<std::string>{"F:\xFEHELLO, WORLD"}));
  EXPECT_FALSE(r.closed);
}

TEST(LengthFieldBasedFrameDecoder, FramesDoNotDependOnHowTheInputIsSplit) {
  std::string in;
  for (std::string body : {"a", "", "hello", "0123456789abcdef", "x"}) {
    in += be_length(body.size(), 2) + body;
  }
  auto whole = expect_split_independent(
      length_field({.max_frame_length = 64, .length_field_length = 2, .initial_bytes_to_strip = 2}),
      in);
  EXPECT_EQ(whole.events,
            (std::vector<std::string>{"F:a", "F:", "F:hello", "F:0123456789abcdef", "F:x"}));
  // Little-endian 8-byte field at an offset with an adjustment.
  std::string in2;
  for (std::string body : {"abc", "defgh", ""}) {
    in2 += "#" + le_length(body.size() + 2, 8) + "!!" + body;
  }
  auto whole2 = expect_split_independent(length_field({.byte_order = ByteOrder::little_endian,
                                                       .max_frame_length = 64,
                                                       .length_field_offset = 1,
                                                       .length_field_length = 8,
                                                       .length_adjustment = 0,
                                                       .initial_bytes_to_strip = 9}),
                                         in2);
  EXPECT_EQ(whole2.events, (std::vector<std::string>{"F:!!abc", "F:!!defgh", "F:!!"}));
}

TEST(LengthFieldBasedFrameDecoder, ErrorsAreSplitIndependentToo) {
  // Two good frames, then one too long: frames, then exactly one error, then closed.
  std::string in = be_length(1, 4) + "a" + be_length(2, 4) + "bc" + be_length(1000, 4) +
                   std::string(40, 'z') + be_length(1, 4) + "d";
  for (bool fail_fast : {true, false}) {
    auto whole = expect_split_independent(length_field({.max_frame_length = 32,
                                                        .length_field_length = 4,
                                                        .initial_bytes_to_strip = 4,
                                                        .fail_fast = fail_fast}),
                                          in, 100);
    if (fail_fast) {
      EXPECT_EQ(whole.events, (std::vector<std::string>{"F:a", "F:bc", "E:frame too long"}));
      EXPECT_TRUE(whole.closed);
    } else {
      // Reported once the whole announced frame was discarded, which never happens here.
      EXPECT_EQ(whole.events, (std::vector<std::string>{"F:a", "F:bc"}));
      EXPECT_FALSE(whole.closed);
    }
  }
  // Without fail-fast, the error comes after the last byte of the too-long frame.
  std::string complete =
      be_length(1, 4) + "a" + be_length(60, 4) + std::string(60, 'z') + be_length(1, 4) + "d";
  auto whole = expect_split_independent(length_field({.max_frame_length = 32,
                                                      .length_field_length = 4,
                                                      .initial_bytes_to_strip = 4,
                                                      .fail_fast = false}),
                                        complete, 100);
  EXPECT_EQ(whole.events, (std::vector<std::string>{"F:a", "E:frame too long"}));
  EXPECT_TRUE(whole.closed);
}

// The table of crafted headers: every field width, both byte orders.
struct Crafted {
  const char* what;
  std::uint64_t raw;  // value written into the length field (truncated to the width)
  std::int64_t adjustment;
  std::size_t strip;
  std::string expect;  // "frame" or an error message
  int only_width = 0;  // 0: every width
};

TEST(LengthFieldBasedFrameDecoder, CraftedLengthsTable) {
  const std::size_t max = 64;
  const std::vector<Crafted> table = {
      {"valid", 5, 0, 0, "frame"},
      {"zero length", 0, 0, 0, "frame"},
      {"exactly the maximum", 64, 0, 0, "frame", 0},
      {"above the maximum", 65, 0, 0, "frame too long"},
      {"all ones", ~std::uint64_t{0}, 0, 0, "frame too long"},  // 8 bytes: negative, see below
      {"0xFFFFFFFF", 0xFFFFFFFFu, 0, 0, "frame too long", 4},
      {"0xFFFFFFFF in 8 bytes", 0xFFFFFFFFu, 0, 0, "frame too long", 8},
      {"negative 8-byte", std::uint64_t{1} << 63, 0, 0, "corrupted frame", 8},
      {"INT64_MAX (wraps in Java)", std::uint64_t{INT64_MAX}, 0, 0, "corrupted frame", 8},
      {"INT64_MAX - 8", std::uint64_t{INT64_MAX} - 8, 0, 0, "frame too long", 8},
      {"overflow with adjustment", std::uint64_t{INT64_MAX}, 1, 0, "corrupted frame", 8},
      {"overflow with end offset", std::uint64_t{INT64_MAX} - 2, 0, 0, "corrupted frame", 8},
      {"adjusted below the field end", 0, -100, 0, "corrupted frame"},
      {"adjusted to just the header", 1, -1, 0, "frame"},
      {"strip larger than frame", 2, 0, 40, "corrupted frame"},
      {"huge adjustment", 1, INT64_MAX, 0, "corrupted frame", 8},
      {"adjustment above max", 1, 1000, 0, "frame too long"},
  };
  for (int width : {1, 2, 3, 4, 8}) {
    for (auto order : {ByteOrder::big_endian, ByteOrder::little_endian}) {
      for (const auto& c : table) {
        if (c.only_width != 0 && c.only_width != width) {
          continue;
        }
        std::uint64_t mask = width == 8 ? ~std::uint64_t{0} : (std::uint64_t{1} << (8 * width)) - 1;
        std::uint64_t raw = c.raw & mask;
        std::string expect = c.expect;
        if (std::string(c.what) == "all ones" && width == 8) {
          expect = "corrupted frame";  // a signed long: -1
        }
        if (std::string(c.what) == "above the maximum" ||
            std::string(c.what) == "exactly the maximum") {
          raw -= static_cast<std::uint64_t>(width);  // the frame counts the field itself
        }
        std::string field =
            order == ByteOrder::big_endian ? be_length(raw, width) : le_length(raw, width);
        // A frame is followed by nothing; an error case by junk that must never be decoded.
        std::size_t padding = 80;
        if (expect == "frame") {
          padding = static_cast<std::size_t>(static_cast<std::int64_t>(raw) + c.adjustment);
        }
        std::string in = field + std::string(padding, 'p');
        LengthFieldBasedFrameDecoder::Options o{.byte_order = order,
                                                .max_frame_length = max,
                                                .length_field_length = width,
                                                .length_adjustment = c.adjustment,
                                                .initial_bytes_to_strip = c.strip};
        auto r = run_decoder(length_field(o), bytes_of(in));
        SCOPED_TRACE(::testing::Message() << c.what << " width " << width << " "
                                          << (order == ByteOrder::big_endian ? "BE" : "LE"));
        ASSERT_FALSE(r.events.empty());
        if (expect == "frame") {
          EXPECT_EQ(r.events, (std::vector<std::string>{"F:" + in.substr(c.strip)}));
          EXPECT_FALSE(r.closed);
        } else {
          // The first error ends the connection: no frame after it.
          EXPECT_EQ(r.events.back(), "E:" + expect);
          EXPECT_EQ(r.events.size(), 1u);
          EXPECT_TRUE(r.closed);
        }
      }
    }
  }
}

TEST(LengthFieldBasedFrameDecoder, DiscardsATooLongFrameWithoutBufferingIt) {
  // Without fail-fast and without closing: Netty's discarding mode, then decoding goes on.
  auto d = std::make_shared<LengthFieldBasedFrameDecoder>(
      LengthFieldBasedFrameDecoder::Options{.max_frame_length = 1024,
                                            .length_field_length = 4,
                                            .initial_bytes_to_strip = 4,
                                            .fail_fast = false});
  d->set_close_on_decode_error(false);
  DecodeResult r;
  EmbeddedChannel ch({d, std::make_shared<niox::testing::DecodeCollector>(r)});
  const std::size_t announced = 1u << 20;  // 1 MiB frame announced, max is 1 KiB
  auto header = bytes_of(be_length(announced - 4, 4));
  ch.write_inbound(ByteBuffer::wrap(std::span<std::byte>(header)));
  std::vector<std::byte> chunk(16 * 1024, std::byte{'z'});
  for (std::size_t sent = 4; sent < announced; sent += chunk.size()) {
    std::size_t n = std::min(chunk.size(), announced - sent);
    ch.write_inbound(ByteBuffer::wrap(std::span<std::byte>(chunk.data(), n)));
    EXPECT_EQ(d->actual_readable_bytes(), 0u);  // nothing of it is kept
    if (sent + n < announced) {
      EXPECT_TRUE(r.events.empty());  // not fail-fast: reported after the last byte
    }
  }
  EXPECT_EQ(r.events, (std::vector<std::string>{"E:frame too long"}));
  auto next = bytes_of(be_length(2, 4) + "ok");
  ch.write_inbound(ByteBuffer::wrap(std::span<std::byte>(next)));
  EXPECT_EQ(r.events, (std::vector<std::string>{"E:frame too long", "F:ok"}));
  EXPECT_TRUE(ch.is_open());
}

TEST(LengthFieldBasedFrameDecoder, FailFastReportsAtOnceAndClosesByDefault) {
  auto d = std::make_shared<LengthFieldBasedFrameDecoder>(1024, 0, 4, 0, 4);
  EmbeddedChannel ch({d});
  auto header = bytes_of(be_length(1u << 30, 4));
  try {
    ch.write_inbound(ByteBuffer::wrap(std::span<std::byte>(header)));
    FAIL() << "expected TooLongFrameException";
  } catch (const TooLongFrameException& e) {
    EXPECT_EQ(e.code(), transport::Errc::frame_too_long);
    EXPECT_NE(std::string(e.what()).find("exceeds 1024"), std::string::npos);
  }
  EXPECT_FALSE(ch.is_open());
  EXPECT_TRUE(d->has_failed());
  // Later input is dropped, nothing reaches the next handler.
  auto more = bytes_of(be_length(1, 4) + "x");
  EXPECT_FALSE(ch.write_inbound(ByteBuffer::wrap(std::span<std::byte>(more))));
}

TEST(LengthFieldBasedFrameDecoder, FramesShareTheReceivedMemory) {
  auto in = bytes_of(be_length(3, 2) + "abc" + be_length(2, 2) + "de");
  EmbeddedChannel ch({std::make_shared<LengthFieldBasedFrameDecoder>(100, 0, 2, 0, 2)});
  auto buf = ByteBuffer::allocate(in.size());
  buf.put(std::span<const std::byte>(in));
  buf.flip();
  auto* base = buf.bytes().data();
  ch.write_inbound(buf);
  auto f1 = ch.read_inbound();
  auto f2 = ch.read_inbound();
  ASSERT_TRUE(f1 && f2);
  EXPECT_EQ(f1->get<ByteBuffer>().bytes().data(), base + 2);  // no copy
  EXPECT_EQ(f2->get<ByteBuffer>().bytes().data(), base + 7);
  EXPECT_EQ(f1->get<ByteBuffer>().capacity(), 3u);  // cannot see past its frame
}

// A frame cut off by the end of the stream is dropped with the stream: it does not travel on
// to the tail ("a message reached the tail" for every truncated request), not even when the
// pipeline is taken apart afterwards.
TEST(LengthFieldBasedFrameDecoder, AFrameTruncatedByEndOfStreamIsDropped) {
  auto d = std::make_shared<LengthFieldBasedFrameDecoder>(100, 0, 2, 0, 2);
  EmbeddedChannel ch({d});
  auto partial = bytes_of(be_length(10, 2) + "abc");  // 3 of the frame's 10 bytes
  EXPECT_FALSE(ch.write_inbound(ByteBuffer::wrap(std::span<std::byte>(partial))));
  EXPECT_EQ(d->actual_readable_bytes(), 5u);
  EXPECT_FALSE(ch.finish());
  EXPECT_EQ(d->actual_readable_bytes(), 0u);
  ch.pipeline().remove(*d);
  EXPECT_FALSE(ch.read_inbound());
}

// Frames are writable: a handler may change one in place and send it back.
TEST(LengthFieldBasedFrameDecoder, FramesAreWritable) {
  EmbeddedChannel ch({std::make_shared<LengthFieldBasedFrameDecoder>(100, 0, 2, 0, 2)});
  auto in = bytes_of(be_length(3, 2) + "abc");
  ch.write_inbound(ByteBuffer::wrap(std::span<std::byte>(in)));
  auto f = ch.read_inbound();
  ASSERT_TRUE(f);
  auto& frame = f->get<ByteBuffer>();
  EXPECT_FALSE(frame.is_read_only());
  frame.put(0, std::uint8_t{'A'});
  EXPECT_EQ(frame.string_view(), "Abc");
}

TEST(LengthFieldBasedFrameDecoder, RejectsBadParameters) {
  EXPECT_THROW(LengthFieldBasedFrameDecoder(0, 0, 4), IllegalArgumentException);
  EXPECT_THROW(LengthFieldBasedFrameDecoder(100, 0, 5), IllegalArgumentException);
  EXPECT_THROW(LengthFieldBasedFrameDecoder(10, 8, 4), IllegalArgumentException);
  EXPECT_NO_THROW(LengthFieldBasedFrameDecoder(12, 8, 4));
}

TEST(LengthFieldBasedFrameDecoder, EarlierFramesSurviveCompactionOfTheCumulation) {
  // Frames handed out must keep their bytes while later partial input is cumulated.
  auto d = std::make_shared<LengthFieldBasedFrameDecoder>(100, 0, 1, 0, 1);
  EmbeddedChannel ch({d});
  std::string first = be_length(3, 1) + "abc" + be_length(4, 1) + "de";  // frame + partial
  ch.write_inbound(ByteBuffer::wrap(std::string_view(first)).duplicate());
  auto f1 = ch.read_inbound();
  ASSERT_TRUE(f1);
  for (int i = 0; i < 50; ++i) {
    std::string more = i == 0 ? std::string("fg") : be_length(2, 1) + "hi";
    auto b = ByteBuffer::allocate(more.size());
    b.put(more);
    b.flip();
    ch.write_inbound(b);
  }
  EXPECT_EQ(f1->get<ByteBuffer>().string_view(), "abc");
  auto f2 = ch.read_inbound();
  ASSERT_TRUE(f2);
  EXPECT_EQ(f2->get<ByteBuffer>().string_view(), "defg");
  int n = 0;
  while (auto f = ch.read_inbound()) {
    EXPECT_EQ(f->get<ByteBuffer>().string_view(), "hi");
    ++n;
  }
  EXPECT_EQ(n, 49);
}

// ---- LengthFieldPrepender -----------------------------------------------------------------

TEST(LengthFieldPrepender, EmitsTheHeaderAsItsOwnBufferAndTheBodyUntouched) {
  EmbeddedChannel ch({std::make_shared<LengthFieldPrepender>(4)});
  std::string text = "HELLO, WORLD";
  auto body = ByteBuffer::allocate(text.size());
  body.put(text);
  body.flip();
  const std::byte* body_memory = body.bytes().data();
  ch.write_outbound(body);
  auto header = ch.read_outbound();
  auto out_body = ch.read_outbound();
  ASSERT_TRUE(header && out_body);
  EXPECT_EQ(header->get<ByteBuffer>().string_view(), be_length(12, 4));
  EXPECT_EQ(out_body->get<ByteBuffer>().bytes().data(), body_memory);  // the very same memory
  EXPECT_EQ(out_body->get<ByteBuffer>().string_view(), text);
  EXPECT_FALSE(ch.read_outbound());
}

TEST(LengthFieldPrepender, HeaderAndBodyLeaveInOneWritevWithoutCopy) {
  EmbeddedChannel ch({std::make_shared<LengthFieldPrepender>(2, 0, true)});
  std::vector<const void*> bases;
  ch.set_write_script([&](std::span<const iovec> iov, std::size_t bytes) {
    for (const auto& v : iov) {
      bases.push_back(v.iov_base);
    }
    return static_cast<long>(bytes);
  });
  std::string text(300, 'b');
  auto body = ByteBuffer::wrap(
      std::span<std::byte>(reinterpret_cast<std::byte*>(text.data()), text.size()));
  auto f = ch.write_and_flush(body);
  ch.run_pending_tasks();
  EXPECT_TRUE(f.is_success());
  ASSERT_EQ(ch.write_calls().size(), 1u);
  EXPECT_EQ(ch.write_calls()[0].iovecs, 2u);
  ASSERT_EQ(bases.size(), 2u);
  EXPECT_EQ(bases[1], text.data());
  std::string wire(reinterpret_cast<const char*>(ch.written_bytes().data()),
                   ch.written_bytes().size());
  EXPECT_EQ(wire, be_length(302, 2) + text);
}

TEST(LengthFieldPrepender, LengthsThatDoNotFitFailTheWrite) {
  EmbeddedChannel ch({std::make_shared<LengthFieldPrepender>(1)});
  auto f = ch.write_and_flush(ByteBuffer::allocate(256));
  ch.run_pending_tasks();
  EXPECT_EQ(f.cause(), transport::Errc::handler_failed);
  EXPECT_FALSE(ch.read_outbound());
  EXPECT_THROW(LengthFieldPrepender(1, -5).encode_header(4), IllegalArgumentException);
  EXPECT_EQ(LengthFieldPrepender(3, 0, false, ByteOrder::little_endian)
                .encode_header(0x010203)
                .string_view(),
            le_length(0x010203, 3));
  EXPECT_THROW(LengthFieldPrepender(5), IllegalArgumentException);
}

TEST(LengthFieldPrepender, RoundTripsThroughTheDecoder) {
  EmbeddedChannel enc(
      {std::make_shared<LengthFieldPrepender>(8, 0, false, ByteOrder::little_endian)});
  std::string wire;
  for (std::string_view s : {"one", "", "three"}) {  // literals: memory outlives the buffers
    enc.write_outbound(ByteBuffer::wrap(s));
  }
  while (auto m = enc.read_outbound()) {
    wire += m->get<ByteBuffer>().string_view();
  }
  auto r = expect_split_independent(length_field({.byte_order = ByteOrder::little_endian,
                                                  .max_frame_length = 100,
                                                  .length_field_length = 8,
                                                  .initial_bytes_to_strip = 8}),
                                    wire, 50);
  EXPECT_EQ(r.events, (std::vector<std::string>{"F:one", "F:", "F:three"}));
}

TEST(LengthFieldPrepender, HardLimitRefusingTheBodyClosesTheChannel) {
  EmbeddedChannel ch({std::make_shared<LengthFieldPrepender>(4)});
  ch.config().set_write_buffer_hard_limit(100);
  ch.set_write_script([](std::span<const iovec>, std::size_t) { return 0L; });
  auto f = ch.write_and_flush(ByteBuffer::allocate(200));  // header fits, body does not
  ch.run_pending_tasks();
  EXPECT_EQ(f.cause(), transport::Errc::outbound_buffer_full);
  EXPECT_FALSE(ch.is_open());  // a header without its body would corrupt the stream
}

// ---- LineBasedFrameDecoder ----------------------------------------------------------------

DecoderFactory line(std::size_t max, bool strip = true, bool fail_fast = false) {
  return [=] { return std::make_shared<LineBasedFrameDecoder>(max, strip, fail_fast); };
}

TEST(LineBasedFrameDecoder, SplitsOnLfAndCrLfWhateverTheSplit) {
  std::string in = "first\r\nsecond\nthird\r\n\n\r\nlast one!\n";
  auto r = expect_split_independent(line(16), in);
  EXPECT_EQ(r.events, (std::vector<std::string>{"F:first", "F:second", "F:third",
                                                "F:", "F:", "F:last one!"}));
  r = expect_split_independent(line(16, false), in);
  EXPECT_EQ(r.events, (std::vector<std::string>{"F:first\r\n", "F:second\n", "F:third\r\n", "F:\n",
                                                "F:\r\n", "F:last one!\n"}));
  // A bare '\r' is data.
  r = expect_split_independent(line(16), "a\rb\n");
  EXPECT_EQ(r.events, (std::vector<std::string>{"F:a\rb"}));
}

TEST(LineBasedFrameDecoder, ExactlyMaxLengthWithCrLfIsAcceptedForEverySplit) {
  auto r = expect_split_independent(line(5), "12345\r\nabcde\n");
  EXPECT_EQ(r.events, (std::vector<std::string>{"F:12345", "F:abcde"}));
}

TEST(LineBasedFrameDecoder, TooLongLinesFailAndCloseWithEitherPolicy) {
  for (bool fail_fast : {false, true}) {
    auto r = expect_split_independent(line(4, true, fail_fast), "ok\n123456789\r\nnext\n", 100);
    EXPECT_EQ(r.events, (std::vector<std::string>{"F:ok", "E:frame too long"}));
    EXPECT_TRUE(r.closed);
  }
}

TEST(LineBasedFrameDecoder, DiscardsTooLongLinesAndGoesOnWhenNotClosing) {
  for (bool fail_fast : {false, true}) {
    auto make = [fail_fast] {
      auto d = std::make_shared<LineBasedFrameDecoder>(4, true, fail_fast);
      d->set_close_on_decode_error(false);
      return d;
    };
    auto r = expect_split_independent(make, "ok\n123456789\r\nnext\n", 100);
    EXPECT_EQ(r.events, (std::vector<std::string>{"F:ok", "E:frame too long", "F:next"}));
    EXPECT_FALSE(r.closed);
  }
}

TEST(LineBasedFrameDecoder, NeverKeepsMoreThanTheMaximum) {
  auto d = std::make_shared<LineBasedFrameDecoder>(100);
  d->set_close_on_decode_error(false);
  EmbeddedChannel ch({d, std::make_shared<ChannelInboundHandlerAdapter>()});
  std::string junk(1000, 'j');
  for (int i = 0; i < 100; ++i) {
    ch.pipeline().fire_channel_read(ByteBuffer::wrap(std::string_view(junk)).duplicate());
    EXPECT_LE(d->actual_readable_bytes(), 100u + 1);
  }
}

// ---- HeaderBodyDecoder --------------------------------------------------------------------

namespace {
// Header: 2 bytes of type, 4 bytes of big-endian body length.
std::size_t body_length_of(const ByteBuffer& h) {
  return static_cast<std::uint32_t>(h.get_int(h.position() + 2));
}
std::string header(const std::string& type, std::uint32_t length) {
  return type + be_length(length, 4);
}
DecoderFactory header_body(std::size_t max_body) {
  return [max_body] {
    return std::make_shared<HeaderBodyDecoder>(
        6, max_body, body_length_of, [](const ByteBuffer& h) {
          // Two destination buffers per body to exercise the scatter.
          HeaderBodyDecoder::BodyTarget t;
          t.length = body_length_of(h);
          t.buffers.push_back(ByteBuffer::allocate(t.length / 2));
          t.buffers.push_back(ByteBuffer::allocate(t.length - t.length / 2 + 3));
          return t;
        });
  };
}
}  // namespace

TEST(HeaderBodyDecoder, MessagesDoNotDependOnHowTheInputIsSplit) {
  std::string in = header("AA", 5) + "hello" + header("BB", 0) + header("CC", 11) + "hello world";
  auto r = expect_split_independent(header_body(64), in);
  EXPECT_EQ(r.events, (std::vector<std::string>{"H:" + header("AA", 5) + "|hello",
                                                "H:" + header("BB", 0) + "|",
                                                "H:" + header("CC", 11) + "|hello world"}));
  EXPECT_FALSE(r.closed);
}

TEST(HeaderBodyDecoder, BodiesAboveTheMaximumAreRefusedBeforeAskingForBuffers) {
  int asked = 0;
  auto make = [&asked] {
    return std::make_shared<HeaderBodyDecoder>(
        6, 16, body_length_of, [&asked](const ByteBuffer& h) {
          ++asked;
          return HeaderBodyDecoder::BodyTarget{body_length_of(h),
                                               {ByteBuffer::allocate(body_length_of(h))}};
        });
  };
  std::string in = header("OK", 2) + "hi" + header("XX", 0xFFFFFFFFu) + "junk";
  auto r = expect_split_independent(make, in, 30);
  EXPECT_EQ(r.events,
            (std::vector<std::string>{"H:" + header("OK", 2) + "|hi", "E:frame too long"}));
  EXPECT_TRUE(r.closed);
  EXPECT_GT(asked, 0);
}

TEST(HeaderBodyDecoder, ScattersTheBodyIntoTheCallersMemoryWithoutCopies) {
  std::vector<std::byte> part1(4), part2(100);
  auto decoder =
      std::make_shared<HeaderBodyDecoder>(6, 1024, body_length_of, [&](const ByteBuffer& h) {
        HeaderBodyDecoder::BodyTarget t;
        t.length = body_length_of(h);
        t.buffers.push_back(ByteBuffer::wrap(std::span<std::byte>(part1)));
        t.buffers.push_back(ByteBuffer::wrap(std::span<std::byte>(part2)));
        return t;
      });
  EmbeddedChannel ch({decoder});
  std::string in = header("ZZ", 10) + "0123456789";
  // Header split, body split across three reads.
  for (auto piece : {in.substr(0, 3), in.substr(3, 5), in.substr(8, 4), in.substr(12)}) {
    ch.write_inbound(ByteBuffer::wrap(std::string_view(piece)).duplicate());
  }
  auto m = ch.read_inbound();
  ASSERT_TRUE(m);
  auto& hb = m->get<HeaderBodyMessage>();
  EXPECT_EQ(hb.header.string_view(), header("ZZ", 10));
  EXPECT_EQ(hb.body_length, 10u);
  ASSERT_EQ(hb.body.size(), 2u);
  EXPECT_EQ(hb.body[0].bytes().data(), part1.data());  // the caller's memory
  EXPECT_EQ(hb.body[1].bytes().data(), part2.data());
  EXPECT_EQ(hb.body[0].string_view(), "0123");
  EXPECT_EQ(hb.body[1].string_view(), "456789");
  EXPECT_EQ(std::memcmp(part2.data(), "456789", 6), 0);
  EXPECT_EQ(decoder->header_bytes_buffered(), 0u);
}

TEST(HeaderBodyDecoder, TooSmallOrReadOnlyTargetsAreDecodeErrors) {
  auto small = [] {
    return std::make_shared<HeaderBodyDecoder>(6, 1024, body_length_of, [](const ByteBuffer& h) {
      return HeaderBodyDecoder::BodyTarget{body_length_of(h), {ByteBuffer::allocate(1)}};
    });
  };
  auto r = run_decoder(small, bytes_of(header("AA", 5) + "hello"));
  ASSERT_EQ(r.events.size(), 1u);
  EXPECT_EQ(r.events[0], "E:decoder failed");
  EXPECT_TRUE(r.closed);
  auto read_only = [] {
    return std::make_shared<HeaderBodyDecoder>(6, 1024, body_length_of, [](const ByteBuffer& h) {
      return HeaderBodyDecoder::BodyTarget{body_length_of(h),
                                           {ByteBuffer::allocate(10).as_read_only_buffer()}};
    });
  };
  r = run_decoder(read_only, bytes_of(header("AA", 5) + "hello"));
  EXPECT_EQ(r.events, (std::vector<std::string>{"E:decoder failed"}));
}

TEST(LengthFieldBasedFrameDecoder, GoesOnAfterACorruptedFrameWhenNotClosing) {
  auto make = [] {
    auto d = std::make_shared<LengthFieldBasedFrameDecoder>(100, 0, 8, 0, 8);
    d->set_close_on_decode_error(false);
    return d;
  };
  std::string in =
      be_length(std::uint64_t{1} << 63, 8) + be_length(2, 8) + "ok" + be_length(1, 8) + "!";
  auto r = expect_split_independent(make, in, 100);
  EXPECT_EQ(r.events, (std::vector<std::string>{"E:corrupted frame", "F:ok", "F:!"}));
  EXPECT_FALSE(r.closed);
}

TEST(ByteToMessageDecoder, RemovingTheDecoderPassesUndecodedBytesOn) {
  // E.g. a protocol switch: the decoder leaves, the bytes it held go to the next handler.
  EmbeddedChannel ch({std::make_shared<LengthFieldBasedFrameDecoder>(100, 0, 2, 0, 2)});
  auto name = ch.pipeline().names().front();
  std::string in = be_length(3, 2) + "abc" + be_length(5, 2) + "de";
  ch.write_inbound(ByteBuffer::wrap(std::string_view(in)));
  auto frame = ch.read_inbound();
  ASSERT_TRUE(frame);
  EXPECT_EQ(frame->get<ByteBuffer>().string_view(), "abc");
  EXPECT_FALSE(ch.read_inbound());
  ch.pipeline().remove(name);
  auto rest = ch.read_inbound();
  ASSERT_TRUE(rest);
  EXPECT_EQ(rest->get<ByteBuffer>().string_view(), be_length(5, 2) + "de");
}

TEST(ByteToMessageDecoder, NonBytesPassThrough) {
  EmbeddedChannel ch({std::make_shared<LineBasedFrameDecoder>(10)});
  ch.write_inbound(std::string("an object"));
  auto m = ch.read_inbound();
  ASSERT_TRUE(m);
  EXPECT_EQ(m->get<std::string>(), "an object");
}
