// The scalar EXL3 kernel: the reference the SIMD levels must equal. It decodes through
// exl3_decode_tile, the decoder checked bit for bit against ExLlamaV3 (tests/unit/test_exl3_decode).
#include "frank/core/dtype.h"
#include "frank/cpu/quant/exl3_kernels.h"

namespace frank::cpu::detail {

void exl3_block_scalar(const float* u, int n, const Exl3Matrix& w, std::int64_t block, float* acc) {
  const Exl3Trellis& tr = w.trellis;
  const std::int64_t cols = w.padded_cols();
  float q[kExl3TileElements];
  for (std::int64_t kt = 0; kt < tr.tiles_k; ++kt)
    for (int j = 0; j < kExl3TilesPerBlock; ++j) {
      const std::int64_t nt = block * kExl3TilesPerBlock + j;
      const auto tile = exl3_decode_tile(tr.words + (kt * tr.tiles_n + nt) * tr.words_per_tile(), tr.bits, tr.codebook);
      for (int i = 0; i < kExl3TileElements; ++i) q[i] = f16_to_f32(tile[static_cast<size_t>(i)]);
      for (int t = 0; t < n; ++t) {
        const float* ut = u + t * cols + kt * kExl3TileSide;
        float partial[kExl3TileSide] = {};
        for (int r = 0; r < kExl3TileSide; ++r)
          for (int c = 0; c < kExl3TileSide; ++c) partial[c] = partial[c] + ut[r] * q[r * kExl3TileSide + c];
        float* at = acc + t * 128 + j * kExl3TileSide;
        for (int c = 0; c < kExl3TileSide; ++c) at[c] = at[c] + partial[c];
      }
    }
}

}  // namespace frank::cpu::detail
