#pragma once
// The formats DeepSeek-V4-Flash ships its Linear weights in (dsv4-model.md §9), for a synthetic
// model at the real size that should stream the bytes a real checkpoint streams (`frank bench
// decode --format fp8-fp4`): FP8 e4m3 with a ue8m0 scale per 128x128 block for the attention
// projections (wq_a, wq_b, wkv, wo_a, wo_b), the indexer's query projection, the shared experts and
// the MTP block's e/h projections; FP4 e2m1 with a ue8m0 scale per 32 values for the routed
// experts; BF16 for the rest (compressors, indexer weights, router, embedding, head).
#include <cstdint>
#include <string_view>

#include "frank/core/thread_pool.h"
#include "frank/model/config.h"
#include "frank/model/weights.h"

namespace frank::model {

enum class ShippedFormat { Bf16, Fp8, Fp4 };

// The format of the Linear weight named `name` (official names, as for_each_weight gives them).
ShippedFormat v4_flash_format(std::string_view name);

// The bytes a Linear [rows, cols] of format f takes: BF16 2 a value; FP8 1 a value plus a scale
// byte per 128x128 block; FP4 half a byte a value plus a scale byte per 32.
double shipped_bytes(ShippedFormat f, int64_t rows, int64_t cols);

// Every shape-only Linear of `w` (skeleton_weights) that ships as FP8 or FP4 becomes random codes of
// that format (any code but e4m3's NaNs; scales that keep |w| below ~0.1), made in parallel on
// `pool`, each weight from its own seed; the BF16 ones stay shape-only.
void fill_shipped_formats(const ModelConfig& config, ModelWeights& w, uint64_t seed, ThreadPool& pool);

}  // namespace frank::model
