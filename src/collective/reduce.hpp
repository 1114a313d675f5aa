// Elementwise reductions of the collectives: dst[i] = dst[i] op src[i].
#pragma once

#include <niox/collective/communicator.hpp>

#include <cstddef>

namespace niox::collective::detail {

// dst and src hold `count` elements of `type` and do not overlap. Compiled with the vector
// instructions the CPU has (see reduce.cpp).
void reduce_into(void* dst, const void* src, std::size_t count, DataType type,
                 ReduceOp op) noexcept;

}  // namespace niox::collective::detail
