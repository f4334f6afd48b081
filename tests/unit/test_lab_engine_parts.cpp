// The parts of `frank lab draw | run | fidelity` that need no engine: the top-K KL proxy, the
// Prometheus text reader, the workload reader and the hash-chained ledger.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "frank/core/error.h"
#include "frank/core/sha256.h"
#include "frank/core/splitmix64.h"
#include "frank/lab/fidelity.h"
#include "frank/lab/ledger.h"
#include "frank/lab/ledger_writer.h"
#include "frank/lab/prometheus_text.h"
#include "frank/lab/workload.h"

namespace frank::lab {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

fs::path temp_file(const std::string& name, const std::string& text) {
  const fs::path dir = fs::temp_directory_path() / "frank-lab-engine-parts";
  fs::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary) << text;
  return dir / name;
}

template <class F>
void expect_error(F&& f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one containing: " << part;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TopLogprobs from_probs(const std::map<int32_t, double>& p) {
  TopLogprobs lp;
  for (auto [id, v] : p) lp[id] = std::log(v);
  return lp;
}

TEST(LabFidelity, FullSupportGivesTheExactKl) {
  // Both distributions known on all three tokens: the proxy is the exact KL, worked by hand.
  const auto p = from_probs({{0, 0.5}, {1, 0.3}, {2, 0.2}}), q = from_probs({{0, 0.4}, {1, 0.4}, {2, 0.2}});
  const double exact = 0.5 * std::log(0.5 / 0.4) + 0.3 * std::log(0.3 / 0.4);
  EXPECT_NEAR(top_k_kl(p, q), exact, 1e-12);
  EXPECT_EQ(top_k_kl(p, p), 0.0);
}

TEST(LabFidelity, TopKProxySharesTheMissingMassWithTheBucket) {
  // P knows tokens 0,1 (mass 0.9), Q knows 0,2 (mass 0.9). For P, token 2 is unknown: it shares
  // P's remaining 0.1 with the bucket, capped by P's smallest known probability (0.4): 0.05 each.
  const auto p = from_probs({{0, 0.5}, {1, 0.4}}), q = from_probs({{0, 0.6}, {2, 0.3}});
  // Categories (0, 1, 2, bucket): P = (0.5, 0.4, 0.05, 0.05); Q = (0.6, min(0.3, 0.05)=0.05, 0.3, 0.05).
  const double expected = 0.5 * std::log(0.5 / 0.6) + 0.4 * std::log(0.4 / 0.05) + 0.05 * std::log(0.05 / 0.3);
  EXPECT_NEAR(top_k_kl(p, q), expected, 1e-12);
}

TEST(LabFidelity, Top1AndSummary) {
  EXPECT_EQ(top1(from_probs({{3, 0.4}, {7, 0.4}, {9, 0.2}})), 3);  // ties: the lower id
  std::vector<PositionComparison> positions;
  for (int i = 1; i <= 10; ++i) positions.push_back({i * 0.1, i % 2 == 0});
  const auto s = summarize(positions);
  EXPECT_EQ(s.positions, 10);
  EXPECT_NEAR(s.mean_kl, 0.55, 1e-12);
  EXPECT_DOUBLE_EQ(s.top1_agreement, 0.5);
  EXPECT_NEAR(s.kl_quantiles[0].second, 0.5, 1e-12);  // nearest rank: 5th of 10
  EXPECT_NEAR(s.kl_quantiles[1].second, 0.9, 1e-12);
  EXPECT_NEAR(s.kl_quantiles[4].second, 1.0, 1e-12);
  expect_error([] { top_k_kl({}, from_probs({{0, 1.0}})); }, "without log-probabilities");
}

TEST(LabPrometheus, ParsesSeriesAndCounterDeltas) {
  const std::string before =
      "# HELP frank_steps_total Steps\n# TYPE frank_steps_total counter\nfrank_steps_total 10\n"
      "frank_requests_total{outcome=\"stop\"} 2\nfrank_queue_depth 1\n";
  const std::string after =
      "frank_steps_total 25\r\nfrank_requests_total{outcome=\"stop\"} 3\nfrank_requests_total{outcome=\"a b\"} 1\n"
      "frank_queue_depth 4\nx_seconds_sum 1.5 1700000000\nbroken line\nnan_total NaN\n";
  const auto a = parse_prometheus_text(after);
  EXPECT_EQ(a.at("frank_requests_total{outcome=\"a b\"}"), 1);
  EXPECT_EQ(a.at("x_seconds_sum"), 1.5);
  EXPECT_EQ(a.count("broken"), 0u);
  const auto d = counter_deltas(parse_prometheus_text(before), a);
  EXPECT_EQ(d.at("frank_steps_total"), 15);
  EXPECT_EQ(d.at("frank_requests_total{outcome=\"stop\"}"), 1);
  EXPECT_EQ(d.count("frank_queue_depth"), 0u);  // a gauge, not a counter
  EXPECT_EQ(metric_sum(a, "frank_requests_total"), 4);
}

const std::string kSession =
    R"({"format":"frank-agent-session/1","id":"s","system":"sys","turns":[{"role":"user","content":"hi"},)"
    R"({"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}],"completion_tokens":3},)"
    R"({"role":"tool","tool_call_id":"c1","content":"out","tool_time_s":0.5},{"role":"assistant","content":"done","completion_tokens":2}]})";

TEST(LabWorkload, ReadsSessions) {
  const auto sessions = load_workload(temp_file("w.jsonl", kSession + "\n"));
  ASSERT_EQ(sessions.size(), 1u);
  EXPECT_EQ(sessions[0].assistant_turns(), 2);
  EXPECT_EQ(sessions[0].turns[1].completion_tokens, 3);
  EXPECT_FALSE(sessions[0].turns[1].message.contains("completion_tokens"));  // not sent to the engine
  EXPECT_DOUBLE_EQ(sessions[0].turns[2].tool_time_s, 0.5);
  std::string forced = kSession;
  const std::string last_turn = "\"completion_tokens\":2";
  forced.replace(forced.find(last_turn), last_turn.size(), last_turn + ",\"token_ids\":[5,6]");
  const auto with_ids = load_workload(temp_file("f.jsonl", forced));
  EXPECT_EQ(with_ids[0].turns[3].token_ids, (std::vector<int32_t>{5, 6}));
  EXPECT_FALSE(with_ids[0].turns[3].message.contains("token_ids"));
}

TEST(LabWorkload, BadSessionsAreErrorsNamingTheLine) {
  auto with = [](const std::string& from, const std::string& to) {
    std::string s = kSession;
    s.replace(s.find(from), from.size(), to);
    return s;
  };
  expect_error([&] { load_workload(temp_file("b.jsonl", "\n" + with("agent-session/1", "x"))); }, "b.jsonl:2");
  expect_error([&] { load_workload(temp_file("b.jsonl", with("\"completion_tokens\":3", "\"completion_tokens\":0"))); },
               "\"completion_tokens\" must be an integer");
  expect_error([&] { load_workload(temp_file("b.jsonl", with("\"tool_call_id\":\"c1\"", "\"tool_call_id\":\"c9\""))); },
               "tool result for c9");
  expect_error([&] { load_workload(temp_file("b.jsonl", with("\"role\":\"user\"", "\"role\":\"robot\""))); },
               "unknown role \"robot\"");
  expect_error([&] { load_workload(temp_file("b.jsonl", kSession + "\n" + kSession)); }, "appears twice");
  expect_error([&] { load_workload(temp_file("b.jsonl", with("\"completion_tokens\":2", "\"completion_tokens\":2,\"token_ids\":[1]"))); },
               "\"token_ids\" must be a list of completion_tokens ids");
  expect_error([&] { load_workload(temp_file("b.jsonl", "{")); }, "not valid JSON");
  expect_error([&] { load_workload(temp_file("b.jsonl", "")); }, "has no session");
}

// Bounded fuzz: mutated workload lines either load or fail with frank::Error (never another
// exception, never a crash); the Prometheus reader never throws.
TEST(LabParsersFuzz, MutatedInputsGiveCleanErrors) {
  SplitMix64 rng(20261129);
  int loaded = 0, refused = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string text = kSession;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t at = rng() % text.size();
      switch (rng() % 3) {
        case 0: text[at] = static_cast<char>(rng() % 128); break;
        case 1: text.erase(at, 1 + rng() % 8); break;
        default: text.insert(at, std::string(1, "{}[]\",:0-e\\"[rng() % 10]));
      }
    }
    try {
      load_workload(temp_file("fuzz.jsonl", text));
      ++loaded;
    } catch (const Error&) {
      ++refused;
    }
    EXPECT_NO_THROW(parse_prometheus_text(text));
  }
  EXPECT_GT(refused, 1000);  // the mutations mostly break the session
  EXPECT_GT(loaded, 0);      // and some (in free text) leave it valid
}

TEST(LabLedgerChain, AppendsVerifiesAndFindsEdits) {
  const fs::path path = temp_file("chain.jsonl", "");
  fs::remove(path);
  const std::string id(64, 'a');
  {
    std::vector<json> existing;
    LedgerWriter w(path, existing);
    EXPECT_TRUE(existing.empty());
    w.append({{"kind", "event"}, {"design", id}, {"event", "run_started"}});
    w.append({{"kind", "draw"}, {"design", id}, {"block", 0}, {"arm", "a"}, {"start", 0}, {"draw", 0},
              {"metrics", {{"t", 1.0}}}});
  }
  auto lines = read_chained_ledger(path);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["prev"], kChainStart);
  std::ifstream in(path);
  std::string first;
  std::getline(in, first);
  EXPECT_EQ(lines[1]["prev"], sha256_hex(first));
  EXPECT_EQ(read_ledger(path, id).size(), 1u);  // the event is not a measurement
  {
    std::vector<json> existing;
    LedgerWriter w(path, existing);  // reopening continues the chain
    EXPECT_EQ(existing.size(), 2u);
    w.append({{"kind", "event"}, {"design", id}, {"event", "run_finished"}});
  }
  EXPECT_EQ(read_chained_ledger(path).size(), 3u);

  std::ifstream whole(path);
  std::string text((std::istreambuf_iterator<char>(whole)), std::istreambuf_iterator<char>());
  std::string edited = text;
  edited.replace(edited.find("\"t\":1.0"), 7, "\"t\":0.5");
  expect_error([&] { read_chained_ledger(temp_file("edited.jsonl", edited)); }, "edited.jsonl:3: the hash chain is broken");
  expect_error([&] { read_ledger(temp_file("edited.jsonl", edited), id); }, "hash chain is broken");
  const std::string dropped = text.substr(text.find('\n') + 1);
  expect_error([&] { read_chained_ledger(temp_file("dropped.jsonl", dropped)); }, "dropped.jsonl:1");
  expect_error([&] { read_chained_ledger(temp_file("cut.jsonl", text.substr(0, text.size() - 5))); },
               "last line is incomplete");
}

}  // namespace
}  // namespace frank::lab
