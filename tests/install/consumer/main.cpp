// A program outside the niox tree, built against the installed package.
#include <niox/niox.hpp>

#include <fmt/core.h>

int main() {
  auto buf = niox::ByteBuffer::allocate(16);
  buf.put_int(0x6e696f78);
  fmt::print("{} {}\n", buf, niox::hex_dump(buf.duplicate().flip()));
  return buf.duplicate().flip().get_int() == 0x6e696f78 ? 0 : 1;
}
