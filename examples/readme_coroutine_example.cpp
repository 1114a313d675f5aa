#include <niox/niox.hpp>
#include <fmt/core.h>

using namespace niox;

Task<void> echo(AsynchronousSocketChannel ch) {
  auto buf = ByteBuffer::allocate(4096);
  while (co_await ch.read(buf) > 0) {  // -1 at end of stream
    buf.flip();
    co_await ch.write(buf);  // every remaining byte
    buf.clear();
  }
}

Task<void> client(EventLoop& loop, SocketAddress server) {
  auto ch = AsynchronousSocketChannel::open(loop);
  co_await ch.connect(server);
  auto out = ByteBuffer::wrap(std::string_view("hello, coroutines"));
  co_await ch.write(out);
  ch.shutdown_output();
  auto in = ByteBuffer::allocate(64);
  while (co_await ch.read(in) > 0) {
  }
  in.flip();
  fmt::print("echoed: {}\n", in.string_view());
}

Task<void> run(EventLoop& loop) {
  co_await resume_on(loop);
  auto server = AsynchronousServerSocketChannel::open(loop);
  server.bind(InetSocketAddress::loopback_v4(0));
  TaskGroup group;
  group.spawn(client(loop, *server.local_address()));
  group.spawn(echo(co_await server.accept()));
  co_await group.join();
}

int main() {
  EventLoopGroup loops(EventLoopGroup::Options{.threads = 1});
  sync_wait(run(loops.loop(0)));
}
