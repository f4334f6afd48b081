#include "frank/model/synthetic_v41_pack.h"

#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <regex>

#include "frank/core/dtype.h"
#include "frank/core/error.h"
#include "frank/core/splitmix64.h"
#include "frank/cpu/quant/exl3_codebook.h"
#include "frank/cpu/quant/exl3_matrix.h"
#include "frank/cpu/quant/exl3_trellis.h"
#include "frank/cpu/quantized_linear.h"
#include "frank/model/config_v41.h"
#include "frank/model/engram_layout.h"
#include "frank/model/safetensors_writer.h"
#include "frank/model/synthetic_exl3.h"
#include "frank/model/weight_init.h"
#include "frank/model/weights_v41.h"

namespace frank::model {
namespace {

using Bytes = std::vector<std::byte>;

// The released V4.1-Flash text_config (dsv41-model.md §1) without DSpark.
nlohmann::json released_text_config() {
  return {{"model_type", "deepseek_v41_text"}, {"vocab_size", 129280}, {"hidden_size", 5120},
          {"num_attention_heads", 64}, {"num_key_value_heads", 1}, {"head_dim", 512}, {"qk_rope_head_dim", 64},
          {"q_lora_rank", 1280}, {"o_groups", 8}, {"o_lora_rank", 1024}, {"n_routed_experts", 384},
          {"n_shared_experts", 1}, {"num_experts_per_tok", 6}, {"moe_intermediate_size", 2304},
          {"sliding_window", 128}, {"index_n_heads", 32}, {"index_head_dim", 128}, {"index_topk", 512},
          {"hc_mult", 4}, {"hc_sinkhorn_iters", 20}, {"hc_eps", 1e-6}, {"rms_norm_eps", 1e-20},
          {"swiglu_limit", 10.0}, {"routed_scaling_factor", 1.5}, {"scoring_func", "sqrtsoftplus"},
          {"topk_method", "noaux_tc"}, {"norm_topk_prob", true}, {"gate_temp", 1.0}, {"hidden_act", "silu"},
          {"rope_theta", 10000.0}, {"compress_rope_theta", 160000.0},
          {"rope_scaling", {{"rope_type", "yarn"}, {"factor", 16.0}, {"original_max_position_embeddings", 65536},
                            {"beta_fast", 32}, {"beta_slow", 1}}},
          {"max_position_embeddings", 1048576}, {"bos_token_id", 0}, {"eos_token_id", 1}, {"pad_token_id", 2},
          {"num_nextn_predict_layers", 0}, {"tie_word_embeddings", false}, {"candidate_topk_blocks", 2048},
          {"candidate_block_size", 8}, {"engram_vocab_size", 16000000}, {"engram_max_ngram_size", 4},
          {"engram_n_heads", 8}, {"engram_head_dim", 256}, {"engram_pad_token_id", 2},
          {"engram_compressed_vocab_size", 99092}};
}

// The released schedule's entries below `layers` (kv sources 2/8/14/20, Engram layers 1/14, ...).
void cut_schedule(nlohmann::json& text, int layers) {
  std::vector<int> ratios{0, 0};
  ratios.insert(ratios.end(), 18, 2);
  ratios.insert(ratios.end(), 20, 1);
  if (layers < 1 || layers > static_cast<int>(ratios.size()))
    throw Error(fmt::format("a V4.1 pack has 1 to {} layers, not {}", ratios.size(), layers));
  ratios.resize(layers);
  const auto below = [&](std::vector<int> ids) {
    std::erase_if(ids, [&](int l) { return l >= layers; });
    return ids;
  };
  const auto kv = below({2, 8, 14, 20});
  text["num_hidden_layers"] = layers;
  text["compress_ratios"] = ratios;
  text["kv_source_layer_ids"] = kv;
  text["index_source_layer_ids"] = below({2, 8, 14, 20, 24, 28, 32, 36});
  // The release's candidate source is layer 20; a shorter stack uses its last KV source, or none.
  text["candidate_source_layer_id"] = kv.empty() ? nlohmann::json(nullptr) : nlohmann::json(kv.back());
  text["engram_layer_ids"] = below({1, 14});
}

uint64_t seed_of(uint64_t seed, const std::string& name) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a of the name: each tensor's values are its own
  for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;
  return splitmix64_finalize(seed ^ h);
}

template <typename T>
void append(Bytes& out, T value) {
  const auto* p = reinterpret_cast<const std::byte*>(&value);
  out.insert(out.end(), p, p + sizeof(T));
}

uint16_t bf16_of(float x) {  // round to nearest even (the values are finite)
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  return static_cast<uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}

int64_t elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// A random EXL3 Linear [rows = out, cols = in] (synthetic_exl3.h), each tensor seeded by its name.
QuantizedMatrix random_exl3(const std::string& stem, uint64_t seed, int64_t rows, int64_t cols, int bits,
                            Exl3Codebook codebook) {
  const Exl3Seeds seeds{seed_of(seed, stem + ".trellis"), seed_of(seed, stem + ".suh"), seed_of(seed, stem + ".svh")};
  return model::random_exl3(rows, cols, bits, codebook, seeds);
}

template <typename T>
SafetensorsWriter::Fill copy_of(std::vector<T> values) {
  return [values = std::move(values)](Bytes& out) {
    out.resize(values.size() * sizeof(T));
    std::memcpy(out.data(), values.data(), out.size());
  };
}

// A routed expert as EXL3 tensors (or their dense twin); returns its tensor_storage entry.
nlohmann::json add_expert(SafetensorsWriter& file, const WeightSlot& slot, int bits, const V41PackOptions& o) {
  const std::string stem = slot.name.substr(0, slot.name.size() - std::string(".weight").size());
  const int64_t rows = slot.shape[0], cols = slot.shape[1];
  if (o.dense_experts) {
    file.add(slot.name, DType::F32, slot.shape, [=](Bytes& out) {
      const auto w = cpu::dequantize(random_exl3(stem, o.seed, rows, cols, bits, o.codebook));
      out.resize(w.size() * 4);
      std::memcpy(out.data(), w.data(), out.size());
    });
    return nullptr;
  }
  const int64_t k = cpu::exl3_padded(cols), n = cpu::exl3_padded(rows);
  nlohmann::json stored;
  const auto add = [&](const std::string& suffix, DType dtype, std::vector<int64_t> shape, SafetensorsWriter::Fill f) {
    stored[stem + suffix] = {{"shape", shape}, {"n_bytes", elements(shape) * static_cast<int64_t>(dtype_size(dtype))},
                             {"dtype", dtype == DType::I16 ? "torch.int16" : dtype == DType::F16 ? "torch.float16"
                                                                                                   : "torch.int32"}};
    file.add(stem + suffix, dtype, std::move(shape), std::move(f));
  };
  const auto part = [=](auto member) {
    return [=](Bytes& out) {
      const QuantizedMatrix q = random_exl3(stem, o.seed, rows, cols, bits, o.codebook);
      copy_of(q.*member)(out);
    };
  };
  add(".trellis", DType::I16, {k / 16, n / 16, 16 * int64_t{bits}}, part(&QuantizedMatrix::trellis));
  add(".suh", DType::F16, {k}, part(&QuantizedMatrix::suh));
  add(".svh", DType::F16, {n}, part(&QuantizedMatrix::svh));
  nlohmann::json entry = {{"quant_format", "exl3"}, {"bits_per_weight", bits}, {"stored_tensors", stored}};
  if (o.codebook != Exl3Codebook::ThreeInst) {
    const bool mul1 = o.codebook == Exl3Codebook::Mul1;
    const uint32_t multiplier = mul1 ? cpu::kExl3Mul1Multiplier : cpu::kExl3McgMultiplier;
    // The marker's value is never read (only its presence); ExLlamaV3 stores the multiplier.
    add(mul1 ? ".mul1" : ".mcg", DType::I32, {}, copy_of(std::vector<int32_t>{static_cast<int32_t>(multiplier)}));
    entry[mul1 ? "mul1_multiplier" : "mcg_multiplier"] = static_cast<int32_t>(multiplier);
  }
  return entry;
}

// The release's FP8 Linears (e4m3, one ue8m0 scale per 32x32 block).
bool is_fp8_linear(const std::string& name) {
  static const std::regex fp8(
      R"(layers\.\d+\.(attn\.(wq_a|wq_b|wkv|wo_a|wo_b|indexer\.wq_b)|ffn\.shared_experts\.w[123]|engram\.wkv)\.weight)");
  return std::regex_match(name, fp8);
}

// Random e4m3 codes of magnitude 2^-6 .. 3.75 (exponent fields 1..8, RMS ~1; never NaN) under a
// block scale 2^-round(log2 sqrt(in)), so the weights are ~ 1/sqrt(in) like a trained Linear.
void add_fp8(SafetensorsWriter& file, const WeightSlot& slot, uint64_t seed) {
  const std::string stem = slot.name.substr(0, slot.name.size() - std::string(".weight").size());
  const int64_t rows = slot.shape[0], cols = slot.shape[1];
  file.add(slot.name, DType::F8_E4M3, slot.shape, [=](Bytes& out) {
    SplitMix64 rng(seed_of(seed, slot.name));
    out.resize(static_cast<size_t>(rows * cols));
    for (auto& b : out) {
      const uint64_t r = rng();
      b = static_cast<std::byte>(((r >> 6) & 1) << 7 | (1 + r % 8) << 3 | ((r >> 3) & 7));
    }
  });
  const int exponent = 127 - static_cast<int>(std::lround(std::log2(std::sqrt(static_cast<double>(cols)))));
  const std::vector<int64_t> grid{(rows + 31) / 32, (cols + 31) / 32};
  file.add(stem + ".scale", DType::F8_E8M0, grid,
           copy_of(std::vector<uint8_t>(static_cast<size_t>(grid[0] * grid[1]), static_cast<uint8_t>(exponent))));
}

void add_float(SafetensorsWriter& file, const WeightSlot& slot, uint64_t seed) {
  // fp32 where the release keeps it (mHC, sinks, router biases), BF16 elsewhere.
  const bool f32 = slot.role == WeightRole::HcFn || slot.role == WeightRole::HcBase ||
                   slot.role == WeightRole::HcScale || slot.role == WeightRole::Sink ||
                   slot.role == WeightRole::SelectionBias;
  file.add(slot.name, f32 ? DType::F32 : DType::BF16, slot.shape, [=, role = slot.role, shape = slot.shape,
                                                                   name = slot.name](Bytes& out) {
    Gaussian g(seed_of(seed, name));
    const int64_t n = elements(shape);
    out.clear();
    out.reserve(static_cast<size_t>(n) * (f32 ? 4 : 2));
    for (int64_t i = 0; i < n; ++i) {
      const float v = role_sample(role, shape, g);
      if (f32)
        append(out, v);
      else
        append(out, bf16_of(v));
    }
  });
}

void write_json(const std::filesystem::path& path, const nlohmann::json& j) {
  std::ofstream out(path);
  out << j.dump(2) << "\n";
  if (!out) throw Error(fmt::format("writing '{}' failed", path.string()));
}

// Engram hash data: a token map of classes t mod compressed_vocab_size and odd multipliers below the
// bound load_engram_layout checks (no int64 overflow in the hash).
void write_engram_hash(const std::filesystem::path& path, const V41Config& c, uint64_t seed) {
  const auto& e = c.engram;
  std::vector<int64_t> token_map(static_cast<size_t>(c.vocab_size));
  for (size_t t = 0; t < token_map.size(); ++t) token_map[t] = static_cast<int64_t>(t) % e.compressed_vocab_size;
  const int64_t bound = std::max<int64_t>(1, std::numeric_limits<int64_t>::max() / e.compressed_vocab_size / 2);
  SplitMix64 rng(seed_of(seed, "engram.multipliers"));
  std::vector<int64_t> multipliers(e.layer_ids.size() * static_cast<size_t>(e.max_ngram_size));
  for (auto& m : multipliers) m = 2 * static_cast<int64_t>(rng() % static_cast<uint64_t>(bound)) + 1;
  SafetensorsWriter file;
  file.add("engram.token_map", DType::I64, {c.vocab_size}, copy_of(token_map));
  file.add("engram.multipliers", DType::I64, {static_cast<int64_t>(e.layer_ids.size()), e.max_ngram_size},
           copy_of(multipliers));
  file.write(path);
}

}  // namespace

int v41_pack_expert_bits(const V41PackOptions& o, int layer, int expert, int experts_per_layer) {
  if (o.expert_bits.empty()) throw Error("a V4.1 pack needs at least one expert bit width");
  const size_t i = static_cast<size_t>(layer) * static_cast<size_t>(experts_per_layer) + static_cast<size_t>(expert);
  return o.expert_bits[i % o.expert_bits.size()];
}

nlohmann::json v41_pack_config(const V41PackOptions& o) {
  nlohmann::json text = released_text_config();
  cut_schedule(text, o.layers);
  for (const auto& [key, value] : o.overrides.items()) text[key] = value;
  // The random token map numbers classes t mod compressed_vocab_size: all classes need a token.
  text["engram_compressed_vocab_size"] =
      std::min(text["engram_compressed_vocab_size"].get<int>(), text["vocab_size"].get<int>());
  // Each Engram table has as many rows as its primes sum to (engram_layout.h).
  text["engram_num_embeddings"] = std::vector<int64_t>(text["engram_layer_ids"].size(), 1);
  nlohmann::json config = {{"architectures", {"DeepseekV41ForCausalLM"}}, {"model_type", "deepseek_v41"},
                           {"torch_dtype", "bfloat16"}, {"text_config", text}};
  const V41Config parsed = parse_v41_config(config);
  std::vector<int64_t> rows;
  for (const auto& primes : engram_primes(parsed.engram)) {
    int64_t sum = 0;
    for (int64_t p : primes) sum += p;
    rows.push_back(sum);
  }
  config["text_config"]["engram_num_embeddings"] = rows;
  const nlohmann::json fp8 = {{"quant_method", "fp8"}, {"activation_scheme", "dynamic"}, {"fmt", "e4m3"},
                              {"scale_fmt", "ue8m0"}, {"weight_block_size", {32, 32}}};
  if (o.dense_experts) {
    config["quantization_config"] = fp8;
  } else {
    double mean_bits = 0;
    for (int b : o.expert_bits) mean_bits += b;
    config["quantization_config"] = {{"quant_method", "exl3"}, {"bits", mean_bits / o.expert_bits.size()},
                                     {"codebook", std::string(cpu::exl3_codebook_name(o.codebook))}, {"weight_block_size", {32, 32}},
                                     {"non_routed_quantization", fp8}};
  }
  parse_v41_config(config);  // the final config must be valid as written
  return config;
}

void write_v41_pack(const std::filesystem::path& dir, const V41PackOptions& o) {
  for (int b : o.expert_bits)
    if (b < cpu::kExl3MinBits || b > cpu::kExl3MaxBits)
      throw Error(fmt::format("EXL3 bit width {} is outside {}..{}", b, cpu::kExl3MinBits, cpu::kExl3MaxBits));
  const nlohmann::json config = v41_pack_config(o);
  const V41Config c = parse_v41_config(config);
  std::filesystem::create_directories(dir);

  static const std::regex expert(R"(layers\.(\d+)\.ffn\.experts\.(\d+)\.w[123]\.weight)");
  SafetensorsWriter file;
  nlohmann::json storage = nlohmann::json::object();
  V41Weights layout;
  for_each_v41_weight(c, layout, [&](const WeightSlot& slot) {
    std::smatch m;
    if (slot.linear != nullptr && std::regex_match(slot.name, m, expert)) {
      const int bits = v41_pack_expert_bits(o, std::stoi(m[1]), std::stoi(m[2]), c.n_routed_experts);
      const auto entry = add_expert(file, slot, bits, o);
      if (!entry.is_null()) storage[slot.name.substr(0, slot.name.size() - 7)] = entry;
    } else if (slot.linear != nullptr && is_fp8_linear(slot.name)) {
      add_fp8(file, slot, o.seed);
    } else {
      add_float(file, slot, o.seed);
    }
  });
  file.write(dir / "model.safetensors");
  write_json(dir / "config.json", config);
  if (!o.dense_experts)
    write_json(dir / "quantization_config.json",
               {{"quant_method", "exl3"}, {"codebook", std::string(cpu::exl3_codebook_name(o.codebook))}, {"tensor_storage", storage}});
  if (!c.engram.layer_ids.empty()) write_engram_hash(dir / "engram_hash.safetensors", c, o.seed);
}

}  // namespace frank::model
