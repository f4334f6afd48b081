// Routing replay (engine/routing_replay.h): a trace of another shape is refused; calls take the
// trace's tokens in order, cycled; the forced experts are exactly what the engine's MoE routes to in
// every layer; their weights follow the router's scores as a hash layer's chosen experts' do; and
// replaying the router's own choices reproduces the unforced model bit for bit.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <random>

#include "frank/core/error.h"
#include "frank/engine/model.h"
#include "frank/engine/moe.h"
#include "frank/engine/routing_replay.h"
#include "frank/model/synthetic.h"

namespace frank::engine {
namespace {

using experts::RoutingStep;
using experts::RoutingTrace;
using experts::StepKind;
using ::testing::HasSubstr;

std::unique_ptr<Model> tiny() {
  auto m = model::synthetic_model("tiny", 3);
  return std::make_unique<Model>(std::move(m.config), std::move(m.weights));
}

RoutingTrace empty_trace(const model::ModelConfig& c) {
  RoutingTrace t;
  t.source = "test.trace";
  t.header = {"deepseek_v4/test", static_cast<uint32_t>(c.num_layers), static_cast<uint32_t>(c.n_routed_experts),
              static_cast<uint32_t>(c.experts_per_token), 0};
  return t;
}

// Token i of the trace routes, in layer l, to experts (3i + l) mod E and (3i + l + 5) mod E
// (distinct for E = 8, top-2): an arbitrary pattern no router of random weights would produce.
int32_t pattern(int64_t token, int layer, int j, int E) { return static_cast<int32_t>((3 * token + layer + 5 * j) % E); }

// A trace of steps of the given token counts following `pattern`, tokens numbered across steps;
// steps of `kinds[i]` (decode where not given).
RoutingTrace pattern_trace(const model::ModelConfig& c, const std::vector<int>& step_tokens,
                           const std::vector<StepKind>& kinds = {}) {
  RoutingTrace t = empty_trace(c);
  int64_t token = 0;
  for (size_t s = 0; s < step_tokens.size(); ++s) {
    const int n = step_tokens[s];
    RoutingStep step{s < kinds.size() ? kinds[s] : StepKind::Decode,
                     std::vector<std::vector<uint16_t>>(static_cast<size_t>(c.num_layers))};
    for (int i = 0; i < n; ++i, ++token)
      for (int l = 0; l < c.num_layers; ++l)
        for (int j = 0; j < c.experts_per_token; ++j)
          step.layers[l].push_back(static_cast<uint16_t>(pattern(token, l, j, c.n_routed_experts)));
    t.steps.push_back(step);
  }
  return t;
}

void expect_refused(const RoutingTrace& trace, const model::ModelConfig& c, const std::string& what) {
  try {
    RoutingReplay replay(trace, c);
    FAIL() << "expected the trace to be refused: " << what;
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("routing trace 'test.trace' cannot drive this model's routing"));
    EXPECT_THAT(e.what(), HasSubstr(what));
  }
}

TEST(RoutingReplay, RefusesATraceOfAnotherShape) {
  const model::ModelConfig c = model::synthetic_config("tiny");  // 6 layers of 8 experts, top-2
  RoutingTrace layers = pattern_trace(c, {1});
  layers.header.n_layers = 5;
  expect_refused(layers, c, "it has 5 layers of 8 experts, top-2; the model has 6 layers of 8 experts, top-2");
  RoutingTrace experts = pattern_trace(c, {1});
  experts.header.n_experts = 16;
  expect_refused(experts, c, "it has 6 layers of 16 experts, top-2");
  RoutingTrace top_k = pattern_trace(c, {1});
  top_k.header.top_k = 3;
  expect_refused(top_k, c, "it has 6 layers of 8 experts, top-3");
}

TEST(RoutingReplay, RefusesATraceWithoutTokensOrWithRaggedSteps) {
  const model::ModelConfig c = model::synthetic_config("tiny");
  expect_refused(empty_trace(c), c, "it routes no tokens");
  expect_refused(pattern_trace(c, {0, 0}), c, "it routes no tokens");
  try {
    RoutingReplay replay(pattern_trace(c, {3}, {StepKind::Prefill}), c, ReplayedSteps::Generation);
    FAIL() << "a trace of prefill steps only has no generation tokens to replay";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("it routes no tokens in decode or verify steps"));
  }
  RoutingTrace ragged = pattern_trace(c, {1, 2});
  ragged.steps[1].layers[4].resize(2);  // one token where the other layers have two
  expect_refused(ragged, c, "step 1: layer 4 routes 1 tokens, layer 0 2");
}

TEST(RoutingReplay, GenerationStepsOnlySkipsPrefillChunks) {
  const model::ModelConfig c = model::synthetic_config("tiny");
  // Trace tokens 0-2 prefill, 3 decode, 4-5 verify, 6-7 prefill, 8 decode: 3, 4, 5, 8 are replayed.
  RoutingReplay replay(pattern_trace(c, {3, 1, 2, 2, 1},
                                     {StepKind::Prefill, StepKind::Decode, StepKind::Verify, StepKind::Prefill,
                                      StepKind::Decode}),
                       c, ReplayedSteps::Generation);
  EXPECT_EQ(replay.trace_tokens(), 4);
  const ForcedRouting f = replay.take(5);
  const std::vector<int64_t> want = {3, 4, 5, 8, 3};
  for (int l = 0; l < c.num_layers; ++l)
    for (size_t t = 0; t < want.size(); ++t)
      for (int j = 0; j < c.experts_per_token; ++j)
        EXPECT_EQ(f.layer(l)[t * c.experts_per_token + j], pattern(want[t], l, j, c.n_routed_experts));
}

TEST(RoutingReplay, CallsTakeTheTracesTokensInOrderAndWrapAround) {
  const model::ModelConfig c = model::synthetic_config("tiny");
  const int L = c.num_layers, k = c.experts_per_token, E = c.n_routed_experts;
  RoutingReplay replay(pattern_trace(c, {1, 2}), c);  // 3 tokens over two steps
  EXPECT_EQ(replay.trace_tokens(), 3);
  // Calls of 2, 2 and 4 tokens take trace tokens 0 1 | 2 0 | 1 2 0 1.
  const std::vector<std::vector<int64_t>> want = {{0, 1}, {2, 0}, {1, 2, 0, 1}};
  for (const auto& tokens : want) {
    const ForcedRouting f = replay.take(std::ssize(tokens));
    ASSERT_EQ(f.tokens, std::ssize(tokens));
    ASSERT_EQ(f.experts.size(), static_cast<size_t>(L) * tokens.size() * k);
    for (int l = 0; l < L; ++l)
      for (size_t t = 0; t < tokens.size(); ++t)
        for (int j = 0; j < k; ++j)
          EXPECT_EQ(f.layer(l)[t * k + j], pattern(tokens[t], l, j, E)) << "layer " << l << " token " << t;
  }
}

// A scored layer forced to some experts computes what a hash layer whose table maps each token to
// those experts computes (the hash path is checked against transformers by the golden tests): the
// same experts, weighted by the same normalised scores. Bit for bit: the same float operations.
TEST(RoutingReplay, ForcedExpertsWeighAsAHashLayersChoice) {
  const auto model = tiny();
  const model::ModelConfig& c = model->config();
  const int layer = 3, k = c.experts_per_token;
  ASSERT_FALSE(c.hash_routed[layer]);
  const int n = 4;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Tensor x({n, int64_t{c.hidden_size}});
  for (auto& v : x.data) v = normal(rng);
  const std::vector<int32_t> tokens = {10, 11, 12, 13};
  std::vector<int32_t> forced;
  for (int t = 0; t < n; ++t)
    for (int j = 0; j < k; ++j) forced.push_back(pattern(t, layer, j, c.n_routed_experts));

  model::MoeWeights hashed = model->weights().layers[layer].moe;
  hashed.tid2eid.assign(static_cast<size_t>(c.vocab_size) * k, 0);
  for (int t = 0; t < n; ++t)
    for (int j = 0; j < k; ++j) hashed.tid2eid[static_cast<size_t>(tokens[t]) * k + j] = forced[t * k + j];
  const Tensor want = moe_forward(c, hashed, /*hash_layer=*/true, x, tokens);

  std::vector<int32_t> chosen;
  const Tensor got = moe_forward(c, model->weights().layers[layer].moe, /*hash_layer=*/false, x, tokens, &chosen, {},
                                 forced.data());
  EXPECT_EQ(chosen, forced);
  EXPECT_EQ(got.data, want.data);
  // The router alone would have chosen otherwise: the forced experts made a difference.
  EXPECT_NE(moe_forward(c, model->weights().layers[layer].moe, false, x, tokens).data, want.data);
}

TEST(RoutingReplay, TheEnginesMoeRoutesEveryLayerToTheTrace) {
  const auto model = tiny();
  const model::ModelConfig& c = model->config();
  const int k = c.experts_per_token;
  RoutingReplay replay(pattern_trace(c, {2, 1, 1}), c);  // 4 tokens
  Model& m = *model;
  m.replay_routing(&replay);
  Session s = m.new_session();
  const std::vector<std::vector<int32_t>> calls = {{5, 6, 7}, {8}, {9, 10}};  // trace tokens 0-2, 3, 0-1
  const std::vector<std::vector<int64_t>> trace_tokens = {{0, 1, 2}, {3}, {0, 1}};
  for (size_t call = 0; call < calls.size(); ++call) {
    m.forward(s, calls[call]);
    for (int l = 0; l < c.num_layers; ++l) {
      std::vector<int32_t> want;
      for (const int64_t t : trace_tokens[call])
        for (int j = 0; j < k; ++j) want.push_back(pattern(t, l, j, c.n_routed_experts));
      EXPECT_EQ(s.layers[l].last_call.experts, want) << "call " << call << " layer " << l;
    }
  }
  m.replay_routing(nullptr);
}

// The router's own choices, recorded call by call and replayed on a fresh session, give the same
// logits bit for bit: the replay changes the choice only, and the weights still come from the
// router's scores in every layer (hash-routed ones too).
TEST(RoutingReplay, ReplayingTheRoutersOwnChoiceReproducesTheModel) {
  const auto model = tiny();
  Model& m = *model;
  const model::ModelConfig& c = m.config();
  const std::vector<std::vector<int32_t>> calls = {{1, 2, 3, 4, 5}, {6}, {7, 8}, {9}};
  RoutingTrace recorded = empty_trace(c);
  std::vector<Tensor> want;
  Session s = m.new_session();
  for (const auto& call : calls) {
    want.push_back(m.forward(s, call));
    RoutingStep step{StepKind::Decode, {}};
    for (const auto& layer : s.layers) step.layers.emplace_back(layer.last_call.experts.begin(), layer.last_call.experts.end());
    recorded.steps.push_back(step);
  }
  RoutingReplay replay(recorded, c);
  m.replay_routing(&replay);
  Session r = m.new_session();
  for (size_t i = 0; i < calls.size(); ++i) EXPECT_EQ(m.forward(r, calls[i]).data, want[i].data) << "call " << i;
  m.replay_routing(nullptr);
}

}  // namespace
}  // namespace frank::engine
