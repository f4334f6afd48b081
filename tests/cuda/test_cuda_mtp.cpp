// The MTP block on the GPU (cuda/cuda_mtp.h, cuda/cuda_mtp_drafter.h) on the MTP fixture
// (tests/fixtures/dsv4-mtp, whose CPU block matches transformers' parts in test_mtp_golden.cpp):
//   - the GPU block's logits and output streams equal the CPU MtpBlock's, every slot in one call,
//     one slot per call and in chunks of 5 (the fixture's window of 8 wraps);
//   - greedy speculative decoding with the GPU drafter emits exactly plain greedy's tokens, k = 1..4,
//     and its drafts are the CPU drafter's (both fed the same verify steps).
// Tolerance: 1e-3 * max(1, |value|), the fp32 tolerance of test_cuda_forward.cpp (the kernels sum
// in fp32 where the CPU reference sums in double; a wrong stream, norm or window row moves values
// by far more). Drafts may differ only where two logits are within that tolerance of each other, so
// at least 90% must agree. Skipped without a GPU.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cuda/cuda_forward_util.h"
#include "cuda/cuda_speculative_util.h"
#include "frank/core/error.h"
#include "frank/cuda/cuda_mtp.h"
#include "frank/cuda/cuda_mtp_drafter.h"
#include "frank/engine/mtp_drafter.h"

namespace frank::test {
namespace {

const std::filesystem::path kMtpDir = std::filesystem::path(FRANK_FIXTURE_DIR) / "dsv4-mtp" / "tiny-v4-mtp";

std::vector<int32_t> fixture_ids() {
  return nlohmann::json::parse(std::ifstream(kMtpDir / "golden.json")).at("ids").get<std::vector<int32_t>>();
}

Tensor rows(const Tensor& t, int64_t first, int64_t n) {
  return Tensor({n, t.cols()}, std::vector<float>(t.row(first), t.row(first) + n * t.cols()));
}

void append(Tensor& all, const Tensor& part) {
  all.data.insert(all.data.end(), part.data.begin(), part.data.end());
  all.shape = {all.rows() + part.rows(), part.cols()};
}

Tensor download(const cuda::DeviceArray<float>& a) {
  Tensor t(a.shape());
  a.copy_to_host(t.data.data());
  cuda::check(cudaStreamSynchronize(a.stream()), "download");
  return t;
}

TEST(CudaMtp, BlockMatchesTheCpuBlock) {
  REQUIRE_GPU();
  const auto model = load(kMtpDir);
  cuda::CudaModel gpu(*model, cuda::WeightType::F32);
  const std::vector<int32_t> ids = fixture_ids();
  const int64_t n = std::ssize(ids) - 1;  // slot t reads token t+1
  engine::Session session = model->new_session();
  Tensor main_streams;
  model->forward(session, ids, engine::Model::Logits::All, &main_streams);
  const std::span<const int32_t> next(ids.data() + 1, static_cast<size_t>(n));

  const cuda::CudaMtpBlock block(gpu);
  const engine::MtpBlock& cpu = block.host();  // the same weights, run on the CPU reference
  engine::MtpState cpu_state = cpu.new_state();
  const engine::MtpBlock::Output want = cpu.forward(cpu_state, rows(main_streams, 0, n), next);

  for (const int64_t chunk : {n, int64_t{1}, int64_t{5}}) {
    cuda::CudaMtpState state = block.new_state();
    Tensor logits({0, want.logits.cols()}), streams({0, want.streams.cols()});
    for (int64_t t = 0; t < n; t += chunk) {
      const int64_t m = std::min(chunk, n - t);
      const Tensor h = rows(main_streams, t, m);
      cuda::DeviceArray<float> x({m, h.cols()}, gpu.stream());
      x.copy_from_host(h.data.data());
      const std::span<const int32_t> tokens = next.subspan(static_cast<size_t>(t), static_cast<size_t>(m));
      cuda::CudaOps::Ids device_ids{{tokens.begin(), tokens.end()}, cuda::DeviceArray<int32_t>({m}, gpu.stream()), {}};
      device_ids.device.copy_from_host(device_ids.host.data());
      append(logits, download(block.forward(state, x, device_ids)));
      append(streams, download(x));
    }
    EXPECT_EQ(state.position, n);
    const Worst wl = compare(logits, want.logits), ws = compare(streams, want.streams);
    EXPECT_LE(wl.err, 1e-3) << "chunks of " << chunk << ": logits of slot " << wl.row << ", token " << wl.col;
    EXPECT_LE(ws.err, 1e-3) << "chunks of " << chunk << ": streams of slot " << ws.row << ", value " << ws.col;
    std::cout << fmt::format("[ mtp on cuda ] {} slots in chunks of {}: max scaled |GPU - CPU| logits {:.3g}, "
                             "streams {:.3g}\n",
                             n, chunk, wl.err, ws.err);
  }
}

// The GPU drafter proposes; the CPU drafter, fed the same main streams (downloaded), proposes too,
// and the agreement is counted.
class ComparingDrafter : public engine::Drafter {
 public:
  ComparingDrafter(engine::Drafter& gpu, engine::Drafter& cpu) : gpu_(gpu), cpu_(cpu) {}
  bool reads_host_streams() const override { return true; }
  void observe(const Tensor& streams, int64_t first, int64_t rows) override {
    gpu_.observe(Tensor(), first, rows);
    cpu_.observe(streams, first, rows);
  }
  std::vector<engine::Draft> propose(std::span<const int32_t> tokens, int k) override {
    std::vector<engine::Draft> gpu = gpu_.propose(tokens, k), cpu = cpu_.propose(tokens, k);
    EXPECT_EQ(gpu.size(), cpu.size());
    for (size_t i = 0; i < std::min(gpu.size(), cpu.size()); ++i) agree += gpu[i].token == cpu[i].token ? 1 : 0;
    drafted += static_cast<int64_t>(gpu.size());
    return gpu;
  }
  int64_t agree = 0, drafted = 0;

 private:
  engine::Drafter& gpu_;
  engine::Drafter& cpu_;
};

TEST(CudaMtp, DraftedGreedyEqualsPlainGreedy) {
  REQUIRE_GPU();
  const auto model = load(kMtpDir);
  cuda::CudaModel gpu(*model, cuda::WeightType::F32);
  const std::vector<int32_t> ids = fixture_ids();
  const std::vector<int32_t> prompt(ids.begin(), ids.begin() + 10);
  const size_t total = prompt.size() + 40;  // past several wraps of the window of 8
  const std::vector<int32_t> plain = plain_greedy(gpu, prompt, total);
  for (int k = 1; k <= 4; ++k) {
    {  // the GPU drafter alone: nothing downloaded but the drafts
      cuda::CudaVerifyTarget target(gpu);
      cuda::CudaMtpDrafter drafter(gpu, target.device_streams());
      std::vector<int32_t> tokens = prompt;
      const auto st = speculative_greedy(target, drafter, k, tokens, total);
      ASSERT_EQ(tokens, plain) << "k = " << k;
      EXPECT_EQ(st.drafted, st.verify_steps * k);
      std::cout << fmt::format("[ mtp drafts on cuda ] k = {}: {} verify steps, {} of {} drafts accepted\n", k,
                               st.verify_steps, st.accepted, st.drafted);
    }
    cuda::CudaVerifyTarget target(gpu);
    cuda::CudaMtpDrafter on_gpu(gpu, target.device_streams());
    engine::MtpDrafter on_cpu(*model);
    ComparingDrafter both(on_gpu, on_cpu);
    std::vector<int32_t> tokens = prompt;
    speculative_greedy(target, both, k, tokens, total);
    ASSERT_EQ(tokens, plain) << "k = " << k << " (drafts compared)";
    EXPECT_GE(both.agree * 10, both.drafted * 9) << "k = " << k;
    std::cout << fmt::format("[ mtp drafts on cuda ] k = {}: {} of {} drafts equal the CPU drafter's\n", k, both.agree,
                             both.drafted);
  }
}

TEST(CudaMtp, RefusesACheckpointWithoutTheBlock) {
  REQUIRE_GPU();
  const auto model = load(std::filesystem::path(FRANK_FIXTURE_DIR) / "dsv4" / "tiny-v4");
  cuda::CudaModel gpu(*model, cuda::WeightType::F32);
  EXPECT_THROW(cuda::CudaMtpBlock block(gpu), Error);
}

}  // namespace
}  // namespace frank::test
