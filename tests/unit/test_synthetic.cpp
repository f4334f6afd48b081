// The benchmark's synthetic DeepSeek-V4-Flash: its config has the published dimensions and layer
// schedule (dsv4-model.md §1), and its skeleton weights carry shapes without host data for the
// big tensors (the GPU backend makes those in device memory).
#include <gtest/gtest.h>

#include "frank/core/error.h"
#include "frank/engine/model.h"
#include "frank/model/synthetic.h"

namespace frank::model {
namespace {

TEST(SyntheticV4Flash, ConfigHasThePublishedDimensionsAndSchedule) {
  const ModelConfig c = v4_flash_config(5);
  EXPECT_EQ(c.vocab_size, 129280);
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.num_heads, 64);
  EXPECT_EQ(c.head_dim, 512);
  EXPECT_EQ(c.rope_dim, 64);
  EXPECT_EQ(c.q_lora_rank, 1024);
  EXPECT_EQ(c.o_groups, 8);
  EXPECT_EQ(c.o_lora_rank, 1024);
  EXPECT_EQ(c.n_routed_experts, 256);
  EXPECT_EQ(c.experts_per_token, 6);
  EXPECT_EQ(c.moe_intermediate_size, 2048);
  EXPECT_EQ(c.sliding_window, 128);
  EXPECT_EQ(c.index_n_heads, 64);
  EXPECT_EQ(c.index_head_dim, 128);
  EXPECT_EQ(c.index_topk, 512);
  using K = AttentionKind;
  EXPECT_EQ(c.attention, (std::vector<K>{K::Sliding, K::Sliding, K::CompressedSparse, K::HeavilyCompressed,
                                          K::CompressedSparse}));
  EXPECT_EQ(c.compress_ratio, (std::vector<int>{0, 0, 4, 128, 4}));
  EXPECT_EQ(c.hash_routed, (std::vector<bool>{true, true, true, false, false}));
  EXPECT_THROW(v4_flash_config(0), Error);
  EXPECT_THROW(v4_flash_config(44), Error);
}

TEST(SyntheticV4Flash, SkeletonWeightsAreShapesWithoutHostData) {
  const ModelConfig c = v4_flash_config(3);
  ModelWeights w = skeleton_weights(c, 7);
  EXPECT_TRUE(w.embed.data.empty());
  EXPECT_EQ(w.embed.shape, (std::vector<int64_t>{129280, 4096}));
  const LinearWeight& q_b = w.layers[0].attn.q_b_proj;
  EXPECT_TRUE(q_b.dense.data.empty());
  EXPECT_EQ(q_b.rows(), 32768);
  EXPECT_EQ(q_b.cols(), 1024);  // from the shape: there is no data to count
  EXPECT_EQ(w.layers[2].moe.experts[255].down.cols(), 2048);
  // The small weights are real values on the host.
  EXPECT_EQ(w.layers[1].attn_norm.data.size(), 4096u);
  EXPECT_EQ(w.layers[0].attn_hc.fn.data.size(), size_t{24} * 4 * 4096);
  EXPECT_EQ(w.layers[2].moe.tid2eid.size(), size_t{129280} * 6);  // layer 2 is hash-routed
  // The model code accepts it (a GPU backend runs it; the CPU reference has no data to read).
  const engine::Model model(c, std::move(w));
  EXPECT_EQ(model.attention().size(), 3u);
}

}  // namespace
}  // namespace frank::model
