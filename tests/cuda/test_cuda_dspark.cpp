// V4.1's DSpark drafter on the GPU (cuda::CudaDSpark, cuda::CudaDSparkDrafter) against the DSpark
// fixture (tools/reference/make_dspark_fixture.py, read as tests/golden/test_dspark_golden.cpp reads
// it) and against the CPU reference (engine::DSpark) on the same features, fp32 weights; the
// drafter's observe / rewind_to / propose through a fake DeviceFeatureSource that uploads the
// fixture's features (the CUDA verify target is not needed). Skipped without a CUDA device.
//
// Tolerances. Logits: |gpu - want| <= 1e-3 * max(1, |want|), the V4.1 CUDA fp32 bound
// (test_cuda_v41.cpp: accumulation order only; the FP8 rounding of the rings' K=V rows is bit-exact
// on both backends unless a value lands within an fp32 ulp of a boundary). Drafts: identical; the
// fixture's smallest relative top-1 lead is 2.2e-3, more than twice the bound (against the CPU,
// a pair that parts is allowed only at a near-tie of the CPU's logits, and reported). Confidence:
// sigmoid's slope is at most 1/4, so 2.5e-4 absolute for an error of 1e-3 in its logit.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <span>
#include <vector>

#include "cuda/cuda_forward_util.h"
#include "frank/core/error.h"
#include "frank/cuda/cuda_dspark.h"
#include "frank/cuda/cuda_dspark_drafter.h"
#include "frank/cuda/cuda_v41_model.h"
#include "frank/engine/dspark.h"
#include "frank/engine/v41_model.h"
#include "golden/dspark_fixture.h"

namespace frank::test {
namespace {

constexpr double kLogitTolerance = 1e-3;
constexpr double kConfidenceTolerance = 2.5e-4;

// Rows [first, first + n) of the features `all` [*, width] in device memory, on `stream`.
cuda::DeviceArray<float> upload_rows(const std::vector<float>& all, int64_t width, int64_t first, int64_t n,
                                     cudaStream_t stream) {
  cuda::DeviceArray<float> out({n, width}, stream);
  out.copy_from_host(all.data() + first * width);
  return out;
}

std::vector<float> download(const cuda::DeviceArray<float>& a) {
  std::vector<float> out(static_cast<size_t>(a.numel()));
  a.copy_to_host(out.data());
  cuda::check(cudaStreamSynchronize(a.stream()), "download");
  return out;
}

double max_abs_diff(std::span<const float> got, std::span<const float> want) {
  EXPECT_EQ(got.size(), want.size());
  double worst = 0.0;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i)
    worst = std::max(worst, std::abs(double{got[i]} - want[i]));
  return worst;
}

// One anchor's draft as the tests compare it: logits [B * vocab], drafts, confidences.
struct Draft {
  std::vector<float> logits;
  std::vector<int32_t> tokens;
  std::vector<float> confidence;
};

// The drafter at every anchor p of the fixture: the context rings filled with positions 0..p (fed
// in pieces up to each anchor), the block [ids[p+1], noise ...], its chained drafts; on the GPU and
// on the CPU reference, from the same features.
struct Drafts {
  std::vector<Draft> gpu, cpu;
};

Drafts drafts_at_anchors(const engine::V41Model& model, const std::vector<float>& features) {
  const DSparkGolden g = dspark_golden_data();
  cuda::CudaV41Model device(model, cuda::WeightType::F32);
  const cuda::CudaDSpark gpu(device);
  const engine::DSpark cpu(model);
  cuda::DeviceDSparkState gpu_state = gpu.new_state();
  engine::DSparkState cpu_state = cpu.new_state();
  Drafts out;
  for (int p : g.anchors) {
    const int64_t first = cpu_state.position, n = p + 1 - first;
    gpu.observe(gpu_state, upload_rows(features, g.width, first, n, device.stream()));
    cpu.observe(cpu_state, Tensor({n, g.width}, std::vector<float>(features.begin() + first * g.width,
                                                                   features.begin() + (first + n) * g.width)));
    EXPECT_EQ(gpu_state.position, cpu_state.position);
    cuda::CudaDSparkDraft d = gpu.draft(gpu_state, g.ids[p + 1]);
    out.gpu.push_back({download(d.logits), d.tokens, d.confidence});
    engine::DSparkDraft c = cpu.draft(cpu_state, g.ids[p + 1]);
    out.cpu.push_back({c.logits.data, c.tokens, c.confidence});
  }
  return out;
}

std::vector<float> reference_features() {
  const DSparkGolden g = dspark_golden_data();
  return read_dspark_file<float>("features.f32", g.ids.size() * g.width);
}

// The GPU drafts from the fixture's own features against the fixture's.
TEST(CudaDSpark, DraftsFromReferenceFeaturesMatchTheFixture) {
  REQUIRE_GPU();
  const DSparkGolden g = dspark_golden_data();
  const engine::V41Model model(load_dspark_fixture_model());
  const Drafts d = drafts_at_anchors(model, reference_features());
  const size_t A = g.anchors.size();
  const int B = model.config().dspark->block_size;
  const auto want_logits = read_dspark_file<float>("draft_logits.f32", A * B * g.vocab);
  const auto want_drafts = read_dspark_file<int32_t>("drafts.i32", A * B);
  const auto want_conf = read_dspark_file<float>("confidence.f32", A * B);
  double logit_diff = 0.0, conf_diff = 0.0;
  for (size_t a = 0; a < A; ++a) {
    logit_diff = std::max(logit_diff, max_scaled_diff(d.gpu[a].logits, std::span(want_logits).subspan(a * B * g.vocab,
                                                                                                     B * g.vocab)));
    conf_diff = std::max(conf_diff, max_abs_diff(d.gpu[a].confidence, std::span(want_conf).subspan(a * B, B)));
    EXPECT_EQ(d.gpu[a].tokens, std::vector<int32_t>(want_drafts.begin() + a * B, want_drafts.begin() + (a + 1) * B))
        << "anchor " << g.anchors[a];
  }
  std::cout << fmt::format("[cuda dspark] fixture: {} anchors, logits max scaled diff {:.3g}, confidence max diff {:.3g}\n",
                           A, logit_diff, conf_diff);
  EXPECT_LE(logit_diff, kLogitTolerance);
  EXPECT_LE(conf_diff, kConfidenceTolerance);
}

// The GPU drafter against the CPU reference on the same features: frank's own target features
// (the CPU target's, one token at a time), so not only the fixture's.
TEST(CudaDSpark, DraftsMatchTheCpuReferenceOnTheSameFeatures) {
  REQUIRE_GPU();
  const DSparkGolden g = dspark_golden_data();
  const engine::V41Model model(load_dspark_fixture_model());
  engine::V41Session session = model.new_session();
  std::vector<float> features;
  for (int32_t id : g.ids) {
    Tensor part;
    model.forward(session, std::span(&id, 1), engine::Model::Logits::All, &part);
    features.insert(features.end(), part.data.begin(), part.data.end());
  }
  const Drafts d = drafts_at_anchors(model, features);
  double logit_diff = 0.0, conf_diff = 0.0;
  for (size_t a = 0; a < d.cpu.size(); ++a) {
    // A draft may part from the CPU's only where the CPU's logits of that row are a near-tie; the
    // rows after it chain from different tokens and are not compared.
    size_t rows = d.cpu[a].tokens.size();
    for (size_t j = 0; j < rows; ++j) {
      const auto row = std::span<const float>(d.cpu[a].logits).subspan(j * g.vocab, g.vocab);
      if (tokens_part(row, d.cpu[a].tokens[j], d.gpu[a].tokens[j], fmt::format("anchor {} draft {}", g.anchors[a], j)))
        rows = j + 1;
    }
    const size_t values = rows * g.vocab;
    logit_diff = std::max(logit_diff, max_scaled_diff(std::span(d.gpu[a].logits).first(values),
                                                      std::span(d.cpu[a].logits).first(values)));
    conf_diff = std::max(conf_diff, max_abs_diff(std::span(d.gpu[a].confidence).first(rows),
                                                 std::span(d.cpu[a].confidence).first(rows)));
  }
  std::cout << fmt::format("[cuda dspark] vs cpu: logits max scaled diff {:.3g}, confidence max diff {:.3g}\n",
                           logit_diff, conf_diff);
  EXPECT_LE(logit_diff, kLogitTolerance);
  EXPECT_LE(conf_diff, kConfidenceTolerance);
}

// A target's last call in device memory: the fixture's features of the call's positions.
class FakeFeatureSource : public cuda::DeviceFeatureSource {
 public:
  FakeFeatureSource(const std::vector<float>& all, int64_t width, cudaStream_t stream)
      : all_(all), width_(width), stream_(stream) {}
  // A call of positions [start, start + n).
  void call(int64_t start, int64_t n) {
    features_ = upload_rows(all_, width_, start, n, stream_);
    start_ = start;
  }
  const cuda::DeviceArray<float>& device_features() const override { return features_; }
  int64_t last_features_start() const override { return start_; }

 private:
  const std::vector<float>& all_;
  int64_t width_;
  cudaStream_t stream_;
  cuda::DeviceArray<float> features_;
  int64_t start_ = 0;
};

// CudaDSparkDrafter over calls that run past each anchor, as verify steps do: at even anchors the
// drafter observes only the kept rows; at odd ones it observes the whole call and is then rewound
// to the anchor (rewind_to: the rings restored, the kept rows written again). Either way its
// proposal at the anchor must be the fixture's drafts, and its context must end at the anchor. The
// ring holds 16 rows and the fixture runs to position 55, so rows a rewind failed to undo would
// overwrite rows the next blocks attend.
TEST(CudaDSparkDrafter, ObserveAndRewindGiveTheFixtureDrafts) {
  REQUIRE_GPU();
  const DSparkGolden g = dspark_golden_data();
  const engine::V41Model model(load_dspark_fixture_model());
  const int B = model.config().dspark->block_size;
  const auto want_drafts = read_dspark_file<int32_t>("drafts.i32", g.anchors.size() * B);
  const std::vector<float> features = reference_features();
  cuda::CudaV41Model device(model, cuda::WeightType::F32);
  FakeFeatureSource target(features, g.width, device.stream());
  cuda::CudaDSparkDrafter drafter(device, target);
  EXPECT_FALSE(drafter.reads_host_streams());
  const int64_t total = std::ssize(g.ids);
  for (size_t a = 0; a < g.anchors.size(); ++a) {
    const int p = g.anchors[a];
    const int64_t first = drafter.state().position, kept = p + 1 - first;
    const int64_t n = std::min<int64_t>(kept + 3, total - first);  // the call runs past the anchor
    target.call(first, n);
    EXPECT_THROW(drafter.observe(Tensor(), first + 1, 1), Error) << "rows that do not start at its context";
    if (a % 2 == 0) {
      drafter.observe(Tensor(), first, kept);
    } else {
      drafter.observe(Tensor(), first, n);
      EXPECT_EQ(drafter.state().position, first + n);
      drafter.rewind_to(p + 1);
    }
    ASSERT_EQ(drafter.state().position, p + 1) << "anchor " << p;
    const std::vector<int32_t> tokens(g.ids.begin(), g.ids.begin() + p + 2);  // the verify step feeds ids[p+1]
    std::vector<int32_t> got;
    for (const auto& d : drafter.propose(tokens, B)) got.push_back(d.token);
    EXPECT_EQ(got, std::vector<int32_t>(want_drafts.begin() + a * B, want_drafts.begin() + (a + 1) * B))
        << "anchor " << p << (a % 2 ? " (after a rewind)" : "");
    const std::vector<int32_t> short_tokens(tokens.begin(), tokens.end() - 1);
    EXPECT_THROW(drafter.propose(short_tokens, B), Error) << "a proposal away from its context";
  }
}

}  // namespace
}  // namespace frank::test
