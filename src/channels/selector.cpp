#include <niox/channels/selector.hpp>

#include "channels/fd_io.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

namespace niox {

// ---- SelectableChannel --------------------------------------------------------------------

SelectableChannel::SelectableChannel(FileDescriptor fd) noexcept
    : fd_(std::move(fd)), blocking_(!fd_.valid() || !detail::is_nonblocking(fd_.get())) {}

SelectableChannel::SelectableChannel(SelectableChannel&& other) noexcept
    : NioChannel(other),
      fd_(std::move(other.fd_)),
      blocking_(other.blocking_),
      keys_(std::move(other.keys_)) {
  other.blocking_ = true;
  other.keys_.clear();
  for (SelectionKey* k : keys_) {
    k->channel_ = this;
  }
}

SelectableChannel& SelectableChannel::operator=(SelectableChannel&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = std::move(other.fd_);
    blocking_ = other.blocking_;
    keys_ = std::move(other.keys_);
    other.blocking_ = true;
    other.keys_.clear();
    for (SelectionKey* k : keys_) {
      k->channel_ = this;
    }
  }
  return *this;
}

SelectableChannel::~SelectableChannel() { close(); }

void SelectableChannel::cancel_all_keys() noexcept {
  // cancel() removes the key from keys_, so iterate over a copy.
  auto keys = std::move(keys_);
  keys_.clear();
  for (SelectionKey* k : keys) {
    if (k->valid_) {
      k->selector_->deregister(*k);
    }
  }
}

void SelectableChannel::close() noexcept {
  cancel_all_keys();  // while the number still names this channel's descriptor in epoll
  fd_.reset();
}

int SelectableChannel::release() noexcept {
  cancel_all_keys();
  return fd_.release();
}

SelectableChannel& SelectableChannel::configure_blocking(bool block) {
  if (block && !keys_.empty()) {
    throw IllegalBlockingModeException();
  }
  std::error_code ec;
  if (!detail::set_nonblocking(fd_.get(), !block, ec)) {
    throw std::system_error(ec, "configure_blocking");
  }
  blocking_ = block;
  return *this;
}

SelectionKey& SelectableChannel::register_with(Selector& selector, int ops, void* attachment) {
  return selector.register_channel(*this, ops, attachment);
}

SelectionKey* SelectableChannel::key_for(const Selector& selector) const noexcept {
  for (SelectionKey* k : keys_) {
    if (k->selector_ == &selector && k->valid_) {
      return k;
    }
  }
  return nullptr;
}

int SelectableChannel::translate_ready_ops(std::uint32_t events, int interest) const noexcept {
  int ready = 0;
  if ((events & (EPOLLERR | EPOLLHUP)) != 0) {
    // Let the next operation report the error or the end of stream.
    return interest;
  }
  if ((events & (EPOLLIN | EPOLLRDHUP | EPOLLPRI)) != 0) {
    ready |= SelectionKey::OP_READ | SelectionKey::OP_ACCEPT;
  }
  if ((events & EPOLLOUT) != 0) {
    ready |= SelectionKey::OP_WRITE | SelectionKey::OP_CONNECT;
  }
  return ready & interest;
}

// ---- SelectionKey -------------------------------------------------------------------------

void SelectionKey::check_valid() const {
  if (!valid_) {
    throw CancelledKeyException();
  }
}

void SelectionKey::cancel() noexcept {
  if (valid_) {
    selector_->deregister(*this);
  }
}

int SelectionKey::interest_ops() const {
  check_valid();
  return interest_;
}

SelectionKey& SelectionKey::interest_ops(int ops) {
  check_valid();
  if ((ops & ~channel_->valid_ops()) != 0) {
    throw IllegalArgumentException("interest ops not valid for this channel");
  }
  interest_ = ops;
  selector_->update_epoll(*this);
  return *this;
}

int SelectionKey::ready_ops() const {
  check_valid();
  return ready_;
}

// ---- Selector -----------------------------------------------------------------------------

namespace {
std::uint32_t epoll_events(int ops) {
  std::uint32_t ev = 0;
  if ((ops & (SelectionKey::OP_READ | SelectionKey::OP_ACCEPT)) != 0) {
    ev |= EPOLLIN | EPOLLRDHUP;
  }
  if ((ops & (SelectionKey::OP_WRITE | SelectionKey::OP_CONNECT)) != 0) {
    ev |= EPOLLOUT;
  }
  return ev;
}
}  // namespace

// A throw below closes what was opened: the members own it already.
Selector::Selector() : epfd_(::epoll_create1(EPOLL_CLOEXEC)) {
  if (!epfd_) {
    throw std::system_error(detail::errno_code(), "epoll_create1");
  }
  wakeup_fd_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wakeup_fd_) {
    throw std::system_error(detail::errno_code(), "eventfd");
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = nullptr;  // the wakeup descriptor; every key has a non-null pointer
  if (::epoll_ctl(epfd_.get(), EPOLL_CTL_ADD, wakeup_fd_.get(), &ev) < 0) {
    throw std::system_error(detail::errno_code(), "epoll_ctl");
  }
}

Selector::~Selector() { close(); }

void Selector::close() noexcept {
  if (!epfd_) {
    return;
  }
  for (SelectionKey* k : keys()) {  // deregister() moves keys out of keys_
    deregister(*k);
  }
  selected_.clear();
  cancelled_.clear();
  keys_.clear();
  wakeup_fd_.reset();
  epfd_.reset();
}

SelectionKey& Selector::register_channel(SelectableChannel& channel, int ops, void* attachment) {
  if (!is_open()) {
    throw ClosedSelectorException();
  }
  if (!channel.is_open()) {
    throw std::system_error(std::make_error_code(std::errc::bad_file_descriptor), "register");
  }
  if (channel.is_blocking()) {
    throw IllegalBlockingModeException();
  }
  if ((ops & ~channel.valid_ops()) != 0) {
    throw IllegalArgumentException("interest ops not valid for this channel");
  }
  if (SelectionKey* existing = channel.key_for(*this)) {
    existing->attach(attachment);
    existing->interest_ops(ops);
    return *existing;
  }
  std::unique_ptr<SelectionKey> key(new SelectionKey(this, &channel, attachment));
  key->interest_ = ops;
  update_epoll(*key);  // throws before anything is recorded
  channel.keys_.push_back(key.get());
  keys_.push_back(std::move(key));
  return *keys_.back();
}

void Selector::update_epoll(SelectionKey& key) {
  std::uint32_t ev = epoll_events(key.interest_);
  int fd = key.channel_->native_handle();
  epoll_event e{};
  e.events = ev;
  e.data.ptr = &key;
  int rc = 0;
  // A descriptor with no interest leaves epoll: epoll would still report HUP/ERR for it, and a
  // level-triggered HUP nobody asked about would make every select return at once.
  if (ev == 0) {
    if (key.in_epoll_) {
      rc = ::epoll_ctl(epfd_.get(), EPOLL_CTL_DEL, fd, nullptr);
      key.in_epoll_ = false;
    }
  } else if (key.in_epoll_) {
    rc = ::epoll_ctl(epfd_.get(), EPOLL_CTL_MOD, fd, &e);
  } else {
    rc = ::epoll_ctl(epfd_.get(), EPOLL_CTL_ADD, fd, &e);
    key.in_epoll_ = rc == 0;
  }
  if (rc < 0) {
    throw std::system_error(detail::errno_code(), "epoll_ctl");
  }
}

void Selector::deregister(SelectionKey& key) noexcept {
  key.valid_ = false;
  if (key.in_epoll_ && epfd_) {
    // ENOENT/EBADF when the descriptor was already closed elsewhere: nothing to undo.
    ::epoll_ctl(epfd_.get(), EPOLL_CTL_DEL, key.channel_->native_handle(), nullptr);
    key.in_epoll_ = false;
  }
  auto& ck = key.channel_->keys_;
  ck.erase(std::remove(ck.begin(), ck.end(), &key), ck.end());
  auto it = std::find_if(keys_.begin(), keys_.end(), [&](auto& p) { return p.get() == &key; });
  if (it != keys_.end()) {
    cancelled_.push_back(std::move(*it));
    keys_.erase(it);
  }
}

void Selector::purge_cancelled() noexcept {
  if (cancelled_.empty()) {
    return;
  }
  selected_.erase(std::remove_if(selected_.begin(), selected_.end(),
                                 [](SelectionKey* k) { return !k->valid_; }),
                  selected_.end());
  cancelled_.clear();
}

int Selector::select() { return do_select(-1); }

int Selector::select(std::chrono::milliseconds timeout) {
  if (timeout.count() < 0) {
    throw IllegalArgumentException("negative timeout");
  }
  if (timeout.count() == 0) {
    return do_select(-1);  // Java: 0 waits without a time limit
  }
  return do_select(
      static_cast<int>(std::min<std::int64_t>(timeout.count(), std::numeric_limits<int>::max())));
}

int Selector::select_now() { return do_select(0); }

int Selector::do_select(int timeout_ms) {
  if (!is_open()) {
    throw ClosedSelectorException();
  }
  purge_cancelled();
  std::array<epoll_event, 256> events;
  int n = ::epoll_wait(epfd_.get(), events.data(), static_cast<int>(events.size()), timeout_ms);
  if (n < 0) {
    if (errno == EINTR) {
      return 0;  // like Java: a signal ends the selection with nothing selected
    }
    throw std::system_error(detail::errno_code(), "epoll_wait");
  }
  // Keys still in the selected set get their ready set or-ed; others replace it.
  ++generation_;
  for (SelectionKey* k : selected_) {
    k->selected_gen_ = generation_;
  }
  int updated = 0;
  for (int i = 0; i < n; ++i) {
    auto* key = static_cast<SelectionKey*>(events[i].data.ptr);
    if (key == nullptr) {
      std::uint64_t drained;
      while (::read(wakeup_fd_.get(), &drained, sizeof drained) > 0) {
      }
      continue;
    }
    if (!key->valid_) {
      continue;
    }
    int ready = key->channel_->translate_ready_ops(events[i].events, key->interest_);
    if (ready == 0) {
      continue;
    }
    if (key->selected_gen_ == generation_) {
      if ((key->ready_ | ready) != key->ready_) {
        key->ready_ |= ready;
        ++updated;
      }
    } else {
      key->ready_ = ready;
      key->selected_gen_ = generation_;
      selected_.push_back(key);
      ++updated;
    }
  }
  return updated;
}

Selector& Selector::wakeup() noexcept {
  std::uint64_t one = 1;
  // EAGAIN means the counter is already non-zero: a wakeup is pending anyway.
  [[maybe_unused]] auto rc = ::write(wakeup_fd_.get(), &one, sizeof one);
  return *this;
}

std::vector<SelectionKey*>& Selector::selected_keys() {
  if (!is_open()) {
    throw ClosedSelectorException();
  }
  return selected_;
}

std::vector<SelectionKey*> Selector::keys() const {
  std::vector<SelectionKey*> out;
  out.reserve(keys_.size());
  for (const auto& k : keys_) {
    out.push_back(k.get());
  }
  return out;
}

}  // namespace niox
