// The `frank` binary as scripts and later tests call it: the logits/generate contract, and bad
// input that must end in a clear error and a non-zero exit, never a crash.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "../unit/safetensors_test_util.h"
#include "fixture.h"
#include "frank/engine/topk_row_dump.h"
#include "frank/model/config.h"
#include "run_frank.h"

namespace frank::test {
namespace {

using ::testing::HasSubstr;

TEST(Cli, LogitsContractIncremental) {
  const Fixture f = load_fixture(fixture_root() / "tiny-v4");
  TempDir tmp;
  const auto out = tmp / "logits.f32";
  const auto r = run_frank(fmt::format("logits --model {} --ids {} --mode incremental --prefill 41 --out {}",
                                       f.dir.string(), join_ids(f.ids, f.ids.size()), out.string()));
  ASSERT_EQ(r.exit_code, 0) << r.output();
  EXPECT_EQ(r.last_line(), fmt::format("shape {} {}", f.ids.size(), f.vocab));
  const std::vector<float> got = read_logits_file(f, out);
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_LE(std::abs(got[i] - f.logits[i]), 1e-4 * std::max(1.0f, std::abs(f.logits[i]))) << "logit " << i;
}

// --dump-topk-rows writes one row per CSA query: at position p a CSA layer of ratio r sees the
// (p+1)/r entries closed so far, and selects the config's index_topk of them.
TEST(Cli, DumpTopkRowsWritesEveryIndexerRow) {
  const Fixture f = load_fixture(fixture_root() / "tiny-v4");
  TempDir tmp;
  const auto r = run_frank(fmt::format("logits --model {} --ids {} --mode chunked:3 --dump-topk-rows {} --out {}",
                                       f.dir.string(), join_ids(f.ids, f.ids.size()), (tmp / "rows").string(),
                                       (tmp / "l.f32").string()));
  ASSERT_EQ(r.exit_code, 0) << r.output();
  const auto config = model::load_config(f.dir);
  std::vector<std::pair<int64_t, int64_t>> want;  // (position, row length) per CSA layer and token, in call order
  for (size_t begin = 0; begin < f.ids.size(); begin += 3)
    for (int l = 0; l < config.num_layers; ++l)
      if (config.attention[l] == model::AttentionKind::CompressedSparse)
        for (size_t p = begin; p < std::min(begin + 3, f.ids.size()); ++p)
          want.emplace_back(static_cast<int64_t>(p), static_cast<int64_t>(p + 1) / config.compress_ratio[l]);
  const auto rows = engine::read_topk_rows(tmp / "rows" / "topk-rows.bin");
  ASSERT_EQ(rows.size(), want.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].position, want[i].first) << "row " << i;
    EXPECT_EQ(static_cast<int64_t>(rows[i].scores.size()), want[i].second) << "row " << i;
    EXPECT_EQ(rows[i].k, config.index_topk);
  }
}

TEST(Cli, GreedyGenerateStartsWithTransformersArgmax) {
  const Fixture f = load_fixture(fixture_root() / "tiny-v4");
  const size_t prompt = 30;
  const auto r = run_frank(fmt::format("generate --model {} --ids {} --max-tokens 5 --ignore-eos", f.dir.string(),
                                   join_ids(f.ids, prompt)));
  ASSERT_EQ(r.exit_code, 0) << r.output();
  const float* row = f.logits.data() + (prompt - 1) * f.vocab;
  const auto best = std::max_element(row, row + f.vocab) - row;
  const std::string line = r.last_line();
  EXPECT_THAT(line, ::testing::StartsWith(std::to_string(best) + ","));
  EXPECT_EQ(std::count(line.begin(), line.end(), ','), 4) << line;
}

TEST(Cli, DraftTokensGiveTheSameGreedyTokens) {
  const auto mtp = fixture_root().parent_path() / "dsv4-mtp" / "tiny-v4-mtp";
  const std::string base = fmt::format("generate --model {} --ids 5,17,3,9 --max-tokens 24 --ignore-eos", mtp.string());
  const auto plain = run_frank(base);
  ASSERT_EQ(plain.exit_code, 0) << plain.output();
  for (const char* k : {"1", "3", "auto"}) {
    const auto drafted = run_frank(base + fmt::format(" --draft-tokens {}", k));
    ASSERT_EQ(drafted.exit_code, 0) << drafted.output();
    EXPECT_EQ(drafted.last_line(), plain.last_line()) << "k = " << k;
    EXPECT_THAT(drafted.err, ::testing::HasSubstr("verify steps"));
  }
  const auto no_mtp =
      run_frank(fmt::format("generate --model {} --draft-tokens 2", (fixture_root() / "tiny-v4").string()));
  EXPECT_EQ(no_mtp.exit_code, 1);
  EXPECT_THAT(no_mtp.err, ::testing::HasSubstr("has no MTP block"));
  const auto bad = run_frank(base + " --draft-tokens lots");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(bad.err, ::testing::HasSubstr("neither a count 0..16 nor 'auto'"));
}

TEST(Cli, EmbeddedDefaultModelRunsWithoutCheckpoint) {
  const auto r = run_frank("generate --max-tokens 4");
  EXPECT_EQ(r.exit_code, 0) << r.output();
  const auto sampled = run_frank("generate --max-tokens 4 --temperature 0.8 --top-p 0.9 --seed 3");
  EXPECT_EQ(sampled.exit_code, 0) << sampled.output();
  EXPECT_EQ(sampled.last_line(),
            run_frank("generate --max-tokens 4 --temperature 0.8 --top-p 0.9 --seed 3").last_line());
}

void expect_error(const std::string& args, const std::string& fragment) {
  const auto r = run_frank(args);
  EXPECT_EQ(r.exit_code, 1) << args << "\n" << r.output();
  EXPECT_THAT(r.output(), HasSubstr("error: ")) << args;
  EXPECT_THAT(r.output(), HasSubstr(fragment)) << args;
}

TEST(Cli, BadArgumentsGiveClearErrors) {
  TempDir tmp;
  const auto out = (tmp / "x.f32").string();
  expect_error("logits --ids 1,999 --out " + out, "token id 999 (at index 1) is outside the vocabulary [0, 256)");
  expect_error("logits --ids 1,,3 --out " + out, "'' is not a non-negative integer");
  expect_error("logits --ids 1,-3 --out " + out, "'-3' is not a non-negative integer");
  expect_error("logits --ids 1,2 --mode chunked:0 --out " + out, "unknown mode 'chunked:0'");
  expect_error("logits --ids 1,2 --mode full --prefill 1 --out " + out, "--prefill applies to --mode incremental");
  expect_error("logits --ids 1 --backend cuda --out " + out, "backend 'cuda' is not available");
  expect_error("logits --ids 1 --kv-dtype fp8 --out " + out, "the CPU backend (the fp32 reference) keeps K=V rows in fp32");
  expect_error("generate --kv-dtype fp16", "--kv-dtype 'fp16': expected fp32, bf16 or fp8");
  expect_error("bench decode --kv-dtype int4", "--kv-dtype 'int4'");
  expect_error("kv-capacity --synthetic v4-flash --memory 40 GiB", "GiB");
  expect_error("kv-capacity --synthetic v4-flash --memory lots", "'lots' is not a memory size");
  expect_error("kv-capacity --memory 1GiB", "give one of --checkpoint DIR or --synthetic v4-flash");
  expect_error("kv-capacity --synthetic v4-flash --memory 1GiB --kv-dtype fp4", "--kv-dtype 'fp4'");
  expect_error("bench decode --layers 2", "bench decode needs the CUDA backend");
  expect_error("bench decode --layers 44", "--layers");
  expect_error("serve --backend cuda", "backend 'cuda' is not available");
  expect_error("serve --dump-topk-rows " + (tmp / "rows").string(), "--dump-topk-rows applies to logits and generate");
  expect_error("serve --draft-tokens 2", "--draft-tokens 2: the model has no MTP block (mtp.0.*) to draft with");
  expect_error("serve --synthetic tiny-chat-mtp --draft-tokens 8",
               "--draft-tokens must be at most 7 on --backend cpu");
  expect_error("generate --synthetic huge", "unknown synthetic model 'huge'");
  expect_error("generate --temperature -1", "temperature must be");
  expect_error("logits --model " + (tmp / "nowhere").string() + " --ids 1 --out " + out, "nowhere");
  // Command-line mistakes CLI11 finds are errors like the others: `error: ...`, status 1.
  expect_error("generate --max-tokens many", "--max-tokens");
  expect_error("generate --no-such-flag", "no-such-flag");
  expect_error("", "subcommand");
  EXPECT_EQ(run_frank("generate --help").exit_code, 0);
}

// The numbers are engine::kv_capacity's (tests/unit/test_kv_capacity.cpp works them out by hand).
TEST(Cli, KvCapacityTable) {
  const auto r = run_frank("kv-capacity --synthetic v4-flash --memory 40GiB");
  ASSERT_EQ(r.exit_code, 0) << r.output();
  EXPECT_THAT(r.out, HasSubstr("| fp8 | 584 | 5845.25 | 14.99 | 7345226 |"));
  EXPECT_THAT(r.out, HasSubstr("| fp32 | 2048 | 13760.00 | 23.05 | 3119667 |"));
  EXPECT_THAT(r.out, HasSubstr("| v4.1-fp8 (V4.1 record, capacity only) | 528 | 5542.50 |"));
  const auto one = run_frank("kv-capacity --checkpoint " + (fixture_root() / "tiny-v4").string() +
                             " --memory 1MiB --kv-dtype bf16");
  ASSERT_EQ(one.exit_code, 0) << one.output();
  EXPECT_THAT(one.out, HasSubstr("| bf16 | 64 |"));  // tiny-v4: head_dim 32
  EXPECT_THAT(one.out, ::testing::Not(HasSubstr("| fp8 |")));
}

// Copies a fixture and lets the test break one file of the copy.
std::filesystem::path broken_copy(const TempDir& tmp, const std::string& fixture) {
  const auto dst = tmp / "model";
  std::filesystem::copy(fixture_root() / fixture, dst);
  return dst;
}

std::string read_all(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

TEST(Cli, BrokenCheckpointsGiveClearErrors) {
  const std::string args = " --ids 1,2,3 --out /dev/null";
  {
    TempDir tmp;
    const auto dir = broken_copy(tmp, "tiny-v4");
    const auto bytes = read_all(dir / "model.safetensors");
    write_file(dir / "model.safetensors", bytes.substr(0, bytes.size() / 2));
    expect_error("logits --model " + dir.string() + args, "model.safetensors");
  }
  {
    TempDir tmp;
    const auto dir = broken_copy(tmp, "tiny-v4");
    write_file(dir / "model.safetensors", std::string("\xff\xff\xff\x00\x00\x00\x00\x00{}", 10));
    expect_error("logits --model " + dir.string() + args, "header");
  }
  {
    TempDir tmp;
    const auto dir = broken_copy(tmp, "tiny-v4");
    std::filesystem::remove(dir / "model.safetensors");
    std::filesystem::remove(dir / "ops.safetensors");
    expect_error("logits --model " + dir.string() + args, "safetensors");
  }
  {
    TempDir tmp;
    const auto dir = broken_copy(tmp, "tiny-v4");
    std::filesystem::remove(dir / "config.json");
    expect_error("logits --model " + dir.string() + args, "config.json");
  }
  {
    TempDir tmp;
    const auto dir = broken_copy(tmp, "tiny-v4-modnames-sharded");
    std::filesystem::remove(dir / "model-00002-of-00002.safetensors");
    expect_error("logits --model " + dir.string() + args, "model-00002-of-00002.safetensors");
  }
  {
    TempDir tmp;
    const auto dir = broken_copy(tmp, "tiny-v4");
    auto config = read_all(dir / "config.json");
    config.replace(config.find("deepseek_v4"), 11, "qwen3_moe");
    write_file(dir / "config.json", config);
    expect_error("logits --model " + dir.string() + args, "unknown model_type 'qwen3_moe'");
  }
}

}  // namespace
}  // namespace frank::test
