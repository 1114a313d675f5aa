#include "http_server_connection.hpp"

#include <algorithm>

namespace niox::http {

namespace {

// Decoders given back by this thread's connections between their requests, for the next
// request that begins here: a keep-alive connection holds none while idle, and taking one
// allocates nothing once warm. Touched only from on_read, never from a destructor, so never
// after the thread's own destruction began.
constexpr std::size_t max_spare_decoders = 64;
thread_local std::vector<std::unique_ptr<HttpRequestDecoder>> spare_decoders;

std::unique_ptr<HttpRequestDecoder> take_decoder(const HttpDecoderConfig& config) {
  if (spare_decoders.empty()) {
    return std::make_unique<HttpRequestDecoder>(config);
  }
  auto d = std::move(spare_decoders.back());
  spare_decoders.pop_back();
  *d = HttpRequestDecoder(config);
  return d;
}

void give_back(std::unique_ptr<HttpRequestDecoder>& d) {
  d->reset();  // its head buffer goes back to the pool now
  if (spare_decoders.size() < max_spare_decoders) {
    spare_decoders.push_back(std::move(d));
  }
  d.reset();
}

}  // namespace

HttpServerConnection::HttpServerConnection(const StaticFileResponder& responder,
                                           HttpDecoderConfig decoder,
                                           std::size_t max_queued_responses, OpenFileCache* cache)
    : responder_(responder),
      cache_(cache),
      decoder_config_(decoder),
      max_queued_(std::max<std::size_t>(max_queued_responses, 1)) {}

void HttpServerConnection::on_read(ByteBuffer& in, std::vector<HttpResponse>& out,
                                   std::time_t now) {
  if (!decoder_ && !closing_ && in.has_remaining()) {
    decoder_ = take_decoder(decoder_config_);
  }
  bool more = true;
  while (more && decoder_ && !closing_ && out.size() < max_queued_) {
    switch (decoder_->decode(in)) {
      case DecodeStatus::need_more: more = false; break;
      case DecodeStatus::request: {
        const HttpRequest& request = decoder_->request();
        out.push_back(responder_.respond(request, now, cache_));
        closing_ = !out.back().keep_alive;
        // The client asked to close after this request (RFC 9112 §9.6: it sends nothing more),
        // sent no body and nothing after it: nothing is left to arrive.
        ends_cleanly_ = closing_ && !request.keep_alive() && request.content_length() == 0 &&
                        !in.has_remaining();
        break;
      }
      case DecodeStatus::error:
        out.push_back(responder_.respond_to_decode_error(decoder_->error_status(), now));
        closing_ = true;
        break;
    }
  }
  if (closing_) {
    in.position(in.limit());  // nothing after the last response will be read
  } else if (decoder_ && decoder_->is_idle()) {
    give_back(decoder_);  // the responses hold what they need of the request
  }
}

bool HttpServerConnection::on_end_of_input() noexcept {
  const bool clean = is_idle();
  closing_ = true;
  return clean;
}

}  // namespace niox::http
