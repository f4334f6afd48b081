#pragma once
// Parameters of the synthetic routing-trace generator. Every default and where it comes from is
// in docs/trace-generator.md; the short reason is beside each field.
#include <cstdint>
#include <string>

namespace frank::experts {

struct GeneratorParams {
  // Model shape (DeepSeek-V4-Flash by default) and the fingerprint's family name.
  std::string model_type = "deepseek_v4";
  uint32_t n_layers = 43;
  uint32_t n_experts = 256;
  uint32_t top_k = 6;

  // Which traffic: the workload name picks the hot sets and phases; the seed picks the token stream.
  // Two traces of one workload with different seeds are held-out samples of the same traffic.
  std::string workload = "agent-a";
  uint64_t seed = 1;

  // Skew: the hottest hot_fraction of all experts receive hot_share of all routings
  // (vLLM-Moet on DeepSeek-V4-Flash: "~19% coverage serves ~96% of routings").
  double hot_fraction = 0.19;
  double hot_share = 0.96;
  // Layer 0's 96% set is depth_gradient times the size of the last layer's (a public single-stream
  // DS4-Flash measurement: 156 vs 95 of 256 experts).
  double depth_gradient = 1.6;
  // Weights by rank are Zipf-Mandelbrot, (rank + 1 + head_offset * hot set size)^-s: the offset
  // flattens the head so that a layer's hottest expert is chosen by about half of the tokens, not
  // all of them (DeepSeek's shared expert carries what every token needs). An assumption; 0 is
  // plain Zipf.
  double head_offset = 0.5;
  // Fraction of each layer's hot set that every workload shares (the model's generally popular
  // experts); the rest is the workload's own. An assumption.
  double overlap = 0.5;
  // Within a workload, traffic moves between phases (sub-tasks); each phase re-ranks a random
  // phase_shift of the experts among themselves. Phases last phase_mean_tokens on average
  // (geometric). Assumptions; 1 phase turns this off.
  uint32_t phases = 4;
  double phase_shift = 0.25;
  double phase_mean_tokens = 2048;
  // Prefill tokens (prompt text, tool output) route differently from generated tokens: their
  // ranking has a further prefill_shift of its ranks permuted. An assumption (routing follows token
  // identity, and an agent reads other text than it writes); 0 turns this off.
  double prefill_shift = 0.2;
  // Each of a token's picks repeats one of the previous token's experts with this probability
  // (consecutive tokens share experts more often than chance; Mixtral paper, section 5).
  double persistence = 0.3;

  // Agent turns: a prefill of new tokens (tool output, user text) in chunks, then a reply.
  // Turn lengths are uniform on [1, 2 * mean - 1] (mean 0: no prefill).
  uint32_t prefill_mean_tokens = 2048;
  uint32_t prefill_chunk_tokens = 512;
  uint32_t decode_mean_tokens = 256;
  // Reply steps: a verify step (1 + draft_tokens tokens, MTP k=2) with probability verify_fraction,
  // else a 1-token decode step.
  uint32_t draft_tokens = 2;
  double verify_fraction = 0.5;
};

// Throws frank::Error naming the parameter that is out of range.
void validate(const GeneratorParams& params);

}  // namespace frank::experts
