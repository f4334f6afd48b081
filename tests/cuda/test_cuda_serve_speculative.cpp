// `frank serve --backend cuda --draft-tokens K`: speculative decoding with the model's MTP block on
// the GPU (verify steps over the request's device session, rollback on the device), on the MTP
// fixture (tests/fixtures/dsv4-mtp/tiny-v4-mtp, fp32 weights), against the same server with
// --draft-tokens 0. Greedy acceptance keeps a draft only where it is the model's argmax, so the
// completions must be the plain server's tokens, as `frank generate --backend cuda --draft-tokens K`
// gives plain greedy's on this fixture (scripts/gpu-check, test_cuda_mtp.cpp). A second turn that
// continues the conversation resumes the session the verify steps left (rewound past rejected
// drafts) from GPU memory, or, with --gpu-sessions 0, from the host prefix cache (downloaded after
// the rewinds and uploaded again): it must still give the plain server's tokens. /metrics counts
// the verify steps and drafts. Explicit --draft-tokens without an MTP block, or more drafts than a
// GPU verify step takes, stop the server at startup with a clear error.
// Skipped, saying so, without a CUDA device; needs the CUDA-built `frank` (see test_cuda_serve.cpp).
//
// Tolerance: the ids must be equal; the log-probabilities come from verify steps of k + 1 tokens
// instead of 1-token steps (other kernel shapes, the same fp32 math per position), so they are held
// to test_cuda_serve.cpp's 5e-3 x max(1, |logprob|).
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>

#include "cuda/cuda_serve_util.h"
#include "golden/fixture.h"

namespace frank::test {
namespace {

using namespace serve;

const fs::path kMtpDir = fixture_root().parent_path() / "dsv4-mtp" / "tiny-v4-mtp";

std::vector<int32_t> fixture_ids() {
  return json::parse(std::ifstream(kMtpDir / "golden.json")).at("ids").get<std::vector<int32_t>>();
}

void expect_equal(const Completion& drafted, const Completion& plain, const std::string& what) {
  EXPECT_EQ(drafted.ids, plain.ids) << what;
  EXPECT_EQ(drafted.text, plain.text) << what;
  for (size_t i = 0; i < std::min(drafted.logprobs.size(), plain.logprobs.size()); ++i)
    EXPECT_LE(std::abs(drafted.logprobs[i] - plain.logprobs[i]), 5e-3 * std::max(1.0, std::abs(plain.logprobs[i])))
        << what << ": token " << i;
}

TEST(CudaServeSpeculative, DraftedCompletionsAndContinuedTurnsEqualThePlainServers) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device on this machine: `frank serve --backend cuda` is not checked here";
  ASSERT_TRUE(fs::exists(frank_binary())) << frank_binary() << " not found (set FRANK_BINARY)";
  const std::vector<int32_t> ids = fixture_ids();
  const fs::path tmp = fs::temp_directory_path() / fmt::format("frank-cuda-serve-spec-{}", getpid());
  fs::create_directories(tmp);
  const std::string common = fmt::format("--model {} --tokenizer {} --ctx 512 --backend cuda --weights-dtype fp32",
                                         kMtpDir.string(), write_byte_tokenizer(tmp).string());
  Server plain(common + " --draft-tokens 0", tmp / "plain.log");

  const std::vector<int32_t> prompt(ids.begin(), ids.begin() + 8);
  const Completion first_plain = complete(plain, prompt, 24);
  const auto extended = concat(concat(prompt, first_plain.ids), {ids[8], ids[9]});
  const Completion second_plain = complete(plain, extended, 16);

  struct Arm {
    std::string options;
    const char* tier;  // where the second turn resumes
  };
  const std::vector<Arm> arms{{"--draft-tokens 1", "gpu"},
                              {"--draft-tokens 2", "gpu"},
                              {"--draft-tokens 3", "gpu"},
                              {"--draft-tokens 4", "gpu"},
                              {"--draft-tokens auto", "gpu"},
                              {"--draft-tokens 3 --gpu-sessions 0", "host"}};
  std::cout << "| server                            | verify steps | drafted | accepted | tokens/step |\n";
  for (const Arm& arm : arms) {
    Server drafting(common + " " + arm.options, tmp / "drafting.log");
    const Completion first = complete(drafting, prompt, 24);
    EXPECT_EQ(first.cached_tokens, 0) << arm.options;
    expect_equal(first, first_plain, arm.options + ", first turn");
    const Completion second = complete(drafting, extended, 16);
    // A verify step feeds every token it emits, so the session consumed the whole first completion.
    EXPECT_EQ(second.cached_tokens, static_cast<int>(prompt.size() + first.ids.size())) << arm.options;
    EXPECT_EQ(labelled(drafting, fmt::format("frank_prefix_cache_hits_total{{tier=\"{}\"}}", arm.tier)), 1)
        << arm.options;
    expect_equal(second, second_plain, arm.options + ", continued turn");

    const double steps = metric(drafting, "frank_verify_steps_total");
    const double drafted = metric(drafting, "frank_draft_tokens_total");
    const double accepted = metric(drafting, "frank_draft_tokens_accepted_total");
    EXPECT_GT(steps, 0) << arm.options;
    EXPECT_GT(drafted, 0) << arm.options;
    EXPECT_LE(accepted, drafted) << arm.options;
    // Every completion token comes from a verify step: its first token and its accepted drafts.
    EXPECT_EQ(steps + accepted, 24 + 16) << arm.options;
    std::cout << fmt::format("| {:<33} | {:>12} | {:>7} | {:>8} | {:>11.2f} |\n", arm.options, steps, drafted,
                             accepted, (steps + accepted) / steps);
    EXPECT_EQ(drafting.process->stop(), "exit 0") << drafting.process->log_tail();
  }
  EXPECT_EQ(metric(plain, "frank_verify_steps_total"), -1);  // declared, never counted
  plain.process->stop();
  fs::remove_all(tmp);
}

// `frank serve ARGS` run to its end (a server that refuses its options exits before it listens):
// the exit status and everything it printed.
std::pair<int, std::string> serve_until_exit(const std::string& args) {
  FILE* pipe = popen(fmt::format("{} serve --port 0 {} 2>&1", frank_binary().string(), args).c_str(), "r");
  std::string output;
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), pipe)) output.append(buf.data(), n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), output};
}

TEST(CudaServeSpeculative, RefusesDraftsItCannotRunAtStartup) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device on this machine: `frank serve --backend cuda` is not checked here";
  const fs::path tmp = fs::temp_directory_path() / fmt::format("frank-cuda-serve-spec-refused-{}", getpid());
  fs::create_directories(tmp);
  const std::string tokenizer = write_byte_tokenizer(tmp).string();
  const auto [no_mtp_status, no_mtp] = serve_until_exit(fmt::format(
      "--backend cuda --model {} --tokenizer {} --draft-tokens 2", (fixture_root() / "tiny-v4").string(), tokenizer));
  EXPECT_EQ(no_mtp_status, 1) << no_mtp;
  EXPECT_NE(no_mtp.find("--draft-tokens 2: the model has no MTP block (mtp.0.*) to draft with"), std::string::npos)
      << no_mtp;
  // A GPU verify step takes at most 8 tokens (CudaModel::kGraphTokens; the fixture's window is 8 too).
  const auto [too_many_status, too_many] = serve_until_exit(
      fmt::format("--backend cuda --model {} --tokenizer {} --draft-tokens 8", kMtpDir.string(), tokenizer));
  EXPECT_EQ(too_many_status, 1) << too_many;
  EXPECT_NE(too_many.find("--draft-tokens must be at most 7 on --backend cuda"), std::string::npos) << too_many;
  fs::remove_all(tmp);
}

}  // namespace
}  // namespace frank::test
