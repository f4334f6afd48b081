#include "frank/experts/routing_trace.h"

#include <fmt/format.h>

#include <cstring>

#include "frank/core/error.h"

namespace frank::experts {
namespace {

// The 8 bytes that open every trace, and the 4 that open every step ("STEP" read as a
// little-endian u32): a step that does not start with them means the reader lost its place.
constexpr char kMagic[8] = {'F', 'R', 'K', 'R', 'O', 'U', 'T', 'E'};
constexpr uint32_t kStepMarker = 0x50455453u;

void put_u32(std::vector<unsigned char>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<unsigned char>(v >> (8 * i)));
}

uint32_t get_u32(const unsigned char* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

// The first duplicate id among a token's experts, or -1: a router never picks an expert twice for
// one token, so a repeat means a corrupt file or a recording bug.
int first_repeat(const uint16_t* ids, uint32_t top_k) {
  for (uint32_t i = 1; i < top_k; ++i)
    for (uint32_t j = 0; j < i; ++j)
      if (ids[i] == ids[j]) return static_cast<int>(i);
  return -1;
}

}  // namespace

const char* step_kind_name(StepKind kind) {
  switch (kind) {
    case StepKind::Decode:
      return "decode";
    case StepKind::Verify:
      return "verify";
    case StepKind::Prefill:
      return "prefill";
  }
  return "unknown";
}

void validate_trace_header(const TraceHeader& h, const std::string& what) {
  auto bad = [&](const std::string& m) { throw Error(fmt::format("{}: {}", what, m)); };
  if (h.n_layers == 0) bad("n_layers is 0");
  if (h.n_experts == 0 || h.n_experts > 65536) bad(fmt::format("n_experts {} is not in 1..65536", h.n_experts));
  if (h.top_k == 0 || h.top_k > h.n_experts)
    bad(fmt::format("top_k {} is not in 1..n_experts ({})", h.top_k, h.n_experts));
  if (h.flags & ~kTraceKnownFlags) bad(fmt::format("unknown flag bits 0x{:x}", h.flags & ~kTraceKnownFlags));
  if (h.model_fingerprint.size() > kTraceMaxFingerprintBytes)
    bad(fmt::format("model fingerprint of {} bytes exceeds {}", h.model_fingerprint.size(), kTraceMaxFingerprintBytes));
}

// ---- writer ----

TraceWriter::TraceWriter(std::string path, TraceHeader header) : path_(std::move(path)), header_(std::move(header)) {
  validate_trace_header(header_, fmt::format("routing trace '{}'", path_));
  out_.open(path_, std::ios::binary | std::ios::trunc);
  if (!out_) throw Error(fmt::format("cannot open routing trace '{}' for writing", path_));
  std::vector<unsigned char> bytes(kMagic, kMagic + sizeof kMagic);
  for (uint32_t v : {kTraceVersion, header_.flags, header_.n_layers, header_.n_experts, header_.top_k,
                     static_cast<uint32_t>(header_.model_fingerprint.size())})
    put_u32(bytes, v);
  bytes.insert(bytes.end(), header_.model_fingerprint.begin(), header_.model_fingerprint.end());
  out_.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!out_) throw Error(fmt::format("writing routing trace '{}' failed", path_));
}

TraceWriter::~TraceWriter() {
  if (out_.is_open()) out_.close();
}

void TraceWriter::write(const RoutingStep& step) {
  auto bad = [&](const std::string& m) {
    throw Error(fmt::format("routing trace '{}': step {}: {}", path_, steps_, m));
  };
  if (static_cast<uint32_t>(step.kind) >= kStepKindCount) bad("unknown step kind");
  if (step.layers.size() != header_.n_layers)
    bad(fmt::format("{} layers, the header says {}", step.layers.size(), header_.n_layers));
  std::vector<unsigned char> bytes;
  put_u32(bytes, kStepMarker);
  put_u32(bytes, static_cast<uint32_t>(step.kind));
  for (size_t l = 0; l < step.layers.size(); ++l) {
    const auto& ids = step.layers[l];
    if (ids.size() % header_.top_k != 0)
      bad(fmt::format("layer {}: {} expert ids is not a multiple of top_k {}", l, ids.size(), header_.top_k));
    const size_t n_tokens = ids.size() / header_.top_k;
    if (n_tokens > kTraceMaxTokensPerLayer) bad(fmt::format("layer {}: {} tokens exceeds the limit", l, n_tokens));
    for (size_t t = 0; t < n_tokens; ++t) {
      const uint16_t* token = ids.data() + t * header_.top_k;
      for (uint32_t j = 0; j < header_.top_k; ++j)
        if (token[j] >= header_.n_experts) bad(fmt::format("layer {}: expert {} out of range", l, token[j]));
      if (first_repeat(token, header_.top_k) >= 0) bad(fmt::format("layer {} token {}: an expert chosen twice", l, t));
    }
    put_u32(bytes, static_cast<uint32_t>(n_tokens));
    for (uint16_t id : ids) {
      bytes.push_back(static_cast<unsigned char>(id));
      bytes.push_back(static_cast<unsigned char>(id >> 8));
    }
  }
  out_.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  out_.flush();  // a killed recorder leaves every completed step on disk
  if (!out_) throw Error(fmt::format("writing routing trace '{}' failed", path_));
  ++steps_;
}

void TraceWriter::close() {
  out_.close();
  if (out_.fail()) throw Error(fmt::format("closing routing trace '{}' failed", path_));
}

// ---- reader ----

TraceReader::TraceReader(std::string path) : path_(std::move(path)) {
  in_.open(path_, std::ios::binary);
  if (!in_) throw Error(fmt::format("cannot open routing trace '{}'", path_));
  char magic[sizeof kMagic];
  read_exact(magic, sizeof magic, "the magic");
  if (std::memcmp(magic, kMagic, sizeof kMagic) != 0) fail("not a frank routing trace (bad magic)", 0);
  const uint64_t version_at = offset_;
  const uint32_t version = read_u32("the version");
  if (version != kTraceVersion)
    fail(fmt::format("unsupported version {} (this frank reads version {})", version, kTraceVersion), version_at);
  const uint64_t fields_at = offset_;
  header_.flags = read_u32("the flags");
  header_.n_layers = read_u32("n_layers");
  header_.n_experts = read_u32("n_experts");
  header_.top_k = read_u32("top_k");
  const uint32_t fingerprint_bytes = read_u32("the fingerprint length");
  if (fingerprint_bytes > kTraceMaxFingerprintBytes)
    fail(fmt::format("fingerprint length {} exceeds {}", fingerprint_bytes, kTraceMaxFingerprintBytes), offset_ - 4);
  header_.model_fingerprint.resize(fingerprint_bytes);
  read_exact(header_.model_fingerprint.data(), fingerprint_bytes, "the fingerprint");
  try {
    validate_trace_header(header_, "bad header");
  } catch (const Error& e) {
    fail(e.what(), fields_at);
  }
}

void TraceReader::fail(const std::string& message, uint64_t offset) const {
  throw Error(fmt::format("routing trace '{}': {} (at byte {})", path_, message, offset));
}

void TraceReader::read_exact(void* dst, size_t bytes, const char* what) {
  in_.read(static_cast<char*>(dst), static_cast<std::streamsize>(bytes));
  const auto got = static_cast<size_t>(in_.gcount());
  if (got != bytes)
    fail(fmt::format("truncated: {} needs {} bytes, the file ends after {}", what, bytes, got), offset_);
  offset_ += bytes;
}

uint32_t TraceReader::read_u32(const char* what) {
  unsigned char b[4];
  read_exact(b, 4, what);
  return get_u32(b);
}

bool TraceReader::next(RoutingStep& step) {
  if (in_.peek() == std::ifstream::traits_type::eof()) return false;
  const uint64_t step_at = offset_;
  if (read_u32("a step marker") != kStepMarker) fail("expected a step marker", step_at);
  const uint32_t kind = read_u32("the step kind");
  if (kind >= kStepKindCount) fail(fmt::format("unknown step kind {}", kind), offset_ - 4);
  step.kind = static_cast<StepKind>(kind);
  step.layers.resize(header_.n_layers);
  for (uint32_t l = 0; l < header_.n_layers; ++l) {
    const uint32_t n_tokens = read_u32("a token count");
    if (n_tokens > kTraceMaxTokensPerLayer)
      fail(fmt::format("layer {}: token count {} exceeds {}", l, n_tokens, kTraceMaxTokensPerLayer), offset_ - 4);
    const size_t n_ids = size_t{n_tokens} * header_.top_k;
    const uint64_t ids_at = offset_;
    buffer_.resize(n_ids * 2);
    read_exact(buffer_.data(), buffer_.size(), "expert ids");
    auto& ids = step.layers[l];
    ids.resize(n_ids);
    for (size_t i = 0; i < n_ids; ++i) {
      ids[i] = static_cast<uint16_t>(buffer_[2 * i] | buffer_[2 * i + 1] << 8);
      if (ids[i] >= header_.n_experts)
        fail(fmt::format("layer {}: expert {} out of range (n_experts {})", l, ids[i], header_.n_experts),
             ids_at + 2 * i);
    }
    for (size_t t = 0; t < n_tokens; ++t) {
      const int repeat = first_repeat(ids.data() + t * header_.top_k, header_.top_k);
      if (repeat >= 0)
        fail(fmt::format("layer {} token {}: expert {} chosen twice", l, t, ids[t * header_.top_k + repeat]),
             ids_at + 2 * (t * header_.top_k + repeat));
    }
  }
  return true;
}

RoutingTrace read_trace(const std::string& path) {
  TraceReader reader(path);
  RoutingTrace trace{path, reader.header(), {}};
  RoutingStep step;
  while (reader.next(step)) trace.steps.push_back(step);
  return trace;
}

void write_trace(const std::string& path, const RoutingTrace& trace) {
  TraceWriter writer(path, trace.header);
  for (const auto& step : trace.steps) writer.write(step);
  writer.close();
}

std::vector<RoutingTrace> read_traces(const std::vector<std::string>& paths) {
  if (paths.empty()) throw Error("no routing traces given");
  std::vector<RoutingTrace> traces;
  for (const auto& path : paths) {
    traces.push_back(read_trace(path));
    const TraceHeader& first = traces.front().header;
    const TraceHeader& h = traces.back().header;
    if (h.model_fingerprint != first.model_fingerprint || h.n_layers != first.n_layers ||
        h.n_experts != first.n_experts || h.top_k != first.top_k)
      throw Error(fmt::format("routing trace '{}' is for model '{}' ({}x{} top-{}) but '{}' is for '{}' ({}x{} top-{})",
                              path, h.model_fingerprint, h.n_layers, h.n_experts, h.top_k, paths.front(),
                              first.model_fingerprint, first.n_layers, first.n_experts, first.top_k));
  }
  return traces;
}

}  // namespace frank::experts
