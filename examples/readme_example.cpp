// The README's twenty-line example, kept compiling by the build.
#include <niox/niox.hpp>
#include <fmt/core.h>

int main() {
  // A length-prefixed frame, big-endian like Java.
  auto frame = niox::ByteBuffer::allocate(64);
  frame.put_int(5).put("hello");
  frame.flip();  // ByteBuffer[pos=0 lim=9 cap=64]

  auto length = static_cast<std::size_t>(frame.get_int());
  auto body = frame.slice(frame.position(), length);  // no copy: shares frame's memory
  frame.position(frame.position() + length);

  fmt::print("{} body=\"{}\"\n", frame, body.string_view());
  try {
    body.as_read_only_buffer().put(std::uint8_t{'!'});
  } catch (const niox::ReadOnlyBufferException&) {
    fmt::print("read-only views throw like Java\n");
  }
}
