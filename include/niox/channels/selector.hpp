// Selector and SelectionKey (java.nio.channels) on level-triggered epoll.
//
//   auto selector = Selector::open();
//   server.configure_blocking(false);
//   server.register_with(selector, SelectionKey::OP_ACCEPT);
//   while (selector.select() >= 0) {
//     for (SelectionKey* key : selector.selected_keys()) { ... }
//     selector.selected_keys().clear();
//   }
//
// Threads: one thread selects and changes keys; wakeup() may be called from any thread.
// Lifetime: the selector owns its keys. A cancelled key (cancel(), or its channel closed or
// destroyed) stays valid memory until the next selection operation, like a Java key that leaves
// the key set at the next select. A registered channel must not be used from another selector
// thread; moving a channel carries its keys along.
#pragma once

#include <niox/channels/selectable_channel.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

namespace niox {

class SelectionKey {
 public:
  // Java's values.
  static constexpr int OP_READ = 1 << 0;
  static constexpr int OP_WRITE = 1 << 2;
  static constexpr int OP_CONNECT = 1 << 3;
  static constexpr int OP_ACCEPT = 1 << 4;

  SelectionKey(const SelectionKey&) = delete;
  SelectionKey& operator=(const SelectionKey&) = delete;

  // Throw CancelledKeyException once the key is cancelled (not channel()/selector()).
  SelectableChannel& channel() const noexcept { return *channel_; }
  Selector& selector() const noexcept { return *selector_; }
  bool is_valid() const noexcept { return valid_; }
  // Deregisters now; idempotent.
  void cancel() noexcept;

  int interest_ops() const;
  // Throws IllegalArgumentException for ops outside channel().valid_ops().
  SelectionKey& interest_ops(int ops);
  SelectionKey& interest_ops_or(int ops) { return interest_ops(interest_ops() | ops); }
  SelectionKey& interest_ops_and(int ops) { return interest_ops(interest_ops() & ops); }
  // The ready set from the last selection that selected this key.
  int ready_ops() const;
  bool is_readable() const { return (ready_ops() & OP_READ) != 0; }
  bool is_writable() const { return (ready_ops() & OP_WRITE) != 0; }
  bool is_connectable() const { return (ready_ops() & OP_CONNECT) != 0; }
  bool is_acceptable() const { return (ready_ops() & OP_ACCEPT) != 0; }

  // The attachment is not owned; returns the previous one.
  void* attach(void* attachment) noexcept {
    void* old = attachment_;
    attachment_ = attachment;
    return old;
  }
  void* attachment() const noexcept { return attachment_; }
  template <class T>
  T* attachment_as() const noexcept {
    return static_cast<T*>(attachment_);
  }

 private:
  friend class Selector;
  friend class SelectableChannel;
  SelectionKey(Selector* selector, SelectableChannel* channel, void* attachment) noexcept
      : selector_(selector), channel_(channel), attachment_(attachment) {}
  void check_valid() const;

  Selector* selector_;
  SelectableChannel* channel_;
  void* attachment_;
  int interest_ = 0;
  int ready_ = 0;
  bool valid_ = true;
  bool in_epoll_ = false;
  std::uint64_t selected_gen_ = 0;
};

class Selector {
 public:
  // Throws std::system_error if epoll or the wakeup eventfd cannot be created.
  static Selector open() { return Selector(); }
  Selector();
  Selector(const Selector&) = delete;
  Selector& operator=(const Selector&) = delete;
  ~Selector();

  bool is_open() const noexcept { return epfd_.valid(); }
  // Cancels every key and releases the epoll descriptor. Idempotent.
  void close() noexcept;

  // Registers `channel` (which must be non-blocking, else IllegalBlockingModeException) for
  // `ops`, or updates its existing key's interest and attachment. The key is owned here.
  SelectionKey& register_channel(SelectableChannel& channel, int ops, void* attachment = nullptr);

  // Wait for at least one registered channel to be ready, wakeup(), or a signal. Return how
  // many keys had their ready set updated (added to selected_keys(), or more ops ready).
  // Like Java, a zero timeout means "no timeout".
  int select();
  int select(std::chrono::milliseconds timeout);
  int select_now();
  // Makes the current or the next selection return at once. Any thread; never throws.
  Selector& wakeup() noexcept;

  // The selected-key set: the caller removes what it handled (usually clear() after the loop).
  // Keys selected again while still present have their ready set or-ed, as in Java.
  std::vector<SelectionKey*>& selected_keys();
  // Every valid key.
  std::vector<SelectionKey*> keys() const;

 private:
  friend class SelectionKey;
  friend class SelectableChannel;
  int do_select(int timeout_ms);
  void update_epoll(SelectionKey& key);
  void deregister(SelectionKey& key) noexcept;
  void purge_cancelled() noexcept;

  FileDescriptor epfd_;  // the selector's own, closed by close()
  FileDescriptor wakeup_fd_;
  std::uint64_t generation_ = 0;
  std::vector<std::unique_ptr<SelectionKey>> keys_;
  std::vector<std::unique_ptr<SelectionKey>> cancelled_;
  std::vector<SelectionKey*> selected_;
};

}  // namespace niox
