// Message: what travels through a ChannelPipeline.
//
// Choice: a variant of the two things a transport can write — ByteBuffer and FileRegion — and
// of what a server channel reads — an accepted connection, a std::shared_ptr<LoopSocketChannel>
// — plus std::any for everything a codec or a user handler produces (decoded frames as user
// structs, HeaderBodyMessage, ...). These three cases need no heap allocation and no type
// lookup: they are the hot path of every server, once per message or per connection. User
// types pay one std::any (small ones fit its small buffer). std::any needs copyable types: wrap
// a move-only one in a std::shared_ptr.
//
// Ownership: a Message owns what it holds (a ByteBuffer is a view that keeps its memory alive,
// see ByteBuffer). Passing a Message to the next handler hands that ownership over.
#pragma once

#include <niox/buffer/byte_buffer.hpp>
#include <niox/transport/file_region.hpp>

#include <any>
#include <cstddef>
#include <memory>
#include <type_traits>
#include <utility>
#include <variant>

namespace niox {

class LoopSocketChannel;

class Message {
 public:
  using Accepted = std::shared_ptr<LoopSocketChannel>;

  Message() = default;
  Message(ByteBuffer buffer) noexcept : value_(std::move(buffer)) {}  // NOLINT: implicit on purpose
  Message(FileRegion region) noexcept : value_(std::move(region)) {}  // NOLINT
  Message(Accepted channel) noexcept : value_(std::move(channel)) {}  // NOLINT
  template <class T>
  requires(!std::is_same_v<std::remove_cvref_t<T>, Message> &&
           !std::is_same_v<std::remove_cvref_t<T>, ByteBuffer> &&
           !std::is_same_v<std::remove_cvref_t<T>, FileRegion> &&
           !std::is_same_v<std::remove_cvref_t<T>, Accepted> &&
           !std::is_same_v<std::remove_cvref_t<T>, std::any>) Message(T&& value)  // NOLINT
      : value_(std::any(std::forward<T>(value))) {}

  bool empty() const noexcept { return std::holds_alternative<std::monostate>(value_); }
  bool is_byte_buffer() const noexcept { return std::holds_alternative<ByteBuffer>(value_); }
  bool is_file_region() const noexcept { return std::holds_alternative<FileRegion>(value_); }

  // Pointer to the held T, or null when the message holds something else.
  template <class T>
  T* get_if() noexcept {
    if constexpr (std::is_same_v<T, ByteBuffer> || std::is_same_v<T, FileRegion> ||
                  std::is_same_v<T, Accepted>) {
      return std::get_if<T>(&value_);
    } else {
      auto* a = std::get_if<std::any>(&value_);
      return a ? std::any_cast<T>(a) : nullptr;
    }
  }
  template <class T>
  const T* get_if() const noexcept {
    return const_cast<Message*>(this)->get_if<T>();
  }
  template <class T>
  bool is() const noexcept {
    return get_if<T>() != nullptr;
  }
  // The held T; throws std::bad_any_cast when it holds something else.
  template <class T>
  T& get() {
    if (auto* p = get_if<T>()) {
      return *p;
    }
    throw std::bad_any_cast();
  }

  // Bytes this message will put on the wire if written (0 for user types): what the outbound
  // buffer counts against its water marks.
  std::size_t readable_bytes() const noexcept {
    if (auto* b = std::get_if<ByteBuffer>(&value_)) {
      return b->remaining();
    }
    if (auto* r = std::get_if<FileRegion>(&value_)) {
      return static_cast<std::size_t>(r->remaining());
    }
    return 0;
  }

 private:
  std::variant<std::monostate, ByteBuffer, FileRegion, Accepted, std::any> value_;
};

}  // namespace niox
