// Everything public in niox, layer by layer.
#pragma once

// base/: the descriptor owner and the log sink
#include <niox/base/file_descriptor.hpp>
#include <niox/base/log.hpp>

// buffer/: java.nio.ByteBuffer and gather/scatter helpers
#include <niox/buffer/byte_buffer.hpp>
#include <niox/buffer/gather.hpp>

// ssl/: TLS without descriptors (SslContext, SslEngine over OpenSSL)
#include <niox/ssl/ssl_context.hpp>
#include <niox/ssl/ssl_engine.hpp>
#include <niox/ssl/ssl_error.hpp>

// channels/: java.nio.channels
#include <niox/channels/channel.hpp>
#include <niox/channels/datagram_channel.hpp>
#include <niox/channels/file_channel.hpp>
#include <niox/channels/pipe.hpp>
#include <niox/channels/selectable_channel.hpp>
#include <niox/channels/selector.hpp>
#include <niox/channels/server_socket_channel.hpp>
#include <niox/channels/socket_address.hpp>
#include <niox/channels/socket_channel.hpp>
#include <niox/channels/socket_options.hpp>
#include <niox/channels/transfer_path.hpp>

// loop/: the event loop over io_uring or epoll (<niox/asio.hpp> is separate: it needs Asio)
#include <niox/loop/event_loop.hpp>
#include <niox/loop/event_loop_group.hpp>
#include <niox/loop/executor.hpp>
#include <niox/loop/loop_counters.hpp>

// async/: C++20 coroutines and Java NIO.2's asynchronous channels
#include <niox/async/asynchronous_file_channel.hpp>
#include <niox/async/asynchronous_socket_channel.hpp>
#include <niox/async/asynchronous_tls_channel.hpp>
#include <niox/async/spawn.hpp>
#include <niox/async/task.hpp>
#include <niox/async/when_all.hpp>
#include <niox/async/when_any.hpp>

// transport/: Netty-style channels, pipeline, handlers, outbound buffer, codecs
#include <niox/transport/adaptive_recv_buffer_allocator.hpp>
#include <niox/transport/channel.hpp>
#include <niox/transport/channel_future.hpp>
#include <niox/transport/channel_handler.hpp>
#include <niox/transport/channel_inbound_queue.hpp>
#include <niox/transport/channel_pipeline.hpp>
#include <niox/transport/codec/byte_to_message_decoder.hpp>
#include <niox/transport/codec/header_body_decoder.hpp>
#include <niox/transport/codec/length_field_based_frame_decoder.hpp>
#include <niox/transport/codec/length_field_prepender.hpp>
#include <niox/transport/codec/line_based_frame_decoder.hpp>
#include <niox/transport/embedded_channel.hpp>
#include <niox/transport/file_region.hpp>
#include <niox/transport/idle_state_handler.hpp>
#include <niox/transport/outbound_buffer.hpp>
#include <niox/transport/ssl_handler.hpp>
#include <niox/transport/transport_error.hpp>
#include <niox/transport/bootstrap.hpp>
#include <niox/transport/channel_option.hpp>
#include <niox/transport/loop_socket_channel.hpp>
