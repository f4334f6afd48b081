// model/shipped_formats: which Linear of DeepSeek-V4-Flash ships in which format (against the
// table of ../shared/docs/dsv4-model.md §9, written from the released checkpoint's tensor list),
// their byte counts, and the random codes a benchmark's synthetic model gets.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <tuple>

#include "frank/core/error.h"
#include "frank/core/packed_bytes.h"
#include "frank/core/thread_pool.h"
#include "frank/cpu/quantized_linear.h"
#include "frank/model/shipped_formats.h"
#include "frank/model/synthetic.h"
#include "frank/model/synthetic_exl3.h"

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

// An EXL3 matrix counted from the shapes of its tensors (docs/exl3-format.md §1.1): trellis I16
// [pc/16, pr/16, 16 K], suh F16 [pc], svh F16 [pr], pr and pc the dimensions padded to 128.
TEST(ShippedFormats, Exl3BytesAreItsTensorsBytes) {
  // An expert's w1 [2048, 4096] at K = 3: trellis [256, 128, 48], suh [4096], svh [2048].
  const double w1 = 2.0 * 256 * 128 * 48 + 2.0 * 4096 + 2.0 * 2048;
  EXPECT_EQ(shipped_bytes(ShippedFormat::Exl3, 2048, 4096, 3), w1);
  EXPECT_EQ(static_cast<double>(exl3_bytes(4096, 2048, 3)), w1);  // w2 [4096, 2048]: the same tensors' sizes
  // [100, 130] at K = 2 pads to [128, 256]: trellis [16, 8, 32], suh [256], svh [128].
  EXPECT_EQ(static_cast<double>(exl3_bytes(100, 130, 2)), 2.0 * 16 * 8 * 32 + 2.0 * 256 + 2.0 * 128);
  for (const auto& [rows, cols, bits] : {std::tuple{2048, 4096, 2}, {4096, 2048, 4}, {100, 130, 3}}) {
    const QuantizedMatrix q = random_exl3(rows, cols, bits, Exl3Codebook::ThreeInst, exl3_seeds(5));
    EXPECT_NO_THROW(cpu::check_quantized_matrix(q));
    EXPECT_EQ(q.bytes(), static_cast<size_t>(exl3_bytes(rows, cols, bits))) << rows << "x" << cols << " K" << bits;
    EXPECT_EQ(packed_bytes(q), q.bytes());
  }
  // Shape-only, it counts as it will be once the GPU made it.
  EXPECT_EQ(packed_bytes(exl3_shape_only("w", 2048, 4096, 3)), static_cast<size_t>(w1));
  EXPECT_EQ(exl3_shape_only("w", 2048, 4096, 3).bytes(), 0u);
}

TEST(ShippedFormats, Exl3ExpertsAreTheMainLayersRoutedOnes) {
  EXPECT_EQ(v4_flash_format("layers.0.ffn.experts.0.w1.weight", 3), ShippedFormat::Exl3);
  EXPECT_EQ(v4_flash_format("layers.42.ffn.experts.255.w2.weight", 2), ShippedFormat::Exl3);
  EXPECT_EQ(v4_flash_format("mtp.0.ffn.experts.7.w3.weight", 3), ShippedFormat::Fp4);  // kept as shipped
  EXPECT_EQ(v4_flash_format("layers.0.ffn.shared_experts.w1.weight", 3), ShippedFormat::Fp8);
  EXPECT_EQ(v4_flash_format("layers.3.ffn.gate.weight", 3), ShippedFormat::Bf16);
}

TEST(ShippedFormats, Exl3FillLeavesTheRoutedExpertsShapeOnly) {
  ModelConfig c = synthetic_config("tiny");
  ThreadPool pool(2);
  {
    ModelWeights w = skeleton_weights(c, 3);  // experts [32, 64]: not tiles of 128
    try {
      fill_shipped_formats(c, w, 11, pool, 3);
      ADD_FAILURE() << "expected an error for experts that are not multiples of 128";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("not a multiple of 128"), std::string::npos) << e.what();
    }
  }
  c.hidden_size = 128;  // shapes only: the layout needs no other change
  c.moe_intermediate_size = 256;
  ModelWeights w = skeleton_weights(c, 3);
  fill_shipped_formats(c, w, 11, pool, 4);
  int exl3 = 0, fp8 = 0;
  for_each_weight(c, w, [&](const WeightSlot& s) {
    if (s.linear == nullptr) return;
    const ShippedFormat f = v4_flash_format(s.name, 4);
    if (f == ShippedFormat::Exl3) {
      ASSERT_TRUE(s.linear->quantized) << s.name;
      const QuantizedMatrix& q = *s.linear->quantized;
      EXPECT_EQ(q.format, QuantizedMatrix::Format::Exl3);
      EXPECT_EQ(q.codebook, Exl3Codebook::ThreeInst);
      EXPECT_EQ(q.bits, 4);
      EXPECT_EQ(q.rows, s.shape[0]);
      EXPECT_EQ(q.cols, s.shape[1]);
      EXPECT_TRUE(q.trellis.empty() && q.suh.empty() && q.svh.empty()) << s.name;
      EXPECT_EQ(static_cast<double>(packed_bytes(q)), shipped_bytes(f, q.rows, q.cols, 4)) << s.name;
      ++exl3;
    } else if (f == ShippedFormat::Fp8) {
      ASSERT_TRUE(s.linear->quantized) << s.name;
      EXPECT_EQ(s.linear->quantized->format, QuantizedMatrix::Format::Fp8Block) << s.name;
      ++fp8;
    }
  });
  EXPECT_EQ(exl3, 3 * c.num_layers * c.n_routed_experts);
  EXPECT_GT(fp8, 0);
}

}  // namespace
}  // namespace frank::model
