#pragma once
// Routing traces: for every forward step, per layer, the routed experts each token chose.
// Written by the engine (--record-routing) or the synthetic generator, read by `frank plan build`
// and `frank plan simulate`. The byte layout is specified in docs/routing-traces.md.
//
// Files are streamed: TraceWriter appends one step at a time, so a recording cut short still
// holds every complete step; TraceReader validates the header and then each step as it reads it,
// and reports a bad or truncated file as frank::Error naming the file and the byte offset.
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace frank::experts {

inline constexpr uint32_t kTraceVersion = 1;
// Header flag bits; every other bit must be zero (a newer writer's meaning we cannot know).
inline constexpr uint32_t kTraceFlagSynthetic = 1u << 0;  // made by the generator, not recorded from a model
inline constexpr uint32_t kTraceKnownFlags = kTraceFlagSynthetic;
// Limits that keep a corrupt count from allocating gigabytes before the truncation is noticed.
inline constexpr uint32_t kTraceMaxFingerprintBytes = 4096;
inline constexpr uint32_t kTraceMaxTokensPerLayer = 1u << 20;

struct TraceHeader {
  std::string model_fingerprint;  // see model_fingerprint.h
  uint32_t n_layers = 0;
  uint32_t n_experts = 0;  // ids are uint16, so at most 65536
  uint32_t top_k = 0;      // experts per token, distinct within a token
  uint32_t flags = 0;
};

// What the engine was doing in a step: the simulator reports generation steps (decode and
// verify) apart from prefill chunks, which the engine serves differently.
enum class StepKind : uint32_t { Decode = 0, Verify = 1, Prefill = 2 };
inline constexpr uint32_t kStepKindCount = 3;
const char* step_kind_name(StepKind kind);

// One forward step. layers[l] holds the chosen expert ids of layer l token-major: token t chose
// layers[l][t * top_k .. t * top_k + top_k - 1].
struct RoutingStep {
  StepKind kind = StepKind::Decode;
  std::vector<std::vector<uint16_t>> layers;
};

struct RoutingTrace {
  std::string source;  // the file it came from, for messages
  TraceHeader header;
  std::vector<RoutingStep> steps;
};

// Throws frank::Error (naming `what`) unless the header is usable: at least one layer and expert,
// at most 65536 experts, 1 <= top_k <= n_experts, only known flags, a bounded fingerprint.
void validate_trace_header(const TraceHeader& header, const std::string& what);

class TraceWriter {
 public:
  TraceWriter(std::string path, TraceHeader header);  // writes the header; throws frank::Error
  ~TraceWriter();                                     // closes without throwing; call close() to see errors
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  const TraceHeader& header() const { return header_; }
  // Appends one step; throws frank::Error if its shape or ids do not fit the header.
  void write(const RoutingStep& step);
  void close();

 private:
  std::string path_;
  TraceHeader header_;
  std::ofstream out_;
  uint64_t steps_ = 0;
};

class TraceReader {
 public:
  explicit TraceReader(std::string path);  // opens the file and validates its header
  const TraceHeader& header() const { return header_; }
  const std::string& path() const { return path_; }
  // Reads the next step into `step`; false at a clean end of file (after a complete step).
  bool next(RoutingStep& step);

 private:
  void read_exact(void* dst, size_t bytes, const char* what);
  uint32_t read_u32(const char* what);
  [[noreturn]] void fail(const std::string& message, uint64_t offset) const;

  std::string path_;
  std::ifstream in_;
  uint64_t offset_ = 0;  // bytes consumed so far
  TraceHeader header_;
  std::vector<unsigned char> buffer_;
};

RoutingTrace read_trace(const std::string& path);
void write_trace(const std::string& path, const RoutingTrace& trace);

// Reads several traces that must describe the same model (fingerprint and shape).
std::vector<RoutingTrace> read_traces(const std::vector<std::string>& paths);

}  // namespace frank::experts
