#pragma once
// Synthetic models: a DeepSeek-V4 config and random weights built in memory, deterministic from
// a seed. They exercise every code path without a checkpoint (the embedded default model); their
// words are random.
#include <cstdint>
#include <string>
#include <vector>

#include "frank/model/loader.h"

namespace frank::model {

// Names accepted by --synthetic.
std::vector<std::string> synthetic_names();

// "tiny": 6 layers (2 sliding, 2 CSA, 2 HCA), hidden 64, vocab 256, 8 experts, 3 hash layers.
// "tiny-chat": the same with DeepSeek-V4's vocabulary of 129280 (the server's embedded default).
// "tiny-chat-mtp": tiny-chat with an MTP block (random, so it drafts poorly): speculative decoding.
// Throws frank::Error for an unknown name.
ModelConfig synthetic_config(const std::string& name);

// Random weights for `config`: linear weights ~ N(0, 1/in), norms near 1, live sinks, biases,
// position biases and hash tables. The same seed gives the same weights on every platform.
ModelWeights random_weights(const ModelConfig& config, uint64_t seed);

// DeepSeek-V4-Flash's dimensions (dsv4-model.md §1) with its first `layers` layers: 2 sliding, then
// CSA (ratio 4) and HCA (ratio 128) alternating; layers 0-2 hash-routed. For benchmarks.
ModelConfig v4_flash_config(int layers);

// The weights of `config` with Linear weights and the embedding as shapes only (no host data: a GPU
// backend generates them in device memory, cuda::DeviceWeights); the small rest (norms, mHC,
// sinks, biases, hash tables) random as random_weights makes them.
ModelWeights skeleton_weights(const ModelConfig& config, uint64_t seed);

LoadedModel synthetic_model(const std::string& name, uint64_t seed);

}  // namespace frank::model
