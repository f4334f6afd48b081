// Metrics::set_total (server/metrics.h): a counter kept elsewhere (the GPU expert cache's) is
// exported as its running total, rendered as a Prometheus counter, and may never go down.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "frank/core/error.h"
#include "frank/server/metrics.h"

namespace frank::server {
namespace {

TEST(MetricsTotals, ARunningTotalIsRenderedAsACounterAndNeverDecreases) {
  Metrics m;
  m.declare_counter("frank_expert_cache_fills_total", "Experts copied into GPU cache slots");
  m.set_total("frank_expert_cache_fills_total", 7);
  m.set_total("frank_expert_cache_fills_total", 12);  // a later refresh: the new total, not 19
  const std::string text = m.render();
  EXPECT_THAT(text, ::testing::HasSubstr("# TYPE frank_expert_cache_fills_total counter\n"));
  EXPECT_THAT(text, ::testing::HasSubstr("\nfrank_expert_cache_fills_total 12\n"));
  EXPECT_THROW(m.set_total("frank_expert_cache_fills_total", 11), Error);
}

}  // namespace
}  // namespace frank::server
