// The kv example's server side: a store shared by every connection, the pipeline of one
// connection (IdleStateHandler → HeaderBodyDecoder → KvServerHandler), and kv_server's command
// line.
#pragma once

#include "kv_protocol.hpp"
#include "server_program.hpp"

#include <niox/transport/channel.hpp>

#include <chrono>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>

namespace niox::kv {

// Keys to values. A value is the very buffer its PUT's body was scattered into (no copy on the
// way in); a GET's reply writes a view of it (no copy on the way out), so a value stays alive
// while a reply still carries it even if it is replaced meanwhile. Thread-safe.
class KvStore {
 public:
  void put(std::string key, ByteBuffer value);
  std::optional<ByteBuffer> get(const std::string& key) const;
  bool erase(const std::string& key);
  std::size_t size() const;

 private:
  mutable std::mutex mutex_;
  std::unordered_map<std::string, ByteBuffer> map_;
};

struct KvServerConfig {
  // A connection on which nothing was read and no write completed for this long is closed
  // (IdleStateHandler); zero: never.
  std::chrono::nanoseconds idle_timeout = std::chrono::seconds(60);
};

// Adds the server's handlers to an accepted channel's pipeline (and allows half-closure: a
// client may shut its output down and still read the replies). `store` must outlive it.
//
// Every request decoded is answered in order, even those before a bad frame or the client's
// EOF: they are answered, flushed, and then the connection closes. Flow control per request:
// once the replies queued pass the high water mark, no further decoded request is executed (the
// rest wait in the handler, a few bytes each) and reading stops until the channel is writable.
void init_server_pipeline(Channel& channel, KvStore& store, const KvServerConfig& config = {});

// kv_server's command line.
struct KvServerOptions : examples::ServerOptions {
  KvServerOptions() {
    port = 7070;
    bind = "127.0.0.1";
  }
  double idle_timeout_seconds = 60;  // --idle-timeout; 0: off
};

struct KvServerArgs {
  std::optional<KvServerOptions> options;  // set when the server should run
  bool help = false;                       // --help: print server_usage(), exit 0
  std::string error;                       // a usage error: print it and server_usage(), exit 2
};

KvServerArgs parse_server_args(std::span<const std::string_view> args);
std::string server_usage();

}  // namespace niox::kv
