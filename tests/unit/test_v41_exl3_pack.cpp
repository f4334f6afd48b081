// The synthetic DeepSeek-V4.1 EXL3 pack (model/synthetic_v41_pack.h, `frank make-pack`): it loads
// through the V4.1 loader with its routed experts as EXL3 at K = 2, 3 and 4 and everything else in
// the release's formats, and `frank logits` on it equals `frank logits` on its dense twin, the
// same pack with every expert written as the F32 dequantised EXL3 weight.
//
// Shrunk for test time (the names, the layer schedule, the EXL3 tensor layout and the other
// dimensions are the release's): hidden 5120 -> 256, heads 64 -> 4, q_lora 1280 -> 256, o_groups
// 8 -> 2, o_lora 1024 -> 128, experts 384 -> 12, expert intermediate 2304 -> 256, vocab 129280 ->
// 512, engram_vocab_size 16e6 -> 64 (tables of ~3k rows instead of ~384M), 3 layers (sliding,
// sliding + Engram, the ratio-2 KV / index / candidate source).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>

#include "frank/model/config_v41.h"
#include "frank/model/checkpoint.h"
#include "frank/model/loader_v41.h"
#include "frank/model/synthetic_v41_pack.h"
#include "golden/run_frank.h"

namespace frank::model {
namespace {

using ::testing::HasSubstr;

constexpr int kLayers = 3;
const char* const kShrink =
    "--set hidden_size=256 --set num_attention_heads=4 --set q_lora_rank=256 --set o_groups=2 --set o_lora_rank=128 "
    "--set n_routed_experts=12 --set moe_intermediate_size=256 --set vocab_size=512 --set engram_vocab_size=64";

std::string make_pack(const std::filesystem::path& dir, const std::string& extra = "") {
  const auto r = test::run_frank(fmt::format("make-pack --out {} --layers {} --bits 2,3,4 {} {}", dir.string(),
                                             kLayers, kShrink, extra));
  EXPECT_EQ(r.exit_code, 0) << r.output();
  return r.output();
}

std::vector<float> logits_of(const std::filesystem::path& dir, const std::string& ids, const test::TempDir& tmp,
                             const std::string& file) {
  const auto out = tmp / file;
  const auto r = test::run_frank(fmt::format("logits --model {} --ids {} --out {}", dir.string(), ids, out.string()));
  EXPECT_EQ(r.exit_code, 0) << r.output();
  std::ifstream in(out, std::ios::binary);
  std::vector<float> v(std::filesystem::file_size(out) / 4);
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * 4));
  return v;
}

TEST(V41Exl3Pack, LoadsWithReleasedNamesAndFormats) {
  test::TempDir tmp;
  make_pack(tmp.path());
  const LoadedV41Model m = load_v41_model(tmp.path());
  EXPECT_TRUE(m.unused_tensors.empty()) << m.unused_tensors.front();
  ASSERT_EQ(m.config.num_layers, kLayers);
  EXPECT_EQ(m.config.kv_source_layers, std::vector<int>{2});
  EXPECT_EQ(m.config.engram.layer_ids, std::vector<int>{1});
  EXPECT_EQ(m.config.head_dim, 512);  // not shrunk
  EXPECT_EQ(m.config.index_n_heads * m.config.index_head_dim, 32 * 128);

  // Every routed expert is EXL3 with the bit width the pack cycles, and the trellis is the
  // (in, out)-major [in/16, out/16, 16K] tensor ExLlamaV3 writes.
  V41PackOptions options;
  std::set<int> bits_seen;
  const Checkpoint ck = Checkpoint::open(tmp.path());
  for (int l = 0; l < kLayers; ++l)
    for (int e = 0; e < m.config.n_routed_experts; ++e) {
      const auto& ex = m.weights.layers[l].moe.experts[e];
      const int bits = v41_pack_expert_bits(options, l, e, m.config.n_routed_experts);
      bits_seen.insert(bits);
      for (const auto* w : {&ex.gate, &ex.up, &ex.down}) {
        ASSERT_TRUE(w->quantized && w->quantized->format == QuantizedMatrix::Format::Exl3) << l << "/" << e;
        EXPECT_EQ(w->quantized->bits, bits);
        EXPECT_EQ(w->quantized->codebook, Exl3Codebook::Mul1);
      }
      const auto& down = ck.find(fmt::format("layers.{}.ffn.experts.{}.w2.trellis", l, e))->shape;
      EXPECT_EQ(down, (std::vector<int64_t>{256 / 16, 256 / 16, 16 * bits}));
    }
  EXPECT_EQ(bits_seen, (std::set<int>{2, 3, 4}));
  // The release's other formats: FP8 with 32x32 ue8m0 blocks, BF16 Linears kept as fp32.
  const auto& L2 = m.weights.layers[2];
  for (const LinearWeight* w : {&L2.attn.q_a_proj, &L2.attn.o_b_proj, &L2.moe.shared.down, &L2.attn.indexer->q_b_proj}) {
    ASSERT_TRUE(w->quantized);
    EXPECT_EQ(w->quantized->format, QuantizedMatrix::Format::Fp8Block);
    EXPECT_EQ(w->quantized->block, 32);
  }
  EXPECT_FALSE(L2.attn.compressor->kv_proj.quantized);
  EXPECT_FALSE(m.weights.layers[1].moe.router.quantized);
  EXPECT_EQ(ck.find("layers.1.engram.embed.weight")->dtype, DType::BF16);
  EXPECT_EQ(ck.find("layers.0.hc_attn_fn")->dtype, DType::F32);
}

// The EXL3 expert GEMVs sum in fp32 over weights decoded on the fly; the dense twin multiplies the
// fp32 dequantised weights. The weights agree up to fp32 rounding of the Hadamard sandwich (~1e-7
// relative), so expert outputs differ by ~1e-6 relative and the logits, three layers on, by well
// under 1e-4 of their scale (the bound of the mixed-pack test in test_exl3_loader.cpp).
TEST(V41Exl3Pack, LogitsEqualTheDenseTwin) {
  test::TempDir tmp, exl3, dense;
  make_pack(exl3.path());
  make_pack(dense.path(), "--dense-experts");
  const std::string ids = "0,17,101,42,7,300,2,2,511,64";
  const auto a = logits_of(exl3.path(), ids, tmp, "exl3.f32");
  const auto b = logits_of(dense.path(), ids, tmp, "dense.f32");
  ASSERT_EQ(a.size(), b.size());
  ASSERT_EQ(a.size(), 10u * 512u);
  double scale = 0, diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_TRUE(std::isfinite(a[i])) << i;
    scale = std::max(scale, std::fabs(static_cast<double>(b[i])));
    diff = std::max(diff, std::fabs(static_cast<double>(a[i]) - b[i]));
  }
  std::cout << "V4.1 EXL3 pack logits: max |exl3 - dense| " << diff << " of max |logit| " << scale << "\n";
  EXPECT_GT(scale, 0.0);
  EXPECT_LE(diff, 1e-4 * scale);
}

// Unshrunk, the pack's config is the release's cut to N layers (dsv41-model.md §1).
TEST(V41Exl3Pack, FullSizeConfigIsTheReleasedOne) {
  V41PackOptions options;
  options.layers = 40;
  const V41Config c = parse_v41_config(v41_pack_config(options));
  EXPECT_EQ(c.hidden_size, 5120);
  EXPECT_EQ(c.n_routed_experts, 384);
  EXPECT_EQ(c.moe_intermediate_size, 2304);
  EXPECT_EQ(c.vocab_size, 129280);
  EXPECT_EQ(c.kv_source_layers, (std::vector<int>{2, 8, 14, 20}));
  EXPECT_EQ(c.index_source_layers, (std::vector<int>{2, 8, 14, 20, 24, 28, 32, 36}));
  EXPECT_EQ(c.candidate_source_layer, 20);
  EXPECT_EQ(c.engram.layer_ids, (std::vector<int>{1, 14}));
  // The release's table sizes follow from its primes (dsv41-model.md §1: 384006168, 384016682).
  EXPECT_EQ(c.engram.table_rows, (std::vector<int64_t>{384006168, 384016682}));
  options.layers = 2;
  const V41Config two = parse_v41_config(v41_pack_config(options));
  EXPECT_EQ(two.compress_ratio, (std::vector<int>{0, 0}));
  EXPECT_TRUE(two.kv_source_layers.empty());
  EXPECT_EQ(two.candidate_source_layer, -1);
}

TEST(V41Exl3Pack, BadOptionsGiveClearErrors) {
  test::TempDir tmp;
  const auto run = [&](const std::string& args) { return test::run_frank("make-pack --out " + tmp.path().string() + " " + args); };
  EXPECT_THAT(run("--bits 2,9").output(), HasSubstr("EXL3 bit width 9 is outside 1..8"));
  EXPECT_THAT(run("--codebook mul2").output(), HasSubstr("--codebook: EXL3 codebook 'mul2' is unknown"));
  EXPECT_THAT(run("--set hidden_size").output(), HasSubstr("expected KEY=VALUE"));
  EXPECT_THAT(run("--layers 41").output(), HasSubstr("1 to 40 layers, not 41"));
  EXPECT_THAT(run("--set num_attention_heads=0").output(), HasSubstr("num_attention_heads"));
}

}  // namespace
}  // namespace frank::model
