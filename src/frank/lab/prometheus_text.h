#pragma once
// Reads Prometheus' text exposition format (what GET /metrics returns) into numbers per series,
// so the lab can record an engine's own counters before and after a draw. Series keep their
// labels as written: `frank_requests_total{outcome="stop"}`.
#include <map>
#include <string>

namespace frank::lab {

using MetricSamples = std::map<std::string, double>;

// Comment and blank lines are skipped; a line that is not `series value [timestamp]` is ignored
// (engines add their own extensions), so this never throws.
MetricSamples parse_prometheus_text(const std::string& text);

// after - before for every series in `after` that is a counter by name (_total, _count, _sum),
// keeping only those that changed.
MetricSamples counter_deltas(const MetricSamples& before, const MetricSamples& after);

// The value of a series, summed over every label set of that metric name (0 if absent).
double metric_sum(const MetricSamples& samples, const std::string& name);

}  // namespace frank::lab
