// Internal: XXH64 (Yann Collet's xxHash, 64-bit, seed 0 by default), a portable
// re-implementation so the index checksums can be checked with `xxhsum -H1`.
// Cost: ~1 byte/cycle per core, no allocation.
#pragma once

#include <cstddef>
#include <cstdint>

namespace graft::retrieval_internal {

uint64_t Xxh64(const void* data, size_t bytes, uint64_t seed = 0);

}  // namespace graft::retrieval_internal
