// SelectableChannel: a channel that owns a file descriptor, can be switched between blocking and
// non-blocking mode, and can be registered with Selectors (java.nio.channels.SelectableChannel).
#pragma once

#include <niox/base/file_descriptor.hpp>
#include <niox/channels/channel.hpp>

#include <cstdint>
#include <vector>

namespace niox {

class Selector;
class SelectionKey;

class SelectableChannel : public virtual NioChannel {
 public:
  SelectableChannel(const SelectableChannel&) = delete;
  SelectableChannel& operator=(const SelectableChannel&) = delete;
  // Closes the descriptor and cancels every key.
  ~SelectableChannel() override;

  bool is_open() const noexcept override { return fd_.valid(); }
  // Cancels every key, then closes the descriptor (a close error is dropped). Idempotent.
  void close() noexcept override;
  // The number, owned by this channel until it closes or releases it (-1 once closed).
  int native_handle() const noexcept override { return fd_.get(); }
  // Gives the descriptor to the caller (who must close it) and leaves this channel closed;
  // keys are cancelled first. Returns -1 if already closed.
  int release() noexcept;

  // Sets or clears O_NONBLOCK. Throws IllegalBlockingModeException when asked to block while
  // registered with a selector (like Java), std::system_error on failure.
  SelectableChannel& configure_blocking(bool block);
  bool is_blocking() const noexcept { return blocking_; }

  // The operations (SelectionKey::OP_*) this kind of channel supports.
  virtual int valid_ops() const noexcept = 0;

  // Java's register(selector, ops, attachment) (`register` is a C++ keyword). Same as
  // selector.register_channel(*this, ops, attachment).
  SelectionKey& register_with(Selector& selector, int ops, void* attachment = nullptr);
  // The key registering this channel with `selector`, or nullptr.
  SelectionKey* key_for(const Selector& selector) const noexcept;
  bool is_registered() const noexcept { return !keys_.empty(); }

  // Which of `interest` a readiness event (EPOLL* bits) makes ready. Sockets refine it.
  virtual int translate_ready_ops(std::uint32_t events, int interest) const noexcept;

 protected:
  SelectableChannel() = default;
  // Owns `fd` (which may be invalid) from here on and reads its blocking mode.
  explicit SelectableChannel(FileDescriptor fd) noexcept;
  // Keys follow the channel to its new address; the moved-from channel is closed and owns
  // nothing. Assignment closes what this channel owned first.
  SelectableChannel(SelectableChannel&& other) noexcept;
  SelectableChannel& operator=(SelectableChannel&& other) noexcept;

  FileDescriptor fd_;
  bool blocking_ = true;

 private:
  friend class Selector;
  friend class SelectionKey;
  void cancel_all_keys() noexcept;

  std::vector<SelectionKey*> keys_;
};

}  // namespace niox
