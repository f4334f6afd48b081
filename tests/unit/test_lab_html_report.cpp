// The HTML report of an analysis: a self-contained page whose header carries the verdict and the
// statistics, and whose SVG plots have one marker per block and arm, the effect interval, the
// bands' lines on the right side of zero, and the time breakdown only when the rows carry it.
// Also the "nice number" axis scaling the plots use.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>

#include "frank/lab/analysis.h"
#include "frank/lab/design.h"
#include "frank/lab/html_report.h"
#include "frank/lab/registration.h"
#include "frank/lab/svg_axis.h"
#include "lab_test_util.h"

namespace frank::lab {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + needle.size())) ++n;
  return n;
}

// The y coordinate of the first <line> with this class (the effect plot's horizontal lines).
double line_y(const std::string& html, const std::string& css_class) {
  std::smatch m;
  const std::regex pattern("<line class=\"" + css_class + "\" x1=\"[-0-9.]+\" y1=\"([-0-9.]+)\"");
  if (!std::regex_search(html, m, pattern)) throw std::runtime_error("no line of class " + css_class);
  return std::stod(m[1]);
}

std::string report(const json& design_json, const std::vector<Row>& rows) {
  const Design d = parse_design(design_json);
  return analysis_html(d, analyze(d, design_id(d), rows), rows);
}

// Five blocks, the treatment faster in each: the sign test adopts with p = 1/32.
std::vector<Row> five_faster_blocks() { return test::paired_rows({{10, 9}, {10, 9.5}, {12, 11}, {11, 10}, {10, 9.9}}); }

json sign_test_design() {
  json d = test::small_design(5);
  d["decision"] = {{"kind", "sign_test"}, {"alpha", 0.05}};
  return d;
}

TEST(LabHtmlReport, HeaderAndPlotsOfASignTestDesign) {
  const Design d = parse_design(sign_test_design());
  const std::string id = design_id(d);
  const auto rows = five_faster_blocks();
  const std::string html = analysis_html(d, analyze(d, id, rows), rows);
  EXPECT_THAT(html, StartsWith("<!DOCTYPE html>\n"));
  EXPECT_THAT(html, HasSubstr("</body>\n</html>\n"));
  EXPECT_EQ(count(html, "<svg "), 2u);  // paired values, effect; no breakdown metrics in these rows
  EXPECT_EQ(count(html, "</svg>"), 2u);
  EXPECT_THAT(html, HasSubstr(R"(<p class="verdict verdict-adopt"><strong>adopt</strong>)"));
  EXPECT_THAT(html, HasSubstr("<code>" + id + "</code>"));
  EXPECT_THAT(html, HasSubstr("time_s (lower is better), estimand as_measured"));
  EXPECT_THAT(html, HasSubstr("sign test, alpha 0.05: adopt (sign test p = 0.03125 &lt;= alpha = 0.05 (better))"));
  EXPECT_THAT(html, HasSubstr("5 better, 0 worse, 0 tied: p = 0.03125 (one-sided, better)"));
  EXPECT_THAT(html, HasSubstr("(one-sided, better; exact over 32 assignments)"));
  EXPECT_THAT(html, HasSubstr("<th>warnings</th><td>none</td>"));
  // One paired marker per block and arm, one effect dot per block, the mean with its interval.
  EXPECT_EQ(count(html, R"(class="pair-baseline")"), 5u);
  EXPECT_EQ(count(html, R"(class="pair-treatment")"), 5u);
  EXPECT_EQ(count(html, R"(class="pair-link")"), 5u);
  EXPECT_EQ(count(html, R"(class="block-effect")"), 5u);
  EXPECT_EQ(count(html, R"(class="mean-effect")"), 1u);
  EXPECT_EQ(count(html, R"(<rect class="effect-interval")"), 1u);
  EXPECT_EQ(count(html, R"(class="zero-line")"), 1u);
  EXPECT_THAT(html, HasSubstr("<title>block 2 main: 12</title>"));
  EXPECT_THAT(html, HasSubstr("<title>block 0: -10.00%</title>"));
  EXPECT_THAT(html, Not(HasSubstr(R"(class="adopt-line")")));  // the bands' lines belong to the bands rule
  EXPECT_THAT(html, Not(HasSubstr("Time breakdown")));
  // Self-contained: no script, nothing loaded from elsewhere.
  EXPECT_THAT(html, Not(HasSubstr("<script")));
  EXPECT_THAT(html, Not(HasSubstr("src=")));
  EXPECT_THAT(html, Not(HasSubstr("href=")));
}

TEST(LabHtmlReport, EscapesNamesAndReasons) {
  json dj = sign_test_design();
  dj["name"] = "fast & \"loose\"";
  dj["metric"]["name"] = "<script>alert(1)</script>";
  auto rows = five_faster_blocks();
  for (Row& r : rows) r.metrics = {{"<script>alert(1)</script>", r.metrics.at("time_s")}};
  const std::string html = report(dj, rows);
  EXPECT_THAT(html, Not(HasSubstr("<script>")));
  EXPECT_THAT(html, HasSubstr("&lt;script&gt;alert(1)&lt;/script&gt; (lower is better)"));
  EXPECT_THAT(html, HasSubstr("<h1>fast &amp; &quot;loose&quot;</h1>"));
}

TEST(LabHtmlReport, BandsLinesLieOnTheImprovingSideOfZero) {
  json dj = test::small_design(4);
  dj["decision"] = {{"kind", "bands"},
                    {"expected_improvement", 0.1},
                    {"adopt_if_lower_at_least", 0.5},
                    {"reject_if_upper_below", 0.25}};
  const auto rows = test::paired_rows({{10, 9}, {10, 8.8}, {10, 9.2}, {20, 18}});
  const std::string lower_better = report(dj, rows);
  EXPECT_THAT(lower_better, HasSubstr("adopt line: improvement +5.00%"));
  EXPECT_THAT(lower_better, HasSubstr("reject line: improvement +2.50%"));
  // SVG y grows downwards: an improvement of a lower-is-better metric is a negative effect, below zero.
  EXPECT_GT(line_y(lower_better, "adopt-line"), line_y(lower_better, "reject-line"));
  EXPECT_GT(line_y(lower_better, "reject-line"), line_y(lower_better, "zero-line"));
  dj["metric"]["better"] = "higher";
  const std::string higher_better = report(dj, rows);
  EXPECT_LT(line_y(higher_better, "adopt-line"), line_y(higher_better, "reject-line"));
  EXPECT_LT(line_y(higher_better, "reject-line"), line_y(higher_better, "zero-line"));
}

TEST(LabHtmlReport, TimeBreakdownOnlyWhenTheRowsCarryIt) {
  auto rows = five_faster_blocks();
  for (Row& r : rows) {
    const bool baseline = r.arm == "main";
    r.metrics["decode_s"] = baseline ? 8.0 : 7.0;
    r.metrics["cold_ttft_s"] = baseline ? 1.5 : 1.25;
  }
  rows[0].metrics["decode_s"] = 9.0;  // main's decode_s: (9 + 8 * 4) / 5 = 8.2
  const std::string html = report(sign_test_design(), rows);
  EXPECT_THAT(html, HasSubstr("<h2>Time breakdown</h2>"));
  EXPECT_EQ(count(html, "<svg "), 3u);
  EXPECT_EQ(count(html, "</svg>"), 3u);
  EXPECT_EQ(count(html, R"(class="breakdown-segment")"), 4u);  // two metrics, two arms
  EXPECT_THAT(html, HasSubstr("<title>main decode_s: 8.2 s</title>"));
  EXPECT_THAT(html, HasSubstr(R"(<td>cold_ttft_s</td><td class="seconds">1.5</td><td class="seconds">1.25</td>)"));
  EXPECT_THAT(html, HasSubstr(R"(<th>total</th><td class="seconds">9.7</td><td class="seconds">8.25</td>)"));
  EXPECT_THAT(html, Not(HasSubstr("warm_ttft_s")));  // absent metrics get no segment and no legend entry
}

TEST(LabHtmlReport, SecondaryEstimandInTheHeader) {
  json dj = test::small_design(4);
  dj["covariate"] = {{"name", "tps"}, {"reference", 2.0}, {"slope", 0.0}, {"estimand", "end_to_end"}};
  auto rows = test::paired_rows({{10, 9}, {10, 8.8}, {10, 9.2}, {20, 18}});
  for (Row& r : rows) r.metrics["tps"] = 2.0;
  const std::string html = report(dj, rows);
  EXPECT_THAT(html, HasSubstr("<th>secondary estimand fixed_covariate (reported, not decided on)</th>"));
  EXPECT_THAT(html, HasSubstr("<td>-10.00%  95% CI [-12.60%, -7.40%] (t-interval over 4 blocks)</td>"));
  EXPECT_THAT(html, HasSubstr("time_s (end_to_end)"));  // the paired plot names the estimand it shows
}

TEST(LabHtmlReport, OneBlockHasNoIntervalAndFiftyBlocksAllTheirMarkers) {
  const std::string one = report(test::small_design(1), test::paired_rows({{10, 9}}));
  EXPECT_THAT(one, HasSubstr("no interval (one block)"));
  EXPECT_THAT(one, Not(HasSubstr("<rect class=\"effect-interval\"")));
  EXPECT_EQ(count(one, R"(class="mean-effect")"), 1u);

  std::vector<std::pair<double, double>> pairs;
  for (int b = 0; b < 50; ++b) pairs.push_back({10.0 + b % 7, 9.5 + b % 5});
  const std::string fifty = report(test::small_design(50), test::paired_rows(pairs));
  EXPECT_EQ(count(fifty, R"(class="pair-baseline")"), 50u);
  EXPECT_EQ(count(fifty, R"(class="pair-treatment")"), 50u);
  EXPECT_EQ(count(fifty, R"(class="block-effect")"), 50u);
  EXPECT_THAT(fifty, HasSubstr(">48</text>"));  // every second block labelled
  EXPECT_THAT(fifty, Not(HasSubstr(">49</text>")));
}

TEST(LabSvgAxis, NiceTicks) {
  const AxisScale axis = nice_axis(0.037, 1.025);
  EXPECT_DOUBLE_EQ(axis.step, 0.2);
  std::vector<std::string> labels;
  for (const double tick : axis.ticks()) labels.push_back(axis.tick_label(tick));
  EXPECT_THAT(labels, ElementsAre("0.0", "0.2", "0.4", "0.6", "0.8", "1.0", "1.2"));
  EXPECT_DOUBLE_EQ(axis.fraction(0.6), 0.5);
  const AxisScale effects = nice_axis(-12.6, 3.0);  // percent
  EXPECT_EQ(effects.step, 5.0);
  EXPECT_EQ(effects.lower, -15.0);
  EXPECT_EQ(effects.upper, 5.0);
  EXPECT_EQ(effects.tick_label(-10.0), "-10");
  // A single value still gets an axis around it; ticks near zero print as 0, never -0.
  const AxisScale flat = nice_axis(10.0, 10.0);
  EXPECT_LT(flat.lower, 10.0);
  EXPECT_GT(flat.upper, 10.0);
  const AxisScale around_zero = nice_axis(-0.3, 0.3);
  EXPECT_THAT(around_zero.ticks(), ::testing::Contains(0.0));
  for (const double tick : around_zero.ticks()) EXPECT_NE(around_zero.tick_label(tick), "-0.0");
}

}  // namespace
}  // namespace frank::lab
