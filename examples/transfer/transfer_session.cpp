#include "transfer_session.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <utility>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace niox::transfer {

std::error_code SendPlan::hash_chunk(std::uint64_t offset, std::uint64_t n) {
  if (offset != bytes_hashed() || n > size - offset) {
    return std::make_error_code(std::errc::invalid_argument);
  }
  std::error_code ec;
  hasher.update(hash, fd.get(), offset, n, ec);
  return ec;
}

SendPlan prepare_send(const std::string& path, std::error_code& ec, const TransferLimits& limits,
                      ChecksumPlacement placement) {
  ec.clear();
  SendPlan plan;
  // O_NONBLOCK: opening a FIFO must not wait for a writer. Cleared once the file is known to be
  // regular, so that reads of it (and sendfile from it) block as file reads do.
  plan.fd.reset(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (!plan.fd) {
    ec.assign(errno, std::system_category());
    return {};
  }
  struct stat st {};
  if (::fstat(plan.fd.get(), &st) != 0) {
    ec.assign(errno, std::system_category());
    return {};
  }
  if (S_ISDIR(st.st_mode)) {
    ec = std::make_error_code(std::errc::is_a_directory);
    return {};
  }
  if (!S_ISREG(st.st_mode)) {
    ec = std::make_error_code(std::errc::invalid_argument);
    return {};
  }
  if (int flags = ::fcntl(plan.fd.get(), F_GETFL);
      flags < 0 || ::fcntl(plan.fd.get(), F_SETFL, flags & ~O_NONBLOCK) != 0) {
    ec.assign(errno, std::system_category());
    return {};
  }
  std::string_view name = path;
  while (name.size() > 1 && name.back() == '/') name.remove_suffix(1);
  if (auto slash = name.rfind('/'); slash != std::string_view::npos) {
    name.remove_prefix(slash + 1);
  }
  if ((ec = validate_name(name, limits))) {
    return {};
  }
  plan.size = static_cast<std::uint64_t>(st.st_size);
  if (plan.size > limits.max_file_size) {
    ec = TransferErrc::file_too_large;
    return {};
  }
  plan.header.name = std::string(name);
  plan.header.size = plan.size;
  if (placement == ChecksumPlacement::trailer) {
    plan.header.checksum_trailer = true;
  } else {
    plan.header.checksum = checksum_file(plan.header.algorithm, plan.fd.get(), 0, plan.size, ec);
    if (ec) {
      return {};
    }
  }
  plan.header_bytes = encode_header(plan.header, limits);
  return plan;
}

std::error_code check_reply(std::span<const std::byte> reply) noexcept {
  TransferStatus status{};
  if (auto ec = decode_reply(reply, status)) {
    return ec;
  }
  return error_for(status);
}

TransferReceiver::TransferReceiver(std::string destination, TransferLimits limits)
    : destination_(std::move(destination)), limits_(limits) {}

std::error_code TransferReceiver::fail(std::error_code ec) noexcept {
  hasher_.release();
  file_.discard();
  phase_ = Phase::failed;
  return ec;
}

std::error_code TransferReceiver::on_header_bytes(ByteBuffer& in) {
  if (phase_ != Phase::header) {
    return phase_ == Phase::failed ? make_error_code(std::errc::operation_not_permitted)
                                   : std::error_code{};
  }
  while (true) {
    TransferHeader h;
    auto r = decode_header(std::span(head_).first(head_len_), h, limits_);
    if (r.status == DecodeStatus::error) {
      if (r.error == TransferErrc::file_too_large) {
        header_.size = h.size;  // what was announced, for the message
      }
      return fail(r.error);
    }
    if (r.status == DecodeStatus::complete) {
      header_ = std::move(h);
      hash_ = Checksum(header_.algorithm);
      std::error_code ec;
      file_ = OutputFile::create(destination_, header_.name, ec);
      if (ec) {
        return fail(ec);
      }
      phase_ = Phase::body;
      end_of_body();
      return {};
    }
    // Take exactly what the decoder still needs, so body bytes stay in `in`.
    const std::size_t want = std::min(r.bytes - head_len_, in.remaining());
    if (want == 0) {
      return {};
    }
    in.get(std::span(head_).subspan(head_len_, want));
    head_len_ += want;
  }
}

std::error_code TransferReceiver::reserve_body() {
  if (phase_ != Phase::body && phase_ != Phase::trailer) {
    return phase_ == Phase::failed ? make_error_code(std::errc::operation_not_permitted)
                                   : std::error_code{};
  }
  if (!space_checked_) {
    space_checked_ = true;
    std::error_code ec;
    available_ = file_.available_space(ec);
    // A file system that cannot say is not refused here: reserving will tell.
    if (!ec && header_.size > available_) {
      return fail(TransferErrc::no_space);
    }
  }
  const std::uint64_t ahead = reserved_ > received_ ? reserved_ - received_ : 0;
  if (reserved_ >= header_.size || ahead >= reserve_step / 2) {
    return {};
  }
  const std::uint64_t to = std::min(header_.size, received_ + reserve_step);
  if (auto ec = file_.reserve(reserved_, to - reserved_)) {
    return fail(ec);
  }
  reserved_ = to;
  return {};
}

std::error_code TransferReceiver::on_body_bytes(ByteBuffer& in) {
  if (phase_ != Phase::body) {
    return {};
  }
  auto n = static_cast<std::size_t>(std::min<std::uint64_t>(in.remaining(), body_remaining()));
  auto data = in.bytes().first(n);
  while (!data.empty()) {
    ssize_t w = ::pwrite(file_.fd(), data.data(), data.size(), static_cast<off_t>(received_));
    if (w < 0 && errno == EINTR) {
      continue;
    }
    if (w <= 0) {
      return fail(std::error_code(w < 0 ? errno : ENOSPC, std::system_category()));
    }
    data = data.subspan(static_cast<std::size_t>(w));
    received_ += static_cast<std::uint64_t>(w);
    in.position(in.position() + static_cast<std::size_t>(w));
  }
  end_of_body();
  return {};
}

void TransferReceiver::on_body_spliced(std::uint64_t n) noexcept {
  if (phase_ != Phase::body) {
    return;
  }
  received_ += std::min(n, body_remaining());
  end_of_body();
}

void TransferReceiver::end_of_body() noexcept {
  if (phase_ == Phase::body && body_remaining() == 0 && header_.checksum_trailer) {
    phase_ = Phase::trailer;
  }
}

void TransferReceiver::on_trailer_bytes(ByteBuffer& in) noexcept {
  if (phase_ != Phase::trailer) {
    return;
  }
  const std::size_t take = std::min(trailer_missing(), in.remaining());
  in.get(std::span(trailer_).subspan(trailer_len_, take));
  trailer_len_ += take;
  if (trailer_len_ == trailer_size) {
    header_.checksum = decode_trailer(trailer_);
    phase_ = Phase::verifying;
  }
}

std::size_t TransferReceiver::hash_received(std::size_t max_bytes, std::error_code& ec) {
  ec.clear();
  if (phase_ != Phase::body && phase_ != Phase::trailer && phase_ != Phase::verifying) {
    return 0;
  }
  std::size_t done = 0;
  if (hashed_ < received_ && max_bytes > 0) {
    const auto want =
        static_cast<std::size_t>(std::min<std::uint64_t>(received_ - hashed_, max_bytes));
    hasher_.update(hash_, file_.fd(), hashed_, want, ec);
    if (ec) {
      fail(ec);
      return done;
    }
    hashed_ += want;
    done = want;
  }
  return done;
}

TransferStatus TransferReceiver::finish(std::error_code& ec) {
  ec.clear();
  if (phase_ == Phase::header || phase_ == Phase::failed) {
    ec = fail(make_error_code(TransferErrc::truncated));
    return TransferStatus::refused;
  }
  if (phase_ == Phase::done) {
    return TransferStatus::ok;
  }
  if (received_ != header_.size || phase_ == Phase::trailer) {
    ec = fail(make_error_code(TransferErrc::truncated));
    return TransferStatus::write_failed;
  }
  phase_ = Phase::verifying;
  // Hash what is on disk (from the page cache), not what passed through memory: this also
  // catches a write that went wrong after the bytes left the socket. hash_received() may have
  // done part of it already.
  while (hashed_ < header_.size) {
    if (hash_received(SIZE_MAX, ec) == 0 || ec) {
      if (!ec) {
        ec = make_error_code(std::errc::io_error);
      }
      fail(ec);
      return TransferStatus::write_failed;
    }
  }
  hasher_.release();
  const std::uint64_t sum = hash_.digest();
  if (sum != header_.checksum) {
    ec = fail(make_error_code(TransferErrc::checksum_mismatch));
    return TransferStatus::checksum_mismatch;
  }
  file_.commit(ec);
  if (ec) {
    fail(ec);
    return TransferStatus::write_failed;
  }
  phase_ = Phase::done;
  return TransferStatus::ok;
}

void TransferReceiver::abort() noexcept {
  if (phase_ != Phase::done) {
    fail({});
  }
}

}  // namespace niox::transfer
