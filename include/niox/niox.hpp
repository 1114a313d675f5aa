// Everything public in niox, layer by layer.
#pragma once

// buffer/: java.nio.ByteBuffer and gather/scatter helpers
#include <niox/buffer/byte_buffer.hpp>
#include <niox/buffer/gather.hpp>

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
