#pragma once
// Shared by the CUDA speculative-decoding tests: plain greedy decoding on the GPU, and greedy
// speculative decoding over a CUDA verify target with any drafter.
#include <span>
#include <vector>

#include "frank/cuda/cuda_verify_target.h"
#include "frank/engine/speculative.h"

namespace frank::test {

// Greedy tokens after `prompt` up to `total`, one-token steps chosen on the GPU.
inline std::vector<int32_t> plain_greedy(cuda::CudaModel& gpu, const std::vector<int32_t>& prompt, size_t total) {
  cuda::DeviceSession s = gpu.new_session();
  std::vector<int32_t> tokens = prompt;
  tokens.push_back(gpu.forward_greedy(s, prompt));
  while (tokens.size() < total) tokens.push_back(gpu.forward_greedy(s, std::span<const int32_t>(&tokens.back(), 1)));
  return tokens;
}

// Speculative greedy decoding of `tokens` (the prompt, on entry) up to `total` tokens on a fresh
// target (V4 or V4.1); the streams are downloaded only for a drafter that reads them on the host.
inline engine::SpeculativeStats speculative_greedy(engine::VerifyTarget& target, engine::Drafter& drafter, int k,
                                                   std::vector<int32_t>& tokens, size_t total) {
  engine::SpeculativeDecoder decoder(target, drafter, k, engine::SamplingParams{});
  Tensor streams;
  const Tensor prefill =
      target.forward(tokens, engine::Model::Logits::Last, drafter.reads_host_streams() ? &streams : nullptr);
  decoder.start(std::span<const float>(prefill.row(0), static_cast<size_t>(prefill.cols())), streams, 0);
  while (tokens.size() < total) decoder.step(tokens, decoder.draft_tokens());
  tokens.resize(total);
  return decoder.stats();
}

}  // namespace frank::test
