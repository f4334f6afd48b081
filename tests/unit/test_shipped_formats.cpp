// model/shipped_formats: which Linear of DeepSeek-V4-Flash ships in which format (against the
// table of ../shared/docs/dsv4-model.md §9, written from the released checkpoint's tensor list),
// their byte counts, and the random codes a benchmark's synthetic model gets.
#include <gtest/gtest.h>

#include <cmath>

#include "frank/core/thread_pool.h"
#include "frank/cpu/quantized_linear.h"
#include "frank/model/shipped_formats.h"
#include "frank/model/synthetic.h"

namespace frank::model {
namespace {

TEST(ShippedFormats, FollowTheReleasedCheckpoint) {
  // dsv4-model.md §9: fp8 with [ceil(out/128), ceil(in/128)] scales; experts int8 (= FP4 x 2)
  // with e8m0 per 32; compressors, indexer weights_proj, router, embed, head bf16.
  for (const char* fp8 : {"layers.2.attn.wq_a.weight", "layers.2.attn.wq_b.weight", "layers.2.attn.wkv.weight",
                          "layers.2.attn.wo_a.weight", "layers.2.attn.wo_b.weight", "layers.2.attn.indexer.wq_b.weight",
                          "layers.0.ffn.shared_experts.w1.weight", "layers.0.ffn.shared_experts.w2.weight",
                          "mtp.0.e_proj.weight", "mtp.0.h_proj.weight"})
    EXPECT_EQ(v4_flash_format(fp8), ShippedFormat::Fp8) << fp8;
  for (const char* fp4 : {"layers.0.ffn.experts.0.w1.weight", "layers.42.ffn.experts.255.w2.weight",
                          "mtp.0.ffn.experts.7.w3.weight"})
    EXPECT_EQ(v4_flash_format(fp4), ShippedFormat::Fp4) << fp4;
  for (const char* bf16 : {"layers.2.attn.compressor.wkv.weight", "layers.2.attn.compressor.wgate.weight",
                           "layers.2.attn.indexer.compressor.wkv.weight", "layers.2.attn.indexer.weights_proj.weight",
                           "layers.3.ffn.gate.weight", "head.weight"})
    EXPECT_EQ(v4_flash_format(bf16), ShippedFormat::Bf16) << bf16;
}

TEST(ShippedFormats, BytesOfEachFormat) {
  // wq_b [32768, 1024]: 32 MiB of e4m3 plus 256 x 8 scales; an expert's w1 [2048, 4096] in FP4:
  // 4 MiB of nibbles plus 2048 x 128 scales.
  EXPECT_EQ(shipped_bytes(ShippedFormat::Fp8, 32768, 1024), 32768.0 * 1024 + 256 * 8);
  EXPECT_EQ(shipped_bytes(ShippedFormat::Fp8, 100, 130), 100.0 * 130 + 1 * 2);  // partial blocks count whole
  EXPECT_EQ(shipped_bytes(ShippedFormat::Fp4, 2048, 4096), 2048.0 * 2048 + 2048 * 128);
  EXPECT_EQ(shipped_bytes(ShippedFormat::Bf16, 256, 4096), 2.0 * 256 * 4096);
}

TEST(ShippedFormats, FillGivesValidFiniteCodesAndLeavesBf16ShapeOnly) {
  ModelConfig c = synthetic_config("tiny");
  ModelWeights w = skeleton_weights(c, 3);
  ThreadPool pool(2);
  fill_shipped_formats(c, w, 11, pool);
  int fp8 = 0, fp4 = 0, bf16 = 0;
  for_each_weight(c, w, [&](const WeightSlot& s) {
    if (s.linear == nullptr) return;
    const ShippedFormat f = v4_flash_format(s.name);
    if (f == ShippedFormat::Bf16) {
      ++bf16;
      EXPECT_FALSE(s.linear->quantized) << s.name;
      EXPECT_TRUE(s.linear->dense.data.empty()) << s.name;
      return;
    }
    ASSERT_TRUE(s.linear->quantized) << s.name;
    const QuantizedMatrix& q = *s.linear->quantized;
    EXPECT_EQ(q.rows, s.shape[0]);
    EXPECT_EQ(q.cols, s.shape[1]);
    EXPECT_NO_THROW(cpu::check_quantized_matrix(q)) << s.name;
    EXPECT_EQ(static_cast<double>(q.bytes()), shipped_bytes(f, q.rows, q.cols)) << s.name;
    (f == ShippedFormat::Fp8 ? fp8 : fp4) += 1;
    double sum_sq = 0;
    for (float v : cpu::dequantize(q)) {
      ASSERT_TRUE(std::isfinite(v)) << s.name;
      ASSERT_LE(std::abs(v), 0.12f) << s.name;
      sum_sq += double{v} * v;
    }
    EXPECT_GT(sum_sq, 0.0) << s.name << ": random codes, not zeros";
  });
  EXPECT_GT(fp8, 0);
  EXPECT_GT(fp4, 0);
  EXPECT_GT(bf16, 0);
}

}  // namespace
}  // namespace frank::model
