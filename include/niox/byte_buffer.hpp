// The name the ByteBuffer contract gives; the type lives in the buffer layer.
#pragma once
#include <niox/buffer/byte_buffer.hpp>
