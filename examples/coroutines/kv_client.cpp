// niox-coroutine-kv-client: the kv protocol's client (examples/kv/) as coroutines, pipelining
// its requests on one connection with when_all.
//
//   niox-coroutine-kv-client --to ADDR:PORT get KEY | put KEY VALUE | del KEY
//   niox-coroutine-kv-client --to ADDR:PORT check N   puts N keys at once, gets them back at
//                                                      once, verifies every value
//
// A request is one gathering write (header, key, value). Replies come back in request order, so
// one reader coroutine takes them off the connection and hands each to the call waiting for it:
// any number of calls may be in flight, and `co_await when_all(calls)` awaits them together.
#include "kv_protocol.hpp"

#include <niox/async/asynchronous_socket_channel.hpp>
#include <niox/async/spawn.hpp>
#include <niox/async/when_all.hpp>
#include <niox/async/when_any.hpp>
#include <niox/loop/event_loop_group.hpp>

#include <array>
#include <coroutine>
#include <deque>
#include <iostream>
#include <string>
#include <vector>

using namespace niox;

namespace {

struct Reply {
  kv::Status status = kv::Status::ok;
  std::string value;
};

// One connection's pipeline. Used on its loop's thread only.
class Connection {
 public:
  explicit Connection(AsynchronousSocketChannel ch) : ch_(std::move(ch)) {}

  Task<Reply> call(kv::Op op, std::string key, std::string value = {}) {
    const auto id = next_id_++;
    Waiter w;
    waiting_.push_back(&w);
    std::array<ByteBuffer, 3> request{
        kv::encode(kv::RequestHeader{op, static_cast<std::uint32_t>(key.size()),
                                     static_cast<std::uint32_t>(value.size()), id}),
        ByteBuffer::wrap(std::string_view(key)), ByteBuffer::wrap(std::string_view(value))};
    co_await ch_.write(request);  // the loop keeps writes in the order they were started
    if (!w.done) co_await WaitFor{w};
    if (w.error) std::rethrow_exception(w.error);
    co_return std::move(w.reply);
  }

  // Reads replies until `expected` calls have been answered, handing each to its caller.
  Task<void> read_replies(std::size_t expected) {
    ByteBuffer header = ByteBuffer::allocate(kv::header_size);  // one for every reply
    try {
      for (std::size_t i = 0; i < expected; ++i) {
        header.clear();
        co_await read_exactly(header);
        header.flip();
        kv::ResponseHeader h = kv::decode_response(header);
        Reply r{h.status, std::string(h.value_length, '\0')};
        ByteBuffer value = ByteBuffer::wrap(std::as_writable_bytes(std::span(r.value)));
        co_await read_exactly(value);
        Waiter* w = waiting_.front();
        waiting_.pop_front();
        w->reply = std::move(r);
        finish(*w);
      }
    } catch (...) {
      for (Waiter* w : waiting_) {  // the connection broke: every caller still waiting fails
        w->error = std::current_exception();
        finish(*w);
      }
      waiting_.clear();
      throw;
    }
  }

 private:
  struct Waiter {
    Reply reply;
    std::exception_ptr error;
    bool done = false;
    std::coroutine_handle<> h;
  };
  struct WaitFor {
    Waiter& w;
    bool await_ready() const noexcept { return w.done; }
    void await_suspend(std::coroutine_handle<> h) noexcept { w.h = h; }
    void await_resume() const noexcept {}
  };
  static void finish(Waiter& w) {
    w.done = true;
    if (w.h) detail::resume_soon(w.h);
  }
  Task<void> read_exactly(ByteBuffer& b) {
    while (b.has_remaining()) {
      // Bound first, tested after: GCC 12 drops the body of a coroutine with a co_await
      // directly in an if condition.
      if (std::int64_t n = co_await ch_.read(b); n < 0) {
        throw std::system_error(std::make_error_code(std::errc::connection_reset),
                                "the server closed the connection");
      }
    }
  }

  AsynchronousSocketChannel ch_;
  std::deque<Waiter*> waiting_;
  std::uint32_t next_id_ = 1;
};

// Calls issued together, replies read by one reader: when_all awaits both sides.
Task<std::vector<Reply>> pipelined(Connection& c, std::vector<Task<Reply>> calls) {
  const std::size_t n = calls.size();
  auto [replies, read] = co_await when_all(when_all(std::move(calls)), c.read_replies(n));
  (void)read;
  co_return std::move(replies);
}

Task<int> run(EventLoop& loop, SocketAddress to, std::vector<std::string> cmd) {
  co_await resume_on(loop);
  auto ch = AsynchronousSocketChannel::open(loop);
  co_await ch.connect(to);
  Connection c(std::move(ch));
  if (cmd[0] == "check") {
    const int n = std::stoi(cmd[1]);
    std::vector<Task<Reply>> puts, gets;
    for (int i = 0; i < n; ++i) {
      puts.push_back(c.call(kv::Op::put, "key-" + std::to_string(i), "value-" + std::to_string(i)));
    }
    for (const Reply& r : co_await pipelined(c, std::move(puts))) {
      if (r.status != kv::Status::ok) co_return 1;
    }
    for (int i = 0; i < n; ++i) gets.push_back(c.call(kv::Op::get, "key-" + std::to_string(i)));
    std::vector<Reply> got = co_await pipelined(c, std::move(gets));
    for (int i = 0; i < n; ++i) {
      if (got[i].status != kv::Status::ok || got[i].value != "value-" + std::to_string(i)) {
        std::cerr << "niox-coroutine-kv-client: key-" << i << " came back wrong\n";
        co_return 1;
      }
    }
    std::cout << n << " puts and " << n << " gets pipelined, every value verified" << std::endl;
    co_return 0;
  }
  std::vector<Task<Reply>> one;
  kv::Op op = cmd[0] == "get" ? kv::Op::get : cmd[0] == "put" ? kv::Op::put : kv::Op::del;
  one.push_back(c.call(op, cmd[1], cmd.size() > 2 ? cmd[2] : std::string()));
  Reply r = std::move((co_await pipelined(c, std::move(one)))[0]);
  if (r.status == kv::Status::ok && op == kv::Op::get) std::cout << r.value << std::endl;
  co_return r.status == kv::Status::ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const char* usage =
      "usage: niox-coroutine-kv-client --to ADDR:PORT get KEY | put KEY VALUE | del KEY | check N\n"
      "ADDR is an IPv4 literal. Prints the value of a get on stdout; check N pipelines N puts,\n"
      "then N gets, and verifies every value.\n"
      "Exit status: 0 ok, 1 not found or failed, 2 usage error.\n";
  std::vector<std::string> a(argv + 1, argv + argc);
  if (!a.empty() && (a[0] == "--help" || a[0] == "-h")) {
    std::cout << usage;
    return 0;
  }
  const bool ok = a.size() >= 4 && a[0] == "--to" &&
                  (((a[2] == "get" || a[2] == "del" || a[2] == "check") && a.size() == 4) ||
                   (a[2] == "put" && a.size() == 5));
  auto colon = ok ? a[1].rfind(':') : std::string::npos;
  if (colon == std::string::npos) {
    std::cerr << usage;
    return 2;
  }
  try {
    InetSocketAddress to(a[1].substr(0, colon),
                         static_cast<std::uint16_t>(std::stoul(a[1].substr(colon + 1))));
    EventLoopGroup loops(EventLoopGroup::Options{.threads = 1});
    return sync_wait(run(loops.loop(0), to, std::vector<std::string>(a.begin() + 2, a.end())));
  } catch (const std::exception& e) {
    std::cerr << "niox-coroutine-kv-client: " << e.what() << "\n";
    return 1;
  }
}
