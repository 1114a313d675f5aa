#include "http_server_connection.hpp"

#include <algorithm>

namespace niox::http {

HttpServerConnection::HttpServerConnection(const StaticFileResponder& responder,
                                           HttpDecoderConfig decoder,
                                           std::size_t max_queued_responses, OpenFileCache* cache)
    : responder_(responder),
      cache_(cache),
      decoder_(decoder),
      max_queued_(std::max<std::size_t>(max_queued_responses, 1)) {}

void HttpServerConnection::on_read(ByteBuffer& in, std::vector<HttpResponse>& out,
                                   std::time_t now) {
  while (!closing_ && out.size() < max_queued_) {
    switch (decoder_.decode(in)) {
      case DecodeStatus::need_more: return;
      case DecodeStatus::request:
        out.push_back(responder_.respond(decoder_.request(), now, cache_));
        closing_ = !out.back().keep_alive;
        break;
      case DecodeStatus::error:
        out.push_back(responder_.respond_to_decode_error(decoder_.error_status(), now));
        closing_ = true;
        break;
    }
  }
  if (closing_) {
    in.position(in.limit());  // nothing after the last response will be read
  }
}

bool HttpServerConnection::on_end_of_input() noexcept {
  const bool clean = decoder_.is_idle();
  closing_ = true;
  return clean;
}

}  // namespace niox::http
