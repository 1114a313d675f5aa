// A tour of niox::ByteBuffer for a Java NIO user: the same calls, the same answers.
#include <niox/niox.hpp>

#include <fmt/core.h>

#include <cstdio>
#include <string_view>

int main(int argc, char** argv) {
  std::string_view text = argc > 1 ? argv[1] : "hello, niox";

  // Fill: a length-prefixed frame, big-endian like Java.
  auto buf = niox::ByteBuffer::allocate(64);
  fmt::print("allocate(64)            {}\n", buf);
  buf.put_int(static_cast<std::int32_t>(text.size())).put(text);
  fmt::print("put_int + put(text)     {}\n", buf);

  // Drain: flip, read the header, then a zero-copy slice of the body.
  buf.flip();
  fmt::print("flip()                  {}\n", buf);
  auto length = buf.get_int();
  auto body = buf.slice(buf.position(), static_cast<std::size_t>(length));
  buf.position(buf.position() + static_cast<std::size_t>(length));
  fmt::print("get_int() = {:<11} {}\nslice of the body       {} \"{}\"\n", length, buf, body,
             body.string_view());

  // Views share content: a write through the buffer shows in the read-only view.
  auto ro = body.as_read_only_buffer();
  body.put(0, static_cast<std::uint8_t>('H'));
  fmt::print("read-only view sees     \"{}\"\n", ro.string_view());
  try {
    ro.put(static_cast<std::uint8_t>('!'));
  } catch (const niox::ReadOnlyBufferException& e) {
    fmt::print("put on read-only view   throws {}\n", e.what());
  }

  // compact(): keep the unread tail, make room to fill again.
  buf.flip().position(4).compact();
  fmt::print("compact() after header  {}\n\n{}\n", buf, niox::hex_dump(buf.duplicate().flip()));
  return 0;
}
