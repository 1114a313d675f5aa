#include <niox/transport/transport_error.hpp>

namespace niox::transport {
namespace {

class TransportCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "niox.transport"; }
  std::string message(int ev) const override {
    switch (static_cast<Errc>(ev)) {
      case Errc::channel_closed: return "channel closed";
      case Errc::outbound_buffer_full: return "outbound buffer full";
      case Errc::output_shutdown: return "channel output shut down";
      case Errc::unsupported_message: return "unsupported message type for this transport";
      case Errc::frame_too_long: return "frame too long";
      case Errc::corrupted_frame: return "corrupted frame";
      case Errc::decoder_failed: return "decoder failed";
      case Errc::handler_failed: return "handler failed";
      case Errc::file_region_truncated: return "file is shorter than the file region";
      case Errc::write_would_block: return "write would block";
      case Errc::handler_removed:
        return "the handler that started the operation was removed from the pipeline";
    }
    return "unknown niox.transport error";
  }
};

}  // namespace

const std::error_category& transport_category() noexcept {
  static const TransportCategory category;
  return category;
}

}  // namespace niox::transport
