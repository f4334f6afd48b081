#include "frank/lab/fidelity_screen.h"

#include <fmt/format.h>

#include <fstream>
#include <map>

#include "frank/core/error.h"
#include "frank/lab/engine_client.h"
#include "frank/lab/engine_process.h"

namespace frank::lab {
namespace {

using nlohmann::json;

std::vector<int32_t> id_list(const json& value, const std::string& where) {
  if (!value.is_array()) throw Error(fmt::format("{}: must be a list of token ids", where));
  std::vector<int32_t> ids;
  for (const auto& v : value) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX)
      throw Error(fmt::format("{}: token ids are integers >= 0", where));
    ids.push_back(v.get<int32_t>());
  }
  return ids;
}

int32_t token_id_of(const std::string& name, const std::string& where) {
  // "token_id:N", as return_tokens_as_token_ids names tokens.
  if (name.rfind("token_id:", 0) != 0)
    throw Error(fmt::format("{}: the engine named a token \"{}\", not \"token_id:N\" (does it support "
                            "return_tokens_as_token_ids?)",
                            where, name));
  return static_cast<int32_t>(std::stol(name.substr(9)));
}

// Runs one completions request and returns its legacy logprobs object.
json completion_logprobs(EngineClient& client, const json& body, const std::string& where) {
  const HttpReply reply = client.post_json("/v1/completions", body);
  if (!reply.ok()) throw Error(fmt::format("{}: {}", where, reply.failure()));
  const json doc = json::parse(reply.body, nullptr, false);
  if (doc.is_discarded() || !doc.contains("choices") || doc["choices"].empty() ||
      !doc["choices"][0].contains("logprobs") || !doc["choices"][0]["logprobs"].is_object())
    throw Error(fmt::format("{}: the reply has no logprobs", where));
  return doc["choices"][0]["logprobs"];
}

// One engine start: every item's completion scored (and, on the first run, generated first).
std::vector<std::vector<TopLogprobs>> score_items(std::vector<FidelityItem>& items, const EngineCommand& engine,
                                                  const std::string& label, const FidelityOptions& o) {
  const int port = free_local_port();
  const std::string url = with_port(engine.url, port);
  EngineProcess process(with_port(engine.start, port), o.logs / (label + ".log"));
  process.wait_healthy(url, engine.health, o.start_timeout);
  EngineClient client(url, std::chrono::seconds(600));
  const std::string model = served_model_id(client);
  std::vector<std::vector<TopLogprobs>> scored;
  for (FidelityItem& item : items) {
    const std::string where = fmt::format("{} ({})", item.origin, label);
    if (item.completion.empty()) {
      const json lp = completion_logprobs(client,
                                          {{"model", model},
                                           {"prompt", item.prompt},
                                           {"max_tokens", item.generate},
                                           {"ignore_eos", true},
                                           {"temperature", 0},
                                           {"logprobs", 0},
                                           {"return_tokens_as_token_ids", true}},
                                          where);
      for (const auto& name : lp.at("tokens")) item.completion.push_back(token_id_of(name.get<std::string>(), where));
    }
    const json lp = completion_logprobs(client,
                                        {{"model", model},
                                         {"prompt", item.prompt},
                                         {"max_tokens", item.completion.size()},
                                         {"forced_completion_ids", item.completion},
                                         {"temperature", 0},
                                         {"logprobs", o.top_k},
                                         {"return_tokens_as_token_ids", true}},
                                        where);
    const json& tops = lp.at("top_logprobs");
    if (tops.size() != item.completion.size())
      throw Error(fmt::format("{}: {} positions scored, {} forced", where, tops.size(), item.completion.size()));
    std::vector<TopLogprobs> positions;
    for (const auto& top : tops) {
      TopLogprobs p;
      for (const auto& [name, value] : top.items()) p[token_id_of(name, where)] = value.get<double>();
      positions.push_back(std::move(p));
    }
    scored.push_back(std::move(positions));
  }
  o.progress(fmt::format("{}: {} items scored; engine {}", label, items.size(), process.stop()));
  return scored;
}

std::map<std::string, std::vector<PositionComparison>> compare_runs(const std::vector<FidelityItem>& items,
                                                                    const std::vector<std::vector<TopLogprobs>>& ref,
                                                                    const std::vector<std::vector<TopLogprobs>>& cand) {
  std::map<std::string, std::vector<PositionComparison>> by_group;
  for (size_t i = 0; i < items.size(); ++i)
    for (size_t p = 0; p < ref[i].size(); ++p) by_group[items[i].group].push_back(compare_position(ref[i][p], cand[i][p]));
  return by_group;
}

json summary_json(const ComparisonSummary& s) {
  json quantiles = json::object();
  for (auto [q, v] : s.kl_quantiles) quantiles[fmt::format("{}", q)] = v;
  return {{"positions", s.positions}, {"mean_kl", s.mean_kl}, {"top1_agreement", s.top1_agreement},
          {"kl_quantiles", quantiles}};
}

}  // namespace

std::vector<FidelityItem> load_fidelity_items(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw Error(fmt::format("cannot open fidelity items '{}'", path.string()));
  std::vector<FidelityItem> items;
  std::string text;
  for (int64_t number = 1; std::getline(in, text); ++number) {
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string origin = fmt::format("{}:{}", path.string(), number);
    const json doc = json::parse(text, nullptr, false);
    if (doc.is_discarded() || !doc.is_object()) throw Error(fmt::format("{}: not a JSON object", origin));
    FidelityItem item;
    item.origin = origin;
    item.group = doc.value("group", "all");
    if (doc.contains("prompt") && doc["prompt"].is_string()) item.prompt = doc["prompt"];
    else if (doc.contains("prompt_ids")) item.prompt = id_list(doc["prompt_ids"], origin + ": prompt_ids");
    else throw Error(fmt::format("{}: \"prompt\" (text) or \"prompt_ids\" is required", origin));
    if (doc.contains("completion_ids")) item.completion = id_list(doc["completion_ids"], origin + ": completion_ids");
    else if (doc.contains("generate") && doc["generate"].is_number_integer() && doc["generate"].get<int>() >= 1 &&
             doc["generate"].get<int>() <= 65536)
      item.generate = doc["generate"].get<int>();
    else throw Error(fmt::format("{}: \"completion_ids\" or \"generate\" (1..65536) is required", origin));
    if (item.completion.empty() && item.generate == 0)
      throw Error(fmt::format("{}: \"completion_ids\" is empty", origin));
    items.push_back(std::move(item));
  }
  if (items.empty()) throw Error(fmt::format("'{}' has no fidelity items", path.string()));
  return items;
}

FidelityResult run_fidelity(std::vector<FidelityItem> items, const FidelityOptions& o) {
  const auto a1 = score_items(items, o.a, "A", o);
  const auto a2 = score_items(items, o.a, "A-again", o);
  const auto b = score_items(items, o.b, "B", o);
  const auto aa = compare_runs(items, a1, a2), ab = compare_runs(items, a1, b);
  FidelityResult result;
  result.passed = true;
  for (const auto& [group, positions] : ab) {
    GroupResult g{group, summarize(aa.at(group)), summarize(positions)};
    g.passed = g.ab.mean_kl <= g.aa.mean_kl + o.kl_margin && g.ab.top1_agreement >= g.aa.top1_agreement - o.top1_margin;
    result.passed = result.passed && g.passed;
    result.groups.push_back(std::move(g));
  }
  return result;
}

json FidelityResult::to_json() const {
  json groups_json = json::array();
  for (const auto& g : groups)
    groups_json.push_back({{"group", g.group}, {"aa", summary_json(g.aa)}, {"ab", summary_json(g.ab)},
                           {"verdict", g.passed ? "pass" : "differs"}});
  return {{"groups", groups_json}, {"verdict", passed ? "pass" : "differs"}};
}

std::string fidelity_report(const FidelityResult& r, const FidelityOptions& o) {
  std::string out = fmt::format(
      "fidelity: top-{} KL proxy of A vs A again (A/A) and of A vs B, per group; B passes when its mean KL is "
      "within {:g} nats of A/A's and its top-1 agreement within {:g} of A/A's\n",
      o.top_k, o.kl_margin, o.top1_margin);
  out += fmt::format("{:<16} {:>5} {:>7} {:>11} {:>11} {:>11} {:>11} {:>11} {:>7}  {}\n", "group", "run", "pos",
                     "mean KL", "p50", "p90", "p99", "max", "top-1", "verdict");
  for (const auto& g : r.groups)
    for (const auto& [label, s] : {std::pair{"A/A", &g.aa}, {"A/B", &g.ab}}) {
      const auto& q = s->kl_quantiles;
      out += fmt::format("{:<16} {:>5} {:>7} {:>11.3e} {:>11.3e} {:>11.3e} {:>11.3e} {:>11.3e} {:>7.4f}  {}\n",
                         g.group, label, s->positions, s->mean_kl, q[0].second, q[1].second, q[2].second,
                         q[4].second, s->top1_agreement,
                         std::string(label) == "A/B" ? (g.passed ? "pass" : "DIFFERS") : "");
    }
  out += fmt::format("verdict: {}\n", r.passed ? "pass (B is as close to A as A is to itself)" : "B differs from A");
  return out;
}

}  // namespace frank::lab
