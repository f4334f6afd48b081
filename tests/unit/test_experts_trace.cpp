// Routing traces: the binary format round-trips, and every kind of bad or truncated file is
// refused with the file and the byte offset named.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "frank/core/error.h"
#include "frank/experts/routing_trace.h"
#include "safetensors_test_util.h"

namespace frank::experts {
namespace {

using test::TempDir;
using ::testing::HasSubstr;

// Header bytes: magic 0-7, version 8, flags 12, n_layers 16, n_experts 20, top_k 24, fingerprint
// length 28, fingerprint from 32. With this 13-byte fingerprint the first step starts at 45:
// marker 45, kind 49, layer 0 token count 53, layer 0 ids from 57.
const char* kFingerprint = "test/2x8/top2";
constexpr size_t kFirstStep = 45;

TraceHeader small_header() { return {kFingerprint, 2, 8, 2, 0}; }

RoutingTrace small_trace() {
  RoutingTrace t{"", small_header(), {}};
  t.steps.push_back({StepKind::Decode, {{1, 7}, {0, 3}}});
  t.steps.push_back({StepKind::Verify, {{2, 1, 1, 5, 7, 0}, {4, 5, 6, 7, 0, 1}}});
  t.steps.push_back({StepKind::Prefill, {{}, {}}});  // a step with no tokens is legal
  return t;
}

std::vector<char> read_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void write_bytes(const std::filesystem::path& p, const std::vector<char>& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

void put_u32(std::vector<char>& bytes, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) bytes[at + i] = static_cast<char>(v >> (8 * i));
}

// Reads the whole file and expects a frank::Error mentioning the file, `what` and the offset.
void expect_bad(const std::filesystem::path& p, const std::string& what, size_t offset) {
  try {
    read_trace(p.string());
    FAIL() << "expected an error mentioning '" << what << "'";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(p.string()));
    EXPECT_THAT(e.what(), HasSubstr(what));
    EXPECT_THAT(e.what(), HasSubstr(fmt::format("at byte {}", offset)));
  }
}

class TraceFile : public ::testing::Test {
 protected:
  void SetUp() override {
    path = dir / "t.trace";
    write_trace(path.string(), small_trace());
    bytes = read_bytes(path);
  }
  void corrupt_and_expect(const std::string& what, size_t offset) {
    write_bytes(path, bytes);
    expect_bad(path, what, offset);
  }
  TempDir dir;
  std::filesystem::path path;
  std::vector<char> bytes;
};

TEST_F(TraceFile, RoundTripsHeaderAndSteps) {
  const RoutingTrace back = read_trace(path.string());
  const RoutingTrace original = small_trace();
  EXPECT_EQ(back.source, path.string());
  EXPECT_EQ(back.header.model_fingerprint, kFingerprint);
  EXPECT_EQ(back.header.n_layers, 2u);
  EXPECT_EQ(back.header.n_experts, 8u);
  EXPECT_EQ(back.header.top_k, 2u);
  EXPECT_EQ(back.header.flags, 0u);
  ASSERT_EQ(back.steps.size(), original.steps.size());
  for (size_t i = 0; i < back.steps.size(); ++i) {
    EXPECT_EQ(back.steps[i].kind, original.steps[i].kind);
    EXPECT_EQ(back.steps[i].layers, original.steps[i].layers);
  }
  // Size: header, then per step marker + kind + per layer a count and 2 bytes per id.
  EXPECT_EQ(bytes.size(), kFirstStep + (8 + 2 * 4 + 4 * 2) + (8 + 2 * 4 + 12 * 2) + (8 + 2 * 4));
}

TEST_F(TraceFile, StreamingReaderStopsCleanlyAtTheEnd) {
  TraceReader reader(path.string());
  EXPECT_EQ(reader.header().model_fingerprint, kFingerprint);
  RoutingStep step;
  int n = 0;
  while (reader.next(step)) ++n;
  EXPECT_EQ(n, 3);
  EXPECT_FALSE(reader.next(step));
}

TEST_F(TraceFile, SyntheticFlagRoundTrips) {
  RoutingTrace t = small_trace();
  t.header.flags = kTraceFlagSynthetic;
  write_trace(path.string(), t);
  EXPECT_EQ(read_trace(path.string()).header.flags, kTraceFlagSynthetic);
}

TEST_F(TraceFile, BadMagic) {
  bytes[0] = 'X';
  corrupt_and_expect("bad magic", 0);
}

TEST_F(TraceFile, UnsupportedVersion) {
  put_u32(bytes, 8, 2);
  corrupt_and_expect("unsupported version 2", 8);
}

TEST_F(TraceFile, UnknownFlags) {
  put_u32(bytes, 12, 0x10);
  corrupt_and_expect("unknown flag bits 0x10", 12);
}

TEST_F(TraceFile, ZeroLayers) {
  put_u32(bytes, 16, 0);
  corrupt_and_expect("n_layers is 0", 12);
}

TEST_F(TraceFile, TooManyExperts) {
  put_u32(bytes, 20, 70000);
  corrupt_and_expect("n_experts 70000", 12);
}

TEST_F(TraceFile, TopKLargerThanExperts) {
  put_u32(bytes, 24, 9);
  corrupt_and_expect("top_k 9", 12);
}

TEST_F(TraceFile, HugeFingerprintLength) {
  put_u32(bytes, 28, 1u << 30);
  corrupt_and_expect("fingerprint length", 28);
}

TEST_F(TraceFile, TruncatedHeader) {
  bytes.resize(20);
  corrupt_and_expect("truncated: n_experts needs 4 bytes, the file ends after 0", 20);
}

TEST_F(TraceFile, TruncatedFingerprint) {
  bytes.resize(40);
  corrupt_and_expect("truncated: the fingerprint", 32);
}

TEST_F(TraceFile, BadStepMarker) {
  bytes[kFirstStep] = 'x';
  corrupt_and_expect("expected a step marker", kFirstStep);
}

TEST_F(TraceFile, UnknownStepKind) {
  put_u32(bytes, kFirstStep + 4, 7);
  corrupt_and_expect("unknown step kind 7", kFirstStep + 4);
}

TEST_F(TraceFile, ExpertOutOfRange) {
  bytes[kFirstStep + 12 + 2] = 8;  // layer 0, token 0, second expert: 7 -> 8
  corrupt_and_expect("expert 8 out of range", kFirstStep + 12 + 2);
}

TEST_F(TraceFile, ExpertChosenTwiceByOneToken) {
  bytes[kFirstStep + 12 + 2] = 1;  // token 0 of layer 0 chooses [1, 1]
  corrupt_and_expect("expert 1 chosen twice", kFirstStep + 12 + 2);
}

TEST_F(TraceFile, TokenCountOverTheLimit) {
  put_u32(bytes, kFirstStep + 8, kTraceMaxTokensPerLayer + 1);
  corrupt_and_expect("token count", kFirstStep + 8);
}

TEST_F(TraceFile, TruncatedInsideAStep) {
  bytes.resize(kFirstStep + 12 + 3);  // one and a half ids of layer 0
  corrupt_and_expect("truncated: expert ids needs 4 bytes, the file ends after 3", kFirstStep + 12);
}

TEST_F(TraceFile, TruncatedAfterAMarker) {
  bytes.resize(kFirstStep + 4);
  corrupt_and_expect("truncated: the step kind", kFirstStep + 4);
}

TEST(Trace, MissingFileIsNamed) {
  TempDir dir;
  EXPECT_THROW(
      {
        try {
          read_trace((dir / "none.trace").string());
        } catch (const Error& e) {
          EXPECT_THAT(e.what(), HasSubstr("none.trace"));
          throw;
        }
      },
      Error);
}

TEST(Trace, WriterRefusesStepsThatDoNotFitTheHeader) {
  TempDir dir;
  TraceWriter writer((dir / "w.trace").string(), small_header());
  auto expect_refused = [&](const RoutingStep& step, const std::string& what) {
    try {
      writer.write(step);
      FAIL() << "expected an error mentioning '" << what << "'";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr(what));
    }
  };
  expect_refused({StepKind::Decode, {{1, 2}}}, "1 layers, the header says 2");
  expect_refused({StepKind::Decode, {{1, 2, 3}, {1, 2}}}, "not a multiple of top_k");
  expect_refused({StepKind::Decode, {{1, 8}, {1, 2}}}, "expert 8 out of range");
  expect_refused({StepKind::Decode, {{1, 2}, {3, 3}}}, "an expert chosen twice");
  expect_refused({static_cast<StepKind>(5), {{1, 2}, {1, 2}}}, "unknown step kind");
}

TEST(Trace, WriterRefusesABadHeader) {
  TempDir dir;
  EXPECT_THROW(TraceWriter((dir / "w.trace").string(), {kFingerprint, 2, 8, 0, 0}), Error);
  EXPECT_THROW(TraceWriter((dir / "w.trace").string(), {kFingerprint, 2, 8, 2, 0x4}), Error);
}

TEST(Trace, ReadTracesRequiresOneModel) {
  TempDir dir;
  RoutingTrace a = small_trace(), b = small_trace();
  b.header.model_fingerprint = "other/2x8/top2";
  write_trace((dir / "a.trace").string(), a);
  write_trace((dir / "b.trace").string(), b);
  EXPECT_EQ(read_traces({(dir / "a.trace").string(), (dir / "a.trace").string()}).size(), 2u);
  try {
    read_traces({(dir / "a.trace").string(), (dir / "b.trace").string()});
    FAIL() << "expected a model mismatch";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("b.trace"));
    EXPECT_THAT(e.what(), HasSubstr("other/2x8/top2"));
  }
  EXPECT_THROW(read_traces({}), Error);
}

}  // namespace
}  // namespace frank::experts
