#include "frank/lab/prometheus_text.h"

#include <charconv>
#include <cmath>
#include <sstream>

namespace frank::lab {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string metric_name(const std::string& series) { return series.substr(0, series.find('{')); }

bool parse_number(const std::string& text, double& value) {
  if (text == "+Inf" || text == "Inf") value = INFINITY;
  else if (text == "-Inf") value = -INFINITY;
  else if (text == "NaN") value = NAN;
  else {
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    return ec == std::errc() && end == text.data() + text.size();
  }
  return true;
}

}  // namespace

MetricSamples parse_prometheus_text(const std::string& text) {
  MetricSamples samples;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    // The series ends at the first space outside the label braces (label values may hold spaces).
    size_t end = 0;
    bool in_labels = false, in_quotes = false;
    for (; end < line.size(); ++end) {
      const char c = line[end];
      if (in_quotes) {
        if (c == '\\') ++end;
        else if (c == '"') in_quotes = false;
      } else if (c == '"' && in_labels) in_quotes = true;
      else if (c == '{') in_labels = true;
      else if (c == '}') in_labels = false;
      else if (c == ' ' && !in_labels) break;
    }
    if (end == 0 || end >= line.size()) continue;
    std::istringstream rest(line.substr(end));
    std::string value_text;
    rest >> value_text;
    double value = 0;
    if (parse_number(value_text, value)) samples[line.substr(0, end)] = value;
  }
  return samples;
}

MetricSamples counter_deltas(const MetricSamples& before, const MetricSamples& after) {
  MetricSamples deltas;
  for (const auto& [series, value] : after) {
    const std::string name = metric_name(series);
    if (!ends_with(name, "_total") && !ends_with(name, "_count") && !ends_with(name, "_sum")) continue;
    const auto it = before.find(series);
    const double delta = value - (it == before.end() ? 0.0 : it->second);
    if (delta != 0) deltas[series] = delta;
  }
  return deltas;
}

double metric_sum(const MetricSamples& samples, const std::string& name) {
  double sum = 0;
  for (const auto& [series, value] : samples)
    if (metric_name(series) == name) sum += value;
  return sum;
}

}  // namespace frank::lab
