// Loading EXL3 Linears (model/exl3_linear_loader.h, model/exl3_pack.h): the tensors of ExLlamaV3's
// on-disk format, padding, what a pack declares, rejection of malformed or unsupported tensors
// with the tensor's name and the reason (table and fuzz), and a mixed pack — the synthetic tiny
// model with EXL3 routed experts and everything else fp32 — through the whole CPU forward pass.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <regex>

#include "frank/core/dtype.h"
#include "frank/core/error.h"
#include "frank/cpu/ops.h"
#include "frank/cpu/quant/exl3_gemv.h"
#include "frank/cpu/quantized_linear.h"
#include "frank/engine/model.h"
#include "frank/model/exl3_linear_loader.h"
#include "frank/model/loader.h"
#include "unit/model_test_util.h"

namespace frank::model {
namespace {

using ::testing::HasSubstr;
using test::TensorSpec;

// The tensors of one random EXL3 Linear [out, in] (any bit pattern is a valid trellis), under
// `stem`, with sign/scale vectors of random sign and magnitude 0.5..1.5 (times 1/sqrt(in), as the
// quantiser's scales make the weights of a normal Linear).
std::vector<TensorSpec> random_exl3(std::mt19937& rng, const std::string& stem, int64_t out, int64_t in, int bits,
                                    Exl3Codebook codebook) {
  const int64_t k = cpu::exl3_padded(in), n = cpu::exl3_padded(out);
  std::vector<uint16_t> trellis(static_cast<size_t>(k * n * bits / 16));
  for (auto& w : trellis) w = static_cast<uint16_t>(rng());
  std::uniform_real_distribution<float> magnitude(0.5f, 1.5f);
  const auto signs = [&](int64_t size, float scale) {
    std::vector<uint16_t> v(static_cast<size_t>(size));
    for (auto& h : v) h = f32_to_f16((rng() % 2 ? -1.0f : 1.0f) * magnitude(rng) * scale);
    return v;
  };
  std::vector<TensorSpec> specs{{stem + ".trellis", "I16", {k / 16, n / 16, 16 * bits}, test::to_bytes(trellis)},
                                {stem + ".suh", "F16", {k}, test::to_bytes(signs(k, 1.0f / std::sqrt(float(in))))},
                                {stem + ".svh", "F16", {n}, test::to_bytes(signs(n, 1.0f))}};
  if (codebook != Exl3Codebook::ThreeInst)
    specs.push_back({stem + (codebook == Exl3Codebook::Mcg ? ".mcg" : ".mul1"), "I32", {},
                     test::to_bytes(std::vector<int32_t>{0})});
  return specs;
}

// Writes `specs` as a checkpoint and loads the Linear `stem` [out, in] from it.
LinearWeight load_one(const std::vector<TensorSpec>& specs, const std::string& stem, int64_t out, int64_t in,
                      const Exl3Pack& pack = {}) {
  test::TempDir dir;
  test::write_file(dir / "model.safetensors", test::build_safetensors(specs));
  const Checkpoint ck = Checkpoint::open(dir.path());
  LinearWeight w;
  std::set<std::string> used;
  load_exl3_linear(ck, stem + ".weight", {out, in}, pack, w, used);
  EXPECT_EQ(used.size(), specs.size());
  return w;
}

std::string load_error(const std::vector<TensorSpec>& specs, int64_t out, int64_t in, const Exl3Pack& pack = {}) {
  try {
    load_one(specs, "blk.w", out, in, pack);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

std::vector<float> random_x(std::mt19937& rng, int64_t size) {
  std::normal_distribution<float> normal;
  std::vector<float> x(static_cast<size_t>(size));
  for (auto& v : x) v = normal(rng);
  return x;
}

TEST(Exl3Loader, ReadsTheTensorsBitsAndCodebook) {
  std::mt19937 rng(1);
  const auto specs = random_exl3(rng, "blk.w", 256, 128, 3, Exl3Codebook::Mcg);
  const LinearWeight w = load_one(specs, "blk.w", 256, 128);
  ASSERT_TRUE(w.quantized);
  const QuantizedMatrix& q = *w.quantized;
  EXPECT_EQ(q.format, QuantizedMatrix::Format::Exl3);
  EXPECT_EQ(w.rows(), 256);
  EXPECT_EQ(w.cols(), 128);
  EXPECT_EQ(q.bits, 3);
  EXPECT_EQ(q.codebook, Exl3Codebook::Mcg);
  EXPECT_EQ(test::to_bytes(q.trellis), specs[0].data);
  EXPECT_EQ(test::to_bytes(q.suh), specs[1].data);
  EXPECT_EQ(test::to_bytes(q.svh), specs[2].data);
  EXPECT_EQ(q.bytes(), specs[0].data.size() + specs[1].data.size() + specs[2].data.size());
  EXPECT_EQ(load_one(random_exl3(rng, "blk.w", 128, 128, 2, Exl3Codebook::ThreeInst), "blk.w", 128, 128).quantized->codebook,
            Exl3Codebook::ThreeInst);
}

// A Linear [100, 72] is stored padded to [128, 128]: its outputs are the padded Linear's first 100
// outputs for the input padded with zeros (what ExLlamaV3's pad_to = 128 computes).
TEST(Exl3Loader, PaddedLinearIsThePaddedProductCut) {
  std::mt19937 rng(2);
  const auto specs = random_exl3(rng, "blk.w", 100, 72, 4, Exl3Codebook::Mul1);
  const LinearWeight small = load_one(specs, "blk.w", 100, 72);
  const LinearWeight padded = load_one(specs, "blk.w", 128, 128);
  const std::vector<float> x = random_x(rng, 3 * 72);
  std::vector<float> x_padded(3 * 128, 0.0f);
  for (int t = 0; t < 3; ++t) std::copy_n(x.begin() + t * 72, 72, x_padded.begin() + t * 128);
  std::vector<float> y(3 * 100), y_padded(3 * 128);
  cpu::linear(x.data(), 3, small, y.data());
  cpu::linear(x_padded.data(), 3, padded, y_padded.data());
  for (int t = 0; t < 3; ++t)
    for (int r = 0; r < 100; ++r) ASSERT_EQ(y[t * 100 + r], y_padded[t * 128 + r]) << t << "," << r;
  // dequantize() is the same cut of the padded weight.
  const std::vector<float> w = cpu::dequantize(*small.quantized), w_padded = cpu::dequantize(*padded.quantized);
  for (int r = 0; r < 100; ++r)
    for (int i = 0; i < 72; ++i) ASSERT_EQ(w[r * 72 + i], w_padded[r * 128 + i]);
}

TEST(Exl3Loader, MalformedOrUnsupportedTensorsAreRejectedWithNameAndReason) {
  std::mt19937 rng(3);
  const auto good = random_exl3(rng, "blk.w", 128, 256, 3, Exl3Codebook::Mul1);
  ASSERT_EQ(load_error(good, 128, 256), "no error");
  const auto edited = [&](const std::function<void(std::vector<TensorSpec>&)>& edit) {
    auto specs = good;
    edit(specs);
    return specs;
  };
  const auto find = [](std::vector<TensorSpec>& specs, const std::string& suffix) -> TensorSpec& {
    return *std::find_if(specs.begin(), specs.end(), [&](const TensorSpec& s) { return s.name.ends_with(suffix); });
  };
  // The trellis: wrong rank, half-integer bitrate, orientation (the [out, in] shape), dtype.
  EXPECT_THAT(load_error(edited([&](auto& s) { find(s, ".trellis").shape = {16 * 8, 48}; }), 128, 256),
              HasSubstr("'blk.w.trellis' has 2 dimensions"));
  EXPECT_THAT(load_error(edited([&](auto& s) {
                auto& t = find(s, ".trellis");
                t.shape = {16, 8, 40};
                t.data.resize(16 * 8 * 40 * 2);
              }), 128, 256),
              HasSubstr("half-integer bitrate"));
  EXPECT_THAT(load_error(good, 256, 128), HasSubstr("'blk.w.trellis' has shape [16, 8, 48]: the Linear is [256, 128]"));
  EXPECT_THAT(load_error(edited([&](auto& s) { find(s, ".trellis").dtype = "F16"; }), 128, 256),
              HasSubstr("tensor 'blk.w.trellis' has dtype F16"));
  // The sign vectors: missing, wrong length or dtype, not finite.
  EXPECT_THAT(load_error(edited([&](auto& s) { std::erase_if(s, [](auto& t) { return t.name == "blk.w.svh"; }); }),
                         128, 256),
              HasSubstr("has no 'blk.w.svh'"));
  EXPECT_THAT(load_error(edited([&](auto& s) {
                auto& t = find(s, ".suh");
                t.shape = {128};
                t.data.resize(256);
              }), 128, 256),
              HasSubstr("blk.w.suh"));
  EXPECT_THAT(load_error(edited([&](auto& s) { find(s, ".svh").dtype = "BF16"; }), 128, 256),
              HasSubstr("tensor 'blk.w.svh' has dtype BF16"));
  EXPECT_THAT(load_error(edited([&](auto& s) { find(s, ".suh").data.replace(6, 2, std::string("\x00\x7C", 2)); }),
                         128, 256),
              HasSubstr("'blk.w.suh' element 3 is not finite"));
  // Markers, biases and the legacy format.
  EXPECT_THAT(load_error(edited([&](auto& s) { s.push_back({"blk.w.mcg", "I32", {}, std::string(4, '\0')}); }),
                         128, 256),
              HasSubstr("'blk.w.trellis' has both codebook markers"));
  EXPECT_THAT(load_error(edited([&](auto& s) { find(s, ".mul1").shape = {2}; find(s, ".mul1").data.resize(8); }),
                         128, 256),
              HasSubstr("marker 'blk.w.mul1' has shape [2]"));
  EXPECT_THAT(load_error(edited([&](auto& s) { s.push_back({"blk.w.bias", "F16", {128}, std::string(256, '\0')}); }),
                         128, 256),
              HasSubstr("'blk.w.bias': biases on EXL3 Linears are not supported"));
  EXPECT_THAT(load_error(edited([&](auto& s) { s.push_back({"blk.w.su", "I16", {16}, std::string(32, '\0')}); }),
                         128, 256),
              HasSubstr("'blk.w.su': the legacy packed-sign"));
  // Disagreement with the pack's declarations.
  Exl3Pack pack;
  pack.tensor_storage["blk.w"] = Exl3TensorPlan{4, std::nullopt};
  EXPECT_THAT(load_error(good, 128, 256, pack), HasSubstr("'blk.w.trellis' holds 3 bits per weight but"));
  pack.tensor_storage["blk.w"] = Exl3TensorPlan{3, Exl3Codebook::Mcg};
  EXPECT_THAT(load_error(good, 128, 256, pack), HasSubstr("'blk.w.trellis' uses the mul1 codebook but"));
  Exl3Pack by_config;
  by_config.codebook = Exl3Codebook::ThreeInst;
  EXPECT_THAT(load_error(good, 128, 256, by_config), HasSubstr("quantization_config says 3inst"));
  Exl3Pack mixed;
  mixed.mixed = true;
  EXPECT_THAT(load_error(good, 128, 256, mixed), HasSubstr("'blk.w.trellis': this mixed pack"));
}

// Random damage to a valid Linear's tensors (shapes, dtypes, sizes, markers): every outcome is a
// clean load that computes, or a frank::Error that names a tensor of the Linear — never a crash.
TEST(Exl3Loader, FuzzedTensorsLoadOrFailCleanly) {
  std::mt19937 rng(4);
  const char* dtypes[] = {"I16", "U16", "F16", "BF16", "I32", "F32", "U8"};
  int loaded = 0, rejected = 0;
  for (int iteration = 0; iteration < 300; ++iteration) {
    const int bits = 1 + static_cast<int>(rng() % 8);
    auto specs = random_exl3(rng, "blk.w", 128, 128, bits, static_cast<Exl3Codebook>(rng() % 3));
    const int edits = static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      TensorSpec& t = specs[rng() % specs.size()];
      switch (rng() % 5) {
        case 0: t.dtype = dtypes[rng() % 7]; break;
        case 1: if (!t.shape.empty()) t.shape[rng() % t.shape.size()] += static_cast<int64_t>(rng() % 5) - 2; break;
        case 2: t.shape.push_back(1 + rng() % 2); break;
        case 3: if (!t.shape.empty()) t.shape.pop_back(); break;
        case 4: specs.push_back({"blk.w." + std::string(rng() % 2 ? "mcg" : "mul1"), "I32", {}, std::string(4, 'x')}); break;
      }
    }
    // The file must be self-consistent for the reader to open it; fix each tensor's byte count.
    for (auto& t : specs) {
      int64_t numel = 1;
      for (int64_t d : t.shape) numel *= std::max<int64_t>(d, 0);
      const size_t width = t.dtype == "U8" ? 1 : (t.dtype == "I32" || t.dtype == "F32") ? 4 : 2;
      t.data.resize(static_cast<size_t>(numel) * width, '\x11');
    }
    std::sort(specs.begin(), specs.end(), [](auto& a, auto& b) { return a.name < b.name; });
    specs.erase(std::unique(specs.begin(), specs.end(), [](auto& a, auto& b) { return a.name == b.name; }), specs.end());
    try {
      const LinearWeight w = load_one(specs, "blk.w", 128, 128);
      std::vector<float> x(128, 1.0f), y(128);
      cpu::linear(x.data(), 1, w, y.data());
      ++loaded;
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("blk.w")) << e.what();
      ++rejected;
    }
  }
  EXPECT_GT(loaded, 0);
  EXPECT_GT(rejected, 0);
}

TEST(Exl3Pack, ReadsNativeAndMixedDeclarations) {
  const nlohmann::json native = {{"quantization_config",
                                  {{"quant_method", "exl3"}, {"bits", 2.9}, {"codebook", "mul1"}, {"out_scales", "always"}}}};
  const nlohmann::json storage = {
      {"tensor_storage",
       {{"layers.3.ffn.experts.7.w1", {{"quant_format", "exl3"}, {"bits_per_weight", 3}, {"mul1_multiplier", static_cast<int32_t>(0x83DCD12Du)}}},
        {"layers.3.ffn.gate", {{"quant_format", "fp16"}}}}}};
  const Exl3Pack pack = parse_exl3_pack(native, &storage, false);  // the multiplier as the int32 it is stored as
  EXPECT_TRUE(pack.declared);
  EXPECT_FALSE(pack.mixed);
  EXPECT_EQ(pack.codebook, Exl3Codebook::Mul1);
  ASSERT_EQ(pack.tensor_storage.size(), 1u);
  EXPECT_EQ(pack.tensor_storage.at("layers.3.ffn.experts.7.w1").bits, 3);
  EXPECT_EQ(pack.tensor_storage.at("layers.3.ffn.experts.7.w1").codebook, Exl3Codebook::Mul1);

  const nlohmann::json mixed = {{"text_config",
                                 {{"quantization_config",
                                   {{"quant_method", "exl3"}, {"bits", 2}, {"codebook", "mcg"},
                                    {"non_routed_quantization", {{"quant_method", "deepseek_v4_fp8"}}}}}}}};
  const Exl3Pack mixed_pack = parse_exl3_pack(mixed, nullptr, false);
  EXPECT_TRUE(mixed_pack.mixed);
  EXPECT_EQ(mixed_pack.codebook, Exl3Codebook::Mcg);
  EXPECT_FALSE(parse_exl3_pack({{"quantization_config", {{"quant_method", "fp8"}}}}, nullptr, false).declared);
  EXPECT_FALSE(parse_exl3_pack(nlohmann::json::object(), nullptr, false).declared);
}

TEST(Exl3Pack, RejectsWhatFrankCannotRead) {
  const auto error_of = [](const nlohmann::json& config, const nlohmann::json* storage, bool relayout) {
    try {
      parse_exl3_pack(config, storage, relayout);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const nlohmann::json native = {{"quantization_config", {{"quant_method", "exl3"}, {"codebook", "mul1"}}}};
  EXPECT_THAT(error_of({{"quantization_config", {{"quant_method", "exl3"}, {"codebook", "mul2"}}}}, nullptr, false),
              HasSubstr("codebook 'mul2' is unknown"));
  EXPECT_THAT(error_of(native, nullptr, true), HasSubstr("PF-G8"));
  const auto with_entry = [&](const nlohmann::json& entry) {
    const nlohmann::json storage = {{"tensor_storage", {{"layers.0.ffn.experts.0.w2", entry}}}};
    return error_of(native, &storage, false);
  };
  EXPECT_THAT(with_entry({{"quant_format", "exl3"}, {"bits_per_weight", 2.5}}),
              HasSubstr("tensor_storage['layers.0.ffn.experts.0.w2']: 2.5 bits per weight is a half-integer"));
  EXPECT_THAT(with_entry({{"quant_format", "exl3"}, {"bits_per_weight", 9}}), HasSubstr("9 bits per weight"));
  EXPECT_THAT(with_entry({{"quant_format", "exl3"}, {"bits_per_weight", 3}, {"mcg_multiplier", 12345}}),
              HasSubstr("custom mcg_multiplier 12345"));
  EXPECT_THAT(with_entry({{"quant_format", "exl3"}}), HasSubstr("'bits_per_weight' is missing"));
}

// A mixed pack: the tiny model's routed experts as EXL3 at K = 2, 3, 4 (by layer) over fp32 for
// everything else, loaded through load_model. The forward pass must equal, within fp32 rounding,
// the same model whose experts are the dense fp32 dequantize() of those EXL3 weights: the EXL3
// path sums in fp32 (exl3_gemv.h), the dense reference in double, and both see the same weights
// up to fp32 rounding of the Hadamard sandwich, so each expert output differs by ~1e-6 relative
// and the logits (a few layers on) by well under 1e-4 of their scale.
TEST(Exl3Loader, MixedPackExpertsRunInTheForwardPass) {
  auto tiny = synthetic_model("tiny", 5);
  const ModelConfig& c = tiny.config;
  std::mt19937 rng(6);
  const std::regex expert(R"(layers\.(\d+)\.ffn\.experts\.\d+\.w[123]\.weight)");
  std::vector<TensorSpec> specs;
  for (auto& s : test::weight_specs(c, tiny.weights, false, [](const std::string& n) { return n; })) {
    std::smatch m;
    if (!std::regex_match(s.name, m, expert)) {
      specs.push_back(s);
      continue;
    }
    const int bits = 2 + std::stoi(m[1]) % 3;
    for (auto& t : random_exl3(rng, s.name.substr(0, s.name.size() - 7), s.shape[0], s.shape[1], bits,
                               Exl3Codebook::Mul1))
      specs.push_back(t);
  }
  nlohmann::json config = test::tiny_official_config();
  config["quantization_config"] = {{"quant_method", "exl3"}, {"bits", 3}, {"codebook", "mul1"},
                                   {"non_routed_quantization", {{"quant_method", "none"}}}};
  test::TempDir dir;
  test::write_checkpoint(dir.path(), config, specs);
  LoadedModel loaded = load_model(dir.path());
  EXPECT_TRUE(loaded.unused_tensors.empty()) << loaded.unused_tensors.front();

  ModelWeights dense = loaded.weights;
  int exl3_linears = 0;
  for (auto& layer : dense.layers)
    for (auto& e : layer.moe.experts)
      for (LinearWeight* w : {&e.gate, &e.up, &e.down}) {
        ASSERT_TRUE(w->quantized && w->quantized->format == QuantizedMatrix::Format::Exl3);
        w->dense = Tensor({w->rows(), w->cols()}, cpu::dequantize(*w->quantized));
        w->quantized.reset();
        ++exl3_linears;
      }
  EXPECT_EQ(exl3_linears, c.num_layers * c.n_routed_experts * 3);

  const engine::Model with_exl3(loaded.config, std::move(loaded.weights));
  const engine::Model with_dense(c, std::move(dense));
  const std::vector<int32_t> ids = {3, 17, 101, 42, 7};
  engine::Session s1 = with_exl3.new_session(), s2 = with_dense.new_session();
  const Tensor a = with_exl3.forward(s1, ids), b = with_dense.forward(s2, ids);
  double scale = 0, diff = 0;
  for (size_t i = 0; i < a.data.size(); ++i) {
    scale = std::max(scale, std::fabs(static_cast<double>(b.data[i])));
    diff = std::max(diff, std::fabs(static_cast<double>(a.data[i]) - b.data[i]));
  }
  std::cout << "mixed pack logits: max |exl3 - dense| " << diff << " of max |logit| " << scale << "\n";
  EXPECT_GT(scale, 0.0);
  EXPECT_LE(diff, 1e-4 * scale);
}

}  // namespace
}  // namespace frank::model
