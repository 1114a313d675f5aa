// HttpServerConnection — one client connection of the static file server, without the I/O:
// bytes in, planned responses out, in order, and when to close. A transport handler feeds it
// whatever each read brought and writes what it returns:
//
//   void channel_read(ByteBuffer& in) {
//     conn.on_read(in, queue);                        // consumes what it used
//     for (auto& r : queue) write(r.head, r.body), maybe send_file(r.file, ...);
//     queue.clear(); flush();
//     if (conn.is_closing()) close_after_flush();
//     else if (in.has_remaining()) keep `in` and call on_read again once the writes drained
//   }
//
// Pipelining: every complete request in the input is answered, in order (RFC 9112 §9.3.2). To
// bound memory against a client that pipelines without reading, on_read stops once `out` holds
// max_queued_responses responses and leaves the rest of the input unconsumed: the transport stops
// reading until its writes drain (Netty's autoRead=false), and calls on_read again.
//
// Memory: between requests a connection holds no decoder. One is taken when a request's first
// byte arrives (from the thread's spare decoders: no allocation once warm) and given back once
// the request is answered, so an idle keep-alive connection costs this object alone.
//
// Closing: after a response with keep_alive == false (a decoding error, "Connection: close",
// HTTP/1.0 without keep-alive, a 5xx) nothing more is decoded; is_closing() turns true and the
// rest of the input is dropped. The connection is closed after that response is written.
#pragma once

#include "http_request_decoder.hpp"
#include "static_file_responder.hpp"

#include <niox/buffer/byte_buffer.hpp>

#include <ctime>
#include <memory>
#include <vector>

namespace niox::http {

class HttpServerConnection {
 public:
  // `responder` and `cache` (optional, the event loop's, see OpenFileCache) must outlive the
  // connection.
  explicit HttpServerConnection(const StaticFileResponder& responder,
                                HttpDecoderConfig decoder = {},
                                std::size_t max_queued_responses = 32,
                                OpenFileCache* cache = nullptr);

  // Decodes requests from in's [position, limit), advancing the position past what was used,
  // and appends one response per request to `out`. See the class comment for when it stops.
  void on_read(ByteBuffer& in, std::vector<HttpResponse>& out,
               std::time_t now = std::time(nullptr));

  // True once a response that closes the connection has been produced.
  bool is_closing() const noexcept { return closing_; }
  // Closing, and nothing of the client's is left to arrive: it asked to close after a request
  // without a body and sent nothing after it. Otherwise (the server ends the connection, or
  // input may still come) closing at once could make the kernel reset the connection under
  // the response, so the connection needs a lingering close.
  bool ends_cleanly() const noexcept { return ends_cleanly_; }

  // The peer ended its output (read returned -1). True if it did so between requests (a normal
  // close); false if a request was cut short, which deserves no response — the connection is
  // closed once the responses already produced are written.
  bool on_end_of_input() noexcept;

  // True when no part of a request (head or skipped body) is pending: nothing of one has
  // arrived, or all of it was answered. An end of stream here is a clean close.
  bool is_idle() const noexcept { return !decoder_ || decoder_->is_idle(); }
  // Whether a decoder is held: only while a request is partly read, or after a decoding error.
  bool holds_decoder() const noexcept { return decoder_ != nullptr; }

 private:
  const StaticFileResponder& responder_;
  OpenFileCache* cache_;
  HttpDecoderConfig decoder_config_;
  std::unique_ptr<HttpRequestDecoder> decoder_;  // while a request is being read
  std::size_t max_queued_;
  bool closing_ = false;
  bool ends_cleanly_ = false;
};

}  // namespace niox::http
