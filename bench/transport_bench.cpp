// Micro-benchmarks of the transport's per-message costs without sockets:
//   pipeline hop cost, LengthFieldBasedFrameDecoder throughput, OutboundBuffer gather cost.
#include <niox/transport/codec/length_field_based_frame_decoder.hpp>
#include <niox/transport/embedded_channel.hpp>
#include <niox/transport/outbound_buffer.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <vector>

using namespace niox;

namespace {

struct Sink : ChannelInboundHandlerAdapter {
  std::size_t frames = 0;
  void channel_read(ChannelHandlerContext&, Message&&) override { ++frames; }
};

void BM_PipelineRead(benchmark::State& state) {
  EmbeddedChannel ch;
  for (int i = 0; i < state.range(0); ++i) {
    ch.pipeline().add_last(std::make_shared<ChannelInboundHandlerAdapter>());
  }
  auto sink = std::make_shared<Sink>();
  ch.pipeline().add_last("sink", sink);
  auto buf = ByteBuffer::allocate(64);
  for (auto _ : state) {
    ch.pipeline().fire_channel_read(buf);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(sink->frames));
}
BENCHMARK(BM_PipelineRead)->Arg(0)->Arg(4);

void BM_LengthFieldDecode(benchmark::State& state) {
  const std::size_t frame = static_cast<std::size_t>(state.range(0));
  const std::size_t read_size = 16 * 1024;
  std::vector<std::byte> stream;
  while (stream.size() < read_size * 64) {
    auto len = static_cast<std::uint32_t>(frame);
    for (int i = 3; i >= 0; --i) {
      stream.push_back(static_cast<std::byte>(len >> (8 * i)));
    }
    stream.insert(stream.end(), frame, std::byte{'x'});
  }
  EmbeddedChannel ch;
  ch.pipeline().add_last("dec",
                         std::make_shared<LengthFieldBasedFrameDecoder>(1 << 20, 0, 4, 0, 4));
  auto sink = std::make_shared<Sink>();
  ch.pipeline().add_last("sink", sink);
  std::size_t bytes = 0;
  for (auto _ : state) {
    // The stream is whole frames: each pass ends with an empty cumulation.
    for (std::size_t off = 0; off < stream.size(); off += read_size) {
      std::size_t n = std::min(read_size, stream.size() - off);
      auto b = ByteBuffer::allocate(n);  // a fresh read buffer, as a transport gives
      b.put(std::span<const std::byte>(stream.data() + off, n));
      b.flip();
      ch.pipeline().fire_channel_read(std::move(b));
      bytes += n;
    }
  }
  if (!ch.is_open()) {
    state.SkipWithError("decoder failed");
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes));
  state.SetItemsProcessed(static_cast<std::int64_t>(sink->frames));
}
BENCHMARK(BM_LengthFieldDecode)->Arg(64)->Arg(4096);

void BM_OutboundGather(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  std::vector<ByteBuffer> bufs;
  for (std::size_t i = 0; i < n; ++i) {
    bufs.push_back(ByteBuffer::allocate(64));
  }
  OutboundBuffer out;
  out.set_coalesce_threshold(static_cast<std::size_t>(state.range(1)));
  std::size_t items = 0;
  for (auto _ : state) {
    for (auto& b : bufs) {
      out.add_message(b, ChannelPromise());
    }
    out.add_flush();
    while (!out.is_empty()) {
      auto g = out.gather();
      benchmark::DoNotOptimize(g.iovecs.data());
      out.remove_bytes(g.bytes);
    }
    items += n;
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(items));
}
BENCHMARK(BM_OutboundGather)->Args({64, 0})->Args({64, 128});

}  // namespace

BENCHMARK_MAIN();
