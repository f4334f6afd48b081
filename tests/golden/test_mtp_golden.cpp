// The MTP block against its transformers-built fixture (tools/reference/make_mtp_fixture.py:
// a V4 decoder layer with sliding attention and a scored MoE, e/h projections, norms and a
// hyper-head, assembled from transformers 5.17.0's own classes, since transformers has no MTP).
// Tolerance as for the main model's golden tests: 1e-4 * max(1, |reference|).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "frank/core/error.h"
#include "frank/engine/model.h"
#include "frank/engine/mtp.h"
#include "frank/model/loader.h"

namespace frank::engine {
namespace {

const std::filesystem::path kDir = std::filesystem::path(FRANK_FIXTURE_DIR) / "dsv4-mtp" / "tiny-v4-mtp";

std::vector<float> read_f32(const std::string& name) {
  std::ifstream in(kDir / name, std::ios::binary | std::ios::ate);
  std::vector<float> v(static_cast<size_t>(in.tellg()) / sizeof(float));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
  return v;
}

void expect_close(std::span<const float> got, std::span<const float> want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double scaled = std::abs(double{got[i]} - want[i]) / std::max(1.0, std::abs(double{want[i]}));
    worst = std::max(worst, scaled);
    ASSERT_LE(scaled, 1e-4) << what << ": element " << i << " is " << got[i] << ", transformers " << want[i];
  }
  std::cout << fmt::format("[mtp] {}: max scaled diff {:.3g}\n", what, worst);
}

struct MtpFixture {
  nlohmann::json meta = nlohmann::json::parse(std::ifstream(kDir / "golden.json"));
  std::vector<int32_t> ids = meta.at("ids").get<std::vector<int32_t>>();
  std::vector<float> main_streams = read_f32("main_streams.f32"), logits = read_f32("mtp_logits.f32"),
                     streams = read_f32("mtp_streams.f32");
  model::LoadedModel loaded = model::load_model(kDir);
  Model model{std::move(loaded.config), std::move(loaded.weights)};
  int64_t width = int64_t{model.config().hc_mult} * model.config().hidden_size;

  Tensor main_rows(int64_t first, int64_t n) const {
    return Tensor({n, width}, std::vector<float>(main_streams.begin() + first * width,
                                                 main_streams.begin() + (first + n) * width));
  }
};

TEST(MtpGolden, MainStreamsAndEverySlotMatchTransformers) {
  MtpFixture f;
  ASSERT_TRUE(f.model.weights().mtp.has_value());
  const int64_t n = static_cast<int64_t>(f.ids.size()), vocab = f.model.config().vocab_size;

  // The main model's streams before its hyper-head, which the MTP block reads.
  Session s = f.model.new_session();
  Tensor main_streams;
  f.model.forward(s, f.ids, Model::Logits::All, &main_streams);
  expect_close(main_streams.data, f.main_streams, "main streams");

  const MtpBlock mtp(f.model.config(), f.model.weights(), f.model.main_rope(), f.model.compress_rope());
  const std::span<const int32_t> next(f.ids.data() + 1, static_cast<size_t>(n - 1));
  // All slots in one call, then one slot at a time and in uneven chunks (the window of 8 wraps).
  MtpState all = mtp.new_state();
  const auto out = mtp.forward(all, f.main_rows(0, n - 1), next);
  expect_close(out.logits.data, f.logits, "logits, one call");
  expect_close(out.streams.data, f.streams, "streams, one call");
  for (const int64_t chunk : {int64_t{1}, int64_t{5}}) {
    MtpState state = mtp.new_state();
    std::vector<float> logits;
    for (int64_t t = 0; t < n - 1; t += chunk) {
      const int64_t m = std::min(chunk, n - 1 - t);
      const auto part = mtp.forward(state, f.main_rows(t, m), next.subspan(static_cast<size_t>(t), static_cast<size_t>(m)));
      logits.insert(logits.end(), part.logits.data.begin(), part.logits.data.end());
    }
    expect_close(logits, f.logits, fmt::format("logits, chunks of {}", chunk));
  }
  EXPECT_EQ(out.logits.cols(), vocab);
}

TEST(Mtp, CheckpointWithoutTheBlockHasNone) {
  auto loaded = model::load_model(std::filesystem::path(FRANK_FIXTURE_DIR) / "dsv4" / "tiny-v4");
  EXPECT_FALSE(loaded.weights.mtp.has_value());
  const Model model(std::move(loaded.config), std::move(loaded.weights));
  EXPECT_THROW(MtpBlock(model.config(), model.weights(), model.main_rope(), model.compress_rope()), frank::Error);
}

}  // namespace
}  // namespace frank::engine
