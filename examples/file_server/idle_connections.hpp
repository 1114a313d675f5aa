// IdleConnections: the connections of one event loop, for one idle timeout they all share
// (nginx's keepalive_timeout), without a timer or a handler of their own. A connection costs
// the Entry it embeds: two links and a 32-bit time.
//
// Two lists. `waiting` holds the connections with nothing left to write, least recently active
// first: every activity moves one to the back, so the list stays in deadline order and a sweep
// takes the expired ones off the front. `writing` holds those with a response still going out;
// a sweep visits each of them, moves the drained ones to `waiting` (their idle time starts
// then, give or take one sweep period) and looks at the others' deadlines too: a response that
// makes no progress for the whole timeout is as idle as a silent client. An owner that learns
// of the drain first (its write completed) moves the entry itself.
//
//   waiting: [oldest activity] <-> ... <-> [newest]     front expires first
//   writing: [any order]                                each checked every sweep
//
// Times are milliseconds of the owner's clock in 32 bits; differences are taken modulo 2^32, so
// they are right for timeouts under 24 days. Used on the loop's thread only.
#pragma once

#include <cstddef>
#include <cstdint>

namespace niox::http {

class IdleConnections {
 public:
  enum class List : std::uint8_t { none, waiting, writing };

  struct Entry {
    Entry* prev = nullptr;
    Entry* next = nullptr;
    std::uint32_t last = 0;  // ms: the last activity
    List list = List::none;
  };

  // What a sweep asks of the owner of an entry whose time is up, or that is writing.
  enum class Verdict : std::uint8_t {
    close,     // idle for the whole timeout: the owner closed it (the entry is out of the lists)
    drained,   // nothing left to write: idle from now
    progress,  // still writing, and the peer takes bytes: not idle
    writing,   // still writing; no news
  };

  explicit IdleConnections(std::uint32_t timeout_ms) noexcept : timeout_ms_(timeout_ms) {}
  IdleConnections(const IdleConnections&) = delete;
  IdleConnections& operator=(const IdleConnections&) = delete;

  std::uint32_t timeout_ms() const noexcept { return timeout_ms_; }

  // Activity (a read): the entry's idle time starts again. A writing entry stays writing.
  void touch(Entry& e, std::uint32_t now) noexcept {
    e.last = now;
    if (e.list != List::writing) move(e, List::waiting);
  }
  // A response began to go out: the entry waits for it to drain before it can be idle.
  void writing(Entry& e, std::uint32_t now) noexcept {
    e.last = now;
    move(e, List::writing);
  }
  // A response has gone out: idle from now.
  void drained(Entry& e, std::uint32_t now) noexcept {
    e.last = now;
    move(e, List::waiting);
  }
  void remove(Entry& e) noexcept { unlink(e); }

  // Asks `check(entry, expired)` about every writing entry, and about each waiting entry whose
  // timeout has passed (expired true), and files each by its verdict. `check` may close the
  // connection, and must then have removed its entry (Verdict::close).
  template <typename Check>
  void sweep(std::uint32_t now, Check&& check) {
    for (Entry* e = writing_.head; e != nullptr;) {
      Entry* next = e->next;
      const bool expired = now - e->last >= timeout_ms_;
      switch (check(*e, expired)) {
        case Verdict::close: break;
        case Verdict::drained:
          e->last = now;
          move(*e, List::waiting);
          break;
        case Verdict::progress: e->last = now; break;
        case Verdict::writing: break;
      }
      e = next;
    }
    // Entries just moved here have last == now: the loop stops before them.
    while (waiting_.head != nullptr && now - waiting_.head->last >= timeout_ms_) {
      Entry& e = *waiting_.head;
      switch (check(e, true)) {
        case Verdict::close: break;
        case Verdict::drained: touch(e, now); break;
        case Verdict::progress:
        case Verdict::writing: writing(e, now); break;
      }
    }
  }

  std::size_t size(List which) const noexcept {
    std::size_t n = 0;
    for (const Entry* e = chain(which).head; e != nullptr; e = e->next) ++n;
    return n;
  }

 private:
  struct Chain {
    Entry* head = nullptr;
    Entry* tail = nullptr;
  };

  Chain& chain(List which) noexcept { return which == List::waiting ? waiting_ : writing_; }
  const Chain& chain(List which) const noexcept {
    return which == List::waiting ? waiting_ : writing_;
  }

  void move(Entry& e, List to) noexcept {
    unlink(e);
    Chain& c = chain(to);
    e.prev = c.tail;
    e.next = nullptr;
    if (c.tail != nullptr) {
      c.tail->next = &e;
    } else {
      c.head = &e;
    }
    c.tail = &e;
    e.list = to;
  }
  void unlink(Entry& e) noexcept {
    if (e.list == List::none) return;
    Chain& c = chain(e.list);
    (e.prev != nullptr ? e.prev->next : c.head) = e.next;
    (e.next != nullptr ? e.next->prev : c.tail) = e.prev;
    e.prev = e.next = nullptr;
    e.list = List::none;
  }

  std::uint32_t timeout_ms_;
  Chain waiting_;
  Chain writing_;
};

}  // namespace niox::http
