// Everything public in niox, layer by layer.
#pragma once

#include <niox/buffer/byte_buffer.hpp>
