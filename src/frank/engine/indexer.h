#pragma once
// The lightning indexer of CSA layers (dsv4-model.md §5.3): scores every compressed entry for a
// query and keeps the top k.
#include <cstdint>
#include <vector>

namespace frank::engine {

// score(w) = sum_h weight[h] * ReLU(q[h] · key[w]) * head_dim^-0.5, in fp32 terms as transformers
// orders them; q is [heads, head_dim], keys [n_keys, head_dim], weight [heads] (already scaled by
// heads^-0.5).
std::vector<float> indexer_scores(const float* q, const float* weight, int heads, int head_dim, const float* keys,
                                  int64_t n_keys);

// Indices of the k highest scores, best first. The tie rule (ours; transformers leaves ties to
// torch.topk): equal scores are ordered by lower index first, so the lowest indices win a tie at
// the k-th place. -0.0 and +0.0 are equal. -inf and NaN entries are never selected (an entry the
// query may not see is -inf). k is clamped to the number of selectable entries.
std::vector<int64_t> top_k_indices(const std::vector<float>& scores, int64_t k);

// True when the k-th and (k+1)-th best scores are equal: the choice at the k-th place then rests on
// the tie rule alone (fixtures flag such positions because transformers may break them otherwise).
bool tie_at_kth(const std::vector<float>& scores, int64_t k);

}  // namespace frank::engine
