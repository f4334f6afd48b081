// KV capacity (engine/kv_capacity.h) on DeepSeek-V4-Flash's real schedule, the expected numbers
// worked out by hand from dsv4-model.md section 9.
#include <gtest/gtest.h>

#include "frank/core/error.h"
#include "frank/engine/kv_capacity.h"
#include "frank/model/synthetic.h"

namespace frank::engine {
namespace {

// V4-Flash: 43 layers, 0-1 sliding, then CSA (ratio 4) on even and HCA (ratio 128) on odd layers:
// 21 CSA, 20 HCA; head_dim 512, RoPE 64, window 128, index keys 128 dims (fp32: 512 B).
//
// Fixed per sequence:
//   rings            43 * 128 * row
//   CSA compressor   pending kv + gate [4, 1024] fp32 = 2 * 16384, overlap [4, 512] x 2 = 2 * 8192 -> 49152
//   CSA indexer      pending [4, 256] x 2 = 8192, overlap [4, 128] x 2 = 4096                        -> 12288
//   HCA compressor   pending [128, 512] x 2 = 524288, no overlap
//   buffers          21 * (49152 + 12288) + 20 * 524288 = 1290240 + 10485760 = 11776000 (dsv4-model: "~12 MB")
// Per token: CSA 21 * (row / 4 + 512 / 4), HCA 20 * row / 128.
constexpr int64_t kBuffers = 11776000;
constexpr int64_t k40GiB = int64_t{40} << 30;  // 42949672960

TEST(KvCapacity, V4FlashFp8Record) {
  const auto c = model::v4_flash_config(43);
  const KvCapacity k = kv_capacity(c, 584, k40GiB);
  // 21 * (146 + 128) + 20 * 4.5625 = 5754 + 91.25
  EXPECT_DOUBLE_EQ(k.bytes_per_token, 5845.25);
  // 43 * 128 * 584 = 3214336 (dsv4-model: "~3.2 MB window") + buffers
  EXPECT_EQ(k.fixed_bytes, 3214336 + kBuffers);
  // (42949672960 - 14990336) / 5845.25 = 42934682624 / 5845.25 = 7345226.06
  ASSERT_TRUE(k.tokens.has_value());
  EXPECT_EQ(*k.tokens, 7345226);
}

TEST(KvCapacity, V4FlashFp32AndBf16Rows) {
  const auto c = model::v4_flash_config(43);
  const KvCapacity f32 = kv_capacity(c, 2048, k40GiB);
  // 21 * (512 + 128) + 20 * 16 = 13440 + 320; fixed 43 * 128 * 2048 = 11272192
  EXPECT_DOUBLE_EQ(f32.bytes_per_token, 13760);
  EXPECT_EQ(f32.fixed_bytes, 11272192 + kBuffers);
  // (42949672960 - 23048192) / 13760 = 42926624768 / 13760 = 3119667.5
  EXPECT_EQ(f32.tokens.value(), 3119667);
  // bf16: 21 * (256 + 128) + 20 * 8 = 8064 + 160 (dsv4-model's 6880 B counts bf16 index keys, 21 * 64 less)
  const KvCapacity bf16 = kv_capacity(c, 1024, k40GiB);
  EXPECT_DOUBLE_EQ(bf16.bytes_per_token, 8224);
  EXPECT_EQ(bf16.fixed_bytes, 5636096 + kBuffers);
}

TEST(KvCapacity, RowSizesOfEachFormat) {
  const auto sizes = kv_row_sizes(model::v4_flash_config(43));
  ASSERT_EQ(sizes.size(), 4u);
  EXPECT_EQ(sizes[0].row_bytes, 2048);
  EXPECT_EQ(sizes[1].row_bytes, 1024);
  EXPECT_EQ(sizes[2].row_bytes, 584);
  EXPECT_EQ(sizes[3].row_bytes, 528);  // V4.1: 512 e4m3 + 16 scales
  EXPECT_FALSE(sizes[3].stored_by_frank);
  // With the 528-byte record: 21 * (132 + 128) + 20 * 4.125 = 5460 + 82.5
  EXPECT_DOUBLE_EQ(kv_capacity(model::v4_flash_config(43), 528, k40GiB).bytes_per_token, 5542.5);
}

TEST(KvCapacity, TooLittleMemoryAndNothingGrowing) {
  const auto c = model::v4_flash_config(43);
  EXPECT_EQ(kv_capacity(c, 584, 1000).tokens.value(), 0);
  // Two sliding layers only: 2 * 128 * 584 fixed, nothing grows.
  const KvCapacity sliding = kv_capacity(model::v4_flash_config(2), 584, k40GiB);
  EXPECT_EQ(sliding.fixed_bytes, 149504);
  EXPECT_FALSE(sliding.tokens.has_value());
  EXPECT_THROW(kv_capacity(c, 0, k40GiB), Error);
}

}  // namespace
}  // namespace frank::engine
