#include "frank/server/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "frank/core/error.h"

namespace frank::server {
namespace {

std::string escape_label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

std::string label_text(const Metrics::Labels& labels, const std::string& extra = "") {
  std::string s;
  for (const auto& [k, v] : labels) s += fmt::format("{}{}=\"{}\"", s.empty() ? "" : ",", k, escape_label(v));
  if (!extra.empty()) s += (s.empty() ? "" : ",") + extra;
  return s.empty() ? "" : "{" + s + "}";
}

std::string number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", v);
}

}  // namespace

Metrics::Family& Metrics::family(const std::string& name, Kind kind) {
  auto it = families_.find(name);
  if (it == families_.end() || it->second.kind != kind) throw Error("metric '" + name + "' is not declared with that type");
  return it->second;
}

void Metrics::declare_counter(const std::string& name, const std::string& help) {
  std::lock_guard lock(mutex_);
  families_[name] = Family{Kind::Counter, help, {}, {}};
}

void Metrics::declare_gauge(const std::string& name, const std::string& help) {
  std::lock_guard lock(mutex_);
  families_[name] = Family{Kind::Gauge, help, {}, {}};
}

void Metrics::declare_histogram(const std::string& name, const std::string& help, std::vector<double> buckets) {
  std::lock_guard lock(mutex_);
  std::sort(buckets.begin(), buckets.end());
  families_[name] = Family{Kind::Histogram, help, std::move(buckets), {}};
}

void Metrics::add(const std::string& name, double v, const Labels& labels) {
  std::lock_guard lock(mutex_);
  if (v < 0) throw Error("counter '" + name + "' cannot decrease");
  family(name, Kind::Counter).series[labels].value += v;
}

void Metrics::set(const std::string& name, double v, const Labels& labels) {
  std::lock_guard lock(mutex_);
  family(name, Kind::Gauge).series[labels].value = v;
}

void Metrics::set_total(const std::string& name, double v, const Labels& labels) {
  std::lock_guard lock(mutex_);
  double& total = family(name, Kind::Counter).series[labels].value;
  if (v < total) throw Error("counter '" + name + "' cannot decrease");
  total = v;
}

void Metrics::observe(const std::string& name, double v, const Labels& labels) {
  std::lock_guard lock(mutex_);
  auto& f = family(name, Kind::Histogram);
  auto& s = f.series[labels];
  s.bucket_counts.resize(f.buckets.size());
  for (size_t i = 0; i < f.buckets.size(); ++i)
    if (v <= f.buckets[i]) ++s.bucket_counts[i];
  s.sum += v;
  ++s.count;
}

std::string Metrics::render() const {
  std::lock_guard lock(mutex_);
  std::string out;
  for (const auto& [name, f] : families_) {
    const char* type = f.kind == Kind::Counter ? "counter" : f.kind == Kind::Gauge ? "gauge" : "histogram";
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, f.help, name, type);
    for (const auto& [labels, s] : f.series) {
      if (f.kind != Kind::Histogram) {
        out += fmt::format("{}{} {}\n", name, label_text(labels), number(s.value));
        continue;
      }
      // bucket_counts are per-bucket "v <= bound" counts, which are already cumulative.
      for (size_t i = 0; i < f.buckets.size(); ++i)
        out += fmt::format("{}_bucket{} {}\n", name, label_text(labels, fmt::format("le=\"{}\"", number(f.buckets[i]))),
                           s.bucket_counts.empty() ? 0 : s.bucket_counts[i]);
      out += fmt::format("{}_bucket{} {}\n", name, label_text(labels, "le=\"+Inf\""), s.count);
      out += fmt::format("{}_sum{} {}\n{}_count{} {}\n", name, label_text(labels), number(s.sum), name,
                         label_text(labels), s.count);
    }
  }
  return out;
}

}  // namespace frank::server
