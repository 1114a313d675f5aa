// The kv example's server side: a store shared by every connection and the pipeline of one
// connection (HeaderBodyDecoder → KvServerHandler).
#pragma once

#include "kv_protocol.hpp"

#include <niox/transport/channel.hpp>

#include <mutex>
#include <optional>
#include <string>
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

// Adds the server's handlers to an accepted channel's pipeline. `store` must outlive it.
void init_server_pipeline(Channel& channel, KvStore& store);

}  // namespace niox::kv
