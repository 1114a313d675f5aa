// The java.nio buffer exceptions, each rooted in the standard exception closest to it, so
// `catch (const std::out_of_range&)` also catches a bad absolute index.
#pragma once

#include <stdexcept>

namespace niox {

// Relative put past the limit.
class BufferOverflowException : public std::length_error {
 public:
  BufferOverflowException() : std::length_error("java.nio.BufferOverflowException") {}
};

// Relative get past the limit.
class BufferUnderflowException : public std::length_error {
 public:
  BufferUnderflowException() : std::length_error("java.nio.BufferUnderflowException") {}
};

// reset() without a mark.
class InvalidMarkException : public std::logic_error {
 public:
  InvalidMarkException() : std::logic_error("java.nio.InvalidMarkException") {}
};

// Any change of content through a read-only buffer.
class ReadOnlyBufferException : public std::logic_error {
 public:
  ReadOnlyBufferException() : std::logic_error("java.nio.ReadOnlyBufferException") {}
};

// Absolute access, slice or wrap range outside the buffer.
class IndexOutOfBoundsException : public std::out_of_range {
 public:
  using std::out_of_range::out_of_range;
};

// position(n) > limit, limit(n) > capacity, put(self), and other bad arguments.
class IllegalArgumentException : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

}  // namespace niox
