// A session's state moved between the GPU and the host (cuda/session_transfer.h) at every position
// of every golden fixture — inside open compressor windows, right after window closes, across
// window-ring wraps:
//   - GPU -> host -> GPU: continuing gives the same logits, bit for bit, as continuing the session
//     that never left (the copies are exact);
//   - a session the CPU reference computed, uploaded, continues on the GPU within the fp32
//     tolerance of test_cuda_forward.cpp (1e-3 * max(1, |logit|)) of the CPU continuing it;
//   - a session of another model is refused and the model keeps working.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cstring>
#include <span>

#include "cuda/cuda_forward_util.h"
#include "frank/core/error.h"
#include "frank/cuda/session_transfer.h"
#include "golden/fixture.h"

namespace frank::test {
namespace {

using Logits = engine::Model::Logits;

std::span<const int32_t> slice(const std::vector<int32_t>& ids, size_t from, size_t to) {
  return std::span<const int32_t>(ids).subspan(from, to - from);
}

TEST(CudaSessionTransfer, RoundTripContinuesBitForBitAtEveryPosition) {
  REQUIRE_GPU();
  for (const auto& dir : fixture_dirs()) {
    const Fixture f = load_fixture(dir);
    const auto model = load(dir);
    cuda::CudaModel gpu(*model, cuda::WeightType::F32);
    const size_t n = f.ids.size();
    for (size_t p = 1; p < n; ++p) {
      cuda::DeviceSession stayed = gpu.new_session();
      gpu.forward(stayed, slice(f.ids, 0, p), Logits::Last);
      cuda::DeviceSession moved = cuda::upload_session(gpu, cuda::download_session(gpu, stayed));
      const Tensor want = gpu.forward(stayed, slice(f.ids, p, n), Logits::All);
      const Tensor got = gpu.forward(moved, slice(f.ids, p, n), Logits::All);
      ASSERT_EQ(got.shape, want.shape);
      ASSERT_EQ(0, std::memcmp(got.data.data(), want.data.data(), want.data.size() * sizeof(float)))
          << f.name() << ": the session taken to the host and back at position " << p << " continues differently";
    }
    std::cout << fmt::format("[ transfer ] {}: GPU -> host -> GPU at positions 1..{}: bit-identical\n", f.name(),
                             n - 1);
  }
}

TEST(CudaSessionTransfer, CpuSessionsContinueOnTheGpu) {
  REQUIRE_GPU();
  for (const auto& dir : fixture_dirs()) {
    const Fixture f = load_fixture(dir);
    const auto model = load(dir);
    cuda::CudaModel gpu(*model, cuda::WeightType::F32);
    const size_t n = f.ids.size();
    double worst = 0;
    for (size_t p = 1; p < n; ++p) {
      engine::Session cpu = model->new_session();
      model->forward(cpu, slice(f.ids, 0, p), Logits::Last);
      cuda::DeviceSession uploaded = cuda::upload_session(gpu, cpu);
      const Tensor want = model->forward(cpu, slice(f.ids, p, n), Logits::All);
      const Worst w = compare(gpu.forward(uploaded, slice(f.ids, p, n), Logits::All), want);
      EXPECT_LE(w.err, 1e-3) << f.name() << ": resumed at " << p << ", position " << p + w.row << " logit " << w.col;
      worst = std::max(worst, w.err);
    }
    std::cout << fmt::format("[ upload ] {}: CPU sessions at positions 1..{} continued on the GPU: max scaled "
                             "|cuda - cpu| = {:.3g}\n",
                             f.name(), n - 1, worst);
  }
}

TEST(CudaSessionTransfer, ASessionOfAnotherModelIsRefused) {
  REQUIRE_GPU();
  const auto dirs = fixture_dirs();
  ASSERT_GE(dirs.size(), 2u);
  const auto model = load(dirs.front());
  const auto other = load(dirs.back());
  ASSERT_NE(model->config().num_layers * 1000 + model->config().sliding_window,
            other->config().num_layers * 1000 + other->config().sliding_window)
      << "the test needs two fixtures with different layer counts or windows";
  cuda::CudaModel gpu(*model, cuda::WeightType::F32);
  engine::Session foreign = other->new_session();
  const Fixture f = load_fixture(dirs.back());
  other->forward(foreign, slice(f.ids, 0, 9), Logits::Last);
  EXPECT_THROW(cuda::upload_session(gpu, foreign), Error);
  // A session whose compressor state disagrees with its position is refused too.
  engine::Session own = model->new_session();
  const Fixture g = load_fixture(dirs.front());
  model->forward(own, slice(g.ids, 0, 9), Logits::Last);
  own.position += 1;
  EXPECT_THROW(cuda::upload_session(gpu, own), Error);
  own.position -= 1;
  cuda::DeviceSession fine = cuda::upload_session(gpu, own);
  const Worst w = compare(gpu.forward(fine, slice(g.ids, 9, 12), Logits::All),
                          model->forward(own, slice(g.ids, 9, 12), Logits::All));
  EXPECT_LE(w.err, 1e-3);
}

}  // namespace
}  // namespace frank::test
