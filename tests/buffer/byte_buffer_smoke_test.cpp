#include <niox/byte_buffer.hpp>

#include <gtest/gtest.h>

TEST(ByteBufferSmoke, PutFlipGet) {
  auto b = niox::ByteBuffer::allocate(8);
  b.put_int(42).flip();
  EXPECT_EQ(b.get_int(), 42);
  EXPECT_FALSE(b.has_remaining());
}
