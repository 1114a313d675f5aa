// ChannelOptions: Netty's spelling of the socket options, set through the one option table
// (StandardSocketOptions), and the ChannelConfig fields.
#include <niox/transport/channel.hpp>
#include <niox/transport/channel_option.hpp>

#include <stdexcept>

namespace niox {

void ChannelOptions::set_socket_option(const SocketOptionInfo& option, int value) {
  for (auto& [row, v] : socket_options) {
    if (row == nullptr || row == &option) {
      row = &option;
      v = value;
      return;
    }
  }
  throw std::length_error("ChannelOptions: more socket options than the table has rows");
}

void ChannelOptions::merge(const ChannelOptions& o) {
  for (const auto& [row, value] : o.socket_options) {
    if (row != nullptr) {
      set_socket_option(*row, value);
    }
  }
  auto take = [](auto& mine, const auto& theirs) {
    if (theirs) {
      mine = theirs;
    }
  };
  take(so_backlog, o.so_backlog);
  take(auto_read, o.auto_read);
  take(write_buffer_water_mark, o.write_buffer_water_mark);
  take(write_buffer_hard_limit, o.write_buffer_hard_limit);
  take(connect_timeout, o.connect_timeout);
  take(allow_half_closure, o.allow_half_closure);
  take(listener_per_loop, o.listener_per_loop);
  take(write_zero_copy_threshold, o.write_zero_copy_threshold);
}

std::error_code ChannelOptions::apply_to_socket(int fd, int family) const noexcept {
  std::error_code first;
  for (const auto& [row, value] : socket_options) {
    if (row != nullptr && row->applies_to(family)) {
      auto ec = detail::set_socket_option(fd, *row, value);
      if (ec && !first) {
        first = ec;
      }
    }
  }
  return first;
}

void ChannelOptions::apply_to_config(Channel& channel) const {
  auto& c = channel.config();
  if (write_buffer_water_mark) {
    c.set_write_buffer_water_mark(*write_buffer_water_mark);
  }
  if (write_buffer_hard_limit) {
    c.set_write_buffer_hard_limit(*write_buffer_hard_limit);
  }
  if (connect_timeout) {
    c.set_connect_timeout(*connect_timeout);
  }
  if (allow_half_closure) {
    c.set_allow_half_closure(*allow_half_closure);
  }
  if (auto_read) {
    c.set_auto_read(*auto_read);
  }
  if (write_zero_copy_threshold) {
    c.set_write_zero_copy_threshold(*write_zero_copy_threshold);
  }
}

}  // namespace niox
