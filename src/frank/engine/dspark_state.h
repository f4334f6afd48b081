#pragma once
// DSparkState: what V4.1's DSpark drafter keeps between drafts (dsv41-model.md §8): per stage, a
// ring of the last sliding_window context K=V rows (rope_main(kv_norm_s(wkv_s main_x_t)), FP8-rounded),
// row t % window, written for every target position t the drafter has observed. Nothing else: the
// draft block itself is recomputed at each anchor. Copyable, so a caller can keep it for a rollback.
#include <cstdint>
#include <vector>

namespace frank::engine {

struct DSparkState {
  int64_t position = 0;  // context rows written = the position of the next target token
  std::vector<std::vector<float>> rings;  // per stage: [sliding_window * head_dim]
};

}  // namespace frank::engine
