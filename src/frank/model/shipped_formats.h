#pragma once
// The formats DeepSeek-V4-Flash ships its Linear weights in (dsv4-model.md §9), for a synthetic
// model at the real size that should stream the bytes a real checkpoint streams (`frank bench
// decode --format fp8-fp4`): FP8 e4m3 with a ue8m0 scale per 128x128 block for the attention
// projections (wq_a, wq_b, wkv, wo_a, wo_b), the indexer's query projection, the shared experts and
// the MTP block's e/h projections; FP4 e2m1 with a ue8m0 scale per 32 values for the routed
// experts; BF16 for the rest (compressors, indexer weights, router, embedding, head). Or, as the
// EXL3 packs frank targets store them (`--format exl3-kN`), the main layers' routed experts in EXL3
// at N bits (3INST; synthetic_exl3.h) and every other weight as V4-Flash ships it (the mixed vLLM
// packs keep attention, shared experts and the MTP block's experts in the official formats).
#include <cstdint>
#include <string_view>

#include "frank/core/thread_pool.h"
#include "frank/model/config.h"
#include "frank/model/weights.h"

namespace frank::model {

enum class ShippedFormat { Bf16, Fp8, Fp4, Exl3 };

// The format of the Linear weight named `name` (official names, as for_each_weight gives them);
// with `exl3_expert_bits` > 0 the main layers' routed experts are EXL3.
ShippedFormat v4_flash_format(std::string_view name, int exl3_expert_bits = 0);

// The bytes a Linear [rows, cols] of format f takes: BF16 2 a value; FP8 1 a value plus a scale
// byte per 128x128 block; FP4 half a byte a value plus a scale byte per 32; EXL3 the trellis at
// `exl3_bits` and the fp16 suh / svh (exl3_bytes, core/packed_bytes.h).
double shipped_bytes(ShippedFormat f, int64_t rows, int64_t cols, int exl3_bits = 0);

// Every shape-only Linear of `w` (skeleton_weights) that ships as FP8 or FP4 becomes random codes of
// that format (any code but e4m3's NaNs; scales that keep |w| below ~0.1), made in parallel on
// `pool`, each weight from its own seed; the BF16 ones stay shape-only. With `exl3_expert_bits` >
// 0 the main layers' routed experts become shape-only EXL3 at those bits (exl3_shape_only: the GPU
// makes their trellis; frank::Error unless their shapes are multiples of 128).
void fill_shipped_formats(const ModelConfig& config, ModelWeights& w, uint64_t seed, ThreadPool& pool,
                          int exl3_expert_bits = 0);

}  // namespace frank::model
