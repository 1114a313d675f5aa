// Runs a decoder over an input split at given cut points and records what came out, so tests
// and fuzz targets can check that the result does not depend on the split.
#pragma once

#include <niox/transport/codec/decoder_exception.hpp>
#include <niox/transport/codec/header_body_decoder.hpp>
#include <niox/transport/embedded_channel.hpp>

#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace niox::testing {

struct DecodeResult {
  std::vector<std::string> events;  // "F:<frame bytes>" or "E:<error code>"
  bool closed = false;
  bool operator==(const DecodeResult&) const = default;
};

// Collects frames and exceptions at the end of the pipeline.
class DecodeCollector : public ChannelInboundHandlerAdapter {
 public:
  explicit DecodeCollector(DecodeResult& r) : r_(r) {}
  void channel_read(ChannelHandlerContext&, Message&& msg) override {
    if (auto* b = msg.get_if<ByteBuffer>()) {
      r_.events.push_back("F:" + std::string(b->string_view()));
    } else if (auto* hb = msg.get_if<HeaderBodyMessage>()) {
      std::string s = "H:" + std::string(hb->header.string_view()) + "|";
      for (const auto& part : hb->body) {
        s += part.string_view();
      }
      r_.events.push_back(std::move(s));
    } else {
      r_.events.push_back("?");
    }
  }
  void exception_caught(ChannelHandlerContext&, std::exception_ptr e) override {
    try {
      std::rethrow_exception(e);
    } catch (const std::system_error& ex) {
      r_.events.push_back("E:" + ex.code().message());
    } catch (...) {
      r_.events.push_back("E:?");
    }
  }

 private:
  DecodeResult& r_;
};

using DecoderFactory = std::function<std::shared_ptr<ChannelHandler>()>;

// Feeds input[cuts[i-1], cuts[i]) chunk by chunk (each in its own freshly allocated buffer),
// then closes the channel. `cuts` are ascending positions inside the input.
inline DecodeResult run_decoder(const DecoderFactory& make, std::span<const std::byte> input,
                                std::span<const std::size_t> cuts) {
  DecodeResult r;
  {
    EmbeddedChannel ch({make(), std::make_shared<DecodeCollector>(r)});
    std::size_t from = 0;
    auto feed = [&](std::size_t to) {
      auto chunk = ByteBuffer::allocate(to - from);
      chunk.put(input.subspan(from, to - from));
      chunk.flip();
      ch.write_inbound(std::move(chunk));
      from = to;
    };
    for (auto c : cuts) {
      if (c > from && c <= input.size()) {
        feed(c);
      }
    }
    if (from < input.size()) {
      feed(input.size());
    }
    r.closed = !ch.is_open();
    ch.close();
    ch.run_pending_tasks();
  }
  return r;
}

inline DecodeResult run_decoder(const DecoderFactory& make, std::span<const std::byte> input) {
  return run_decoder(make, input, std::span<const std::size_t>());
}

}  // namespace niox::testing
