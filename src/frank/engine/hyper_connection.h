#pragma once
// Manifold-constrained hyper-connections (mHC, dsv4-model.md §3): the residual is N parallel
// streams; each sublayer reads a weighted collapse of them and writes back through `post` and a
// doubly-stochastic stream mixer `comb` (Sinkhorn-projected).
#include <vector>

#include "frank/model/config.h"
#include "frank/model/weights.h"

namespace frank::engine {

struct HyperConnectionMix {
  std::vector<float> pre;   // [N]   collapse weights, sigmoid + hc_eps (not normalised)
  std::vector<float> post;  // [N]   2*sigmoid: how much of the sublayer output each stream gets
  std::vector<float> comb;  // [N*N] comb[j*N + k]: share of source stream j in target stream k
};

// The mapping of one site for one token; `streams` is [N, D] (stream-major, as flattened).
HyperConnectionMix hc_mapping(const model::CommonConfig& c, const model::HyperConnectionWeights& w,
                              const float* streams);

// Sinkhorn projection of comb logits [N*N] (row j = source stream): row softmax + eps, column
// normalise, then (iters - 1) x (row, column) normalisations, eps inside every denominator.
void sinkhorn(float* comb, int n, int iters, float eps);

// out[d] = sum_j weights[j] * streams[j*D + d]
void collapse_streams(const float* streams, const std::vector<float>& weights, int dim, float* out);

// streams[k] <- post[k] * sublayer + sum_j comb[j][k] * streams[j]   (in place, for one token)
void hc_expand(const HyperConnectionMix& mix, const float* sublayer, int dim, float* streams);

// Final hyper-head: collapse with sigmoid(hc_fn · RMS(x) * scale + base) + eps weights, no Sinkhorn.
void hyper_head(const model::CommonConfig& c, const model::HyperConnectionWeights& w, const float* streams, float* out);

}  // namespace frank::engine
