// niox::detail::UniqueFunction — a move-only std::function with inline storage.
//
// Completion handlers are stored in pooled operation objects; a handler whose captures fit in
// `InlineBytes` at an alignment of at most `Align` (and that is nothrow-movable) lives inside
// the UniqueFunction itself, so storing one allocates nothing. Larger ones fall back to one heap
// allocation. Installed because the public loop headers use it; not API.
#pragma once

#include <cstddef>
#include <functional>
#include <new>
#include <type_traits>
#include <utility>

namespace niox::detail {

template <class Sig, std::size_t InlineBytes = 64, std::size_t Align = alignof(std::max_align_t)>
class UniqueFunction;

template <class R, class... Args, std::size_t InlineBytes, std::size_t Align>
class UniqueFunction<R(Args...), InlineBytes, Align> {
 public:
  // Whether a callable of type D is stored inline (no heap block).
  template <class D>
  static constexpr bool stores_inline() {
    return sizeof(D) <= InlineBytes && alignof(D) <= Align &&
           std::is_nothrow_move_constructible_v<D>;
  }

  UniqueFunction() noexcept = default;
  UniqueFunction(std::nullptr_t) noexcept {}  // NOLINT

  template <class F, class D = std::decay_t<F>,
            class = std::enable_if_t<!std::is_same_v<D, UniqueFunction> &&
                                     std::is_invocable_r_v<R, D&, Args...>>>
  UniqueFunction(F&& f) {  // NOLINT: implicit, like std::function
    if constexpr (stores_inline<D>()) {
      ::new (static_cast<void*>(&storage_)) D(std::forward<F>(f));
      vt_ = &inline_table<D>;
    } else {
      *reinterpret_cast<D**>(&storage_) = new D(std::forward<F>(f));
      vt_ = &heap_table<D>;
    }
  }

  UniqueFunction(UniqueFunction&& o) noexcept : vt_(o.vt_) {
    if (vt_) {
      vt_->move(&o.storage_, &storage_);
      o.vt_ = nullptr;
    }
  }
  UniqueFunction& operator=(UniqueFunction&& o) noexcept {
    if (this != &o) {
      reset();
      if (o.vt_) {
        o.vt_->move(&o.storage_, &storage_);
        vt_ = o.vt_;
        o.vt_ = nullptr;
      }
    }
    return *this;
  }
  UniqueFunction& operator=(std::nullptr_t) noexcept {
    reset();
    return *this;
  }
  UniqueFunction(const UniqueFunction&) = delete;
  UniqueFunction& operator=(const UniqueFunction&) = delete;
  ~UniqueFunction() { reset(); }

  explicit operator bool() const noexcept { return vt_ != nullptr; }
  // True when the callable lives in the inline storage (no heap block).
  bool is_inline() const noexcept { return vt_ != nullptr && vt_->is_inline; }

  // Calling an empty UniqueFunction is a caller bug (std::bad_function_call).
  R operator()(Args... args) {
    if (!vt_) throw std::bad_function_call();
    return vt_->call(&storage_, std::forward<Args>(args)...);
  }

  void reset() noexcept {
    if (vt_) {
      auto* vt = vt_;
      vt_ = nullptr;
      vt->destroy(&storage_);
    }
  }

 private:
  using Storage = std::aligned_storage_t<InlineBytes, Align>;
  struct VTable {
    R (*call)(void*, Args&&...);
    void (*move)(void* from, void* to) noexcept;
    void (*destroy)(void*) noexcept;
    bool is_inline;
  };

  template <class D>
  static constexpr VTable inline_table{[](void* s, Args&&... a) -> R {
                                         return std::invoke(*static_cast<D*>(s),
                                                            std::forward<Args>(a)...);
                                       },
                                       [](void* from, void* to) noexcept {
                                         ::new (to) D(std::move(*static_cast<D*>(from)));
                                         static_cast<D*>(from)->~D();
                                       },
                                       [](void* s) noexcept { static_cast<D*>(s)->~D(); }, true};
  template <class D>
  static constexpr VTable heap_table{
      [](void* s, Args&&... a) -> R {
        return std::invoke(**static_cast<D**>(s), std::forward<Args>(a)...);
      },
      [](void* from, void* to) noexcept { *static_cast<D**>(to) = *static_cast<D**>(from); },
      [](void* s) noexcept { delete *static_cast<D**>(s); }, false};

  Storage storage_;
  const VTable* vt_ = nullptr;
};

}  // namespace niox::detail
