#pragma once
// Prometheus metrics of the server: counters, gauges and histograms with fixed label sets,
// rendered in the Prometheus text exposition format (version 0.0.4). Thread-safe.
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace frank::server {

class Metrics {
 public:
  using Labels = std::map<std::string, std::string>;

  // Declares a metric once; `buckets` only for histograms (upper bounds, ascending).
  void declare_counter(const std::string& name, const std::string& help);
  void declare_gauge(const std::string& name, const std::string& help);
  void declare_histogram(const std::string& name, const std::string& help, std::vector<double> buckets);

  void add(const std::string& name, double value, const Labels& labels = {});  // counters (value >= 0)
  void set(const std::string& name, double value, const Labels& labels = {});  // gauges
  // Counters kept elsewhere (a backend's): their running total, which never goes down.
  void set_total(const std::string& name, double value, const Labels& labels = {});
  void observe(const std::string& name, double value, const Labels& labels = {});  // histograms

  std::string render() const;

 private:
  enum class Kind { Counter, Gauge, Histogram };
  struct Series {
    double value = 0;                   // counter / gauge
    std::vector<uint64_t> bucket_counts;  // histogram, cumulative at render time
    double sum = 0;
    uint64_t count = 0;
  };
  struct Family {
    Kind kind;
    std::string help;
    std::vector<double> buckets;
    std::map<Labels, Series> series;
  };
  Family& family(const std::string& name, Kind kind);

  mutable std::mutex mutex_;
  std::map<std::string, Family> families_;
};

}  // namespace frank::server
