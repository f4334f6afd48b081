#include "frank/lab/html_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string_view>
#include <utility>

#include "frank/lab/report_text.h"
#include "frank/lab/svg_axis.h"

namespace frank::lab {
namespace {

// The runner's split of a draw's wall time, stacked in this order, and their colours.
constexpr std::array<const char*, 5> kBreakdownMetrics = {"decode_s", "cold_ttft_s", "warm_ttft_s", "tool_s",
                                                          "outside_s"};
constexpr std::array<const char*, 5> kBreakdownColors = {"#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3"};

// The baseline's markers are hollow and the treatment's filled, so the arms stay apart in grey
// print and for colour-blind readers.
constexpr const char* kStyle = R"(
body { font-family: system-ui, sans-serif; color: #222; max-width: 780px; margin: 2em auto; }
th, td { text-align: left; vertical-align: top; padding: 2px 12px 2px 0; }
th { white-space: nowrap; }
.verdict { font-size: 1.3em; }
.verdict-adopt { color: #1a7f37; } .verdict-reject { color: #b42318; } .verdict-inconclusive { color: #9a6700; }
svg { display: block; margin: 0.5em 0; }
svg text { font-size: 11px; fill: #333; }
.grid { stroke: #e3e3e3; }
.pair-link { stroke: #999; }
.pair-baseline { fill: #fff; stroke: #4c72b0; stroke-width: 2; }
.pair-treatment { fill: #dd8452; }
.key { display: inline-block; width: 8px; height: 8px; border-radius: 50%; margin: 0 4px 0 12px; }
.key-baseline { border: 2px solid #4c72b0; } .key-treatment { background: #dd8452; border: 2px solid #dd8452; }
.block-effect { fill: #4c72b0; }
.mean-effect { fill: #222; }
.effect-interval { fill: #222; fill-opacity: 0.2; stroke: #222; }
.zero-line { stroke: #444; }
.adopt-line { stroke: #1a7f37; stroke-dasharray: 6 3; } .reject-line { stroke: #b42318; stroke-dasharray: 2 3; }
.on-bar text { fill: #fff; }
.swatch { display: inline-block; width: 0.9em; height: 0.9em; vertical-align: middle; }
td.seconds { text-align: right; }
)";

// For text and attribute values alike.
std::string escape(std::string_view raw) {
  std::string out;
  for (const char c : raw) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

// An SVG's size and the margins around its plotting area; x positions in the block plots are
// slots of equal width, one per block.
struct Frame {
  double width = 720.0, height = 300.0;
  double left = 64.0, right = 16.0, top = 12.0, bottom = 40.0;

  double plot_width() const { return width - left - right; }
  double plot_height() const { return height - top - bottom; }
  double slot_x(size_t slot, size_t slots) const { return left + (double(slot) + 0.5) * plot_width() / double(slots); }
  double x(const AxisScale& axis, double value) const { return left + axis.fraction(value) * plot_width(); }
  double y(const AxisScale& axis, double value) const { return top + (1.0 - axis.fraction(value)) * plot_height(); }
};

// One element a line, so that the page's source stays readable.
template <typename... Args>
std::string element(fmt::format_string<Args...> format, Args&&... args) {
  return fmt::format(format, std::forward<Args>(args)...) + '\n';
}

std::string svg_open(const Frame& f, const std::string& label) {
  return element(R"(<svg xmlns="http://www.w3.org/2000/svg" width="{0}" height="{1}" viewBox="0 0 {0} {1}" role="img" )"
                 R"(aria-label="{2}">)",
                 f.width, f.height, escape(label));
}

std::string text(double x, double y, const char* anchor, const std::string& content) {
  return element(R"(<text x="{:.1f}" y="{:.1f}" text-anchor="{}">{}</text>)", x, y, anchor, escape(content));
}

std::string line(const char* css_class, double x1, double y1, double x2, double y2) {
  return element(R"(<line class="{}" x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}"/>)", css_class, x1, y1, x2, y2);
}

// A circle whose <title> shows its value when the mouse rests on it (plain SVG, no script).
std::string marker(const char* css_class, double x, double y, double radius, const std::string& tooltip) {
  return element(R"(<circle class="{}" cx="{:.1f}" cy="{:.1f}" r="{}"><title>{}</title></circle>)", css_class, x, y,
                 radius, escape(tooltip));
}

// Grid lines with tick labels on the left, and the axis title turned upright.
std::string y_axis(const Frame& f, const AxisScale& axis, const std::string& title) {
  std::string out;
  for (const double tick : axis.ticks()) {
    out += line("grid", f.left, f.y(axis, tick), f.width - f.right, f.y(axis, tick));
    out += text(f.left - 6.0, f.y(axis, tick) + 4.0, "end", axis.tick_label(tick));
  }
  const double middle = f.top + f.plot_height() / 2.0;
  // The raw string needs its own delimiter: the transform's ")" followed by a quote would end R"(...)".
  out += element(R"svg(<text x="14" y="{0:.1f}" text-anchor="middle" transform="rotate(-90 14 {0:.1f})">{1}</text>)svg",
                 middle, escape(title));
  return out;
}

// Block numbers under their slots: at most 25 labels, so that 50 blocks do not overlap.
std::string block_labels(const Frame& f, const std::vector<BlockEffect>& blocks, size_t slots) {
  const size_t stride = (blocks.size() + 24) / 25;
  std::string out;
  for (size_t i = 0; i < blocks.size(); i += stride)
    out += text(f.slot_x(i, slots), f.height - f.bottom + 16.0, "middle", std::to_string(blocks[i].block));
  const double blocks_middle = f.left + f.plot_width() * double(blocks.size()) / double(slots) / 2.0;
  out += text(blocks_middle, f.height - 6.0, "middle", "block");
  return out;
}

std::string paired_values_plot(const Design& d, const EffectSummary& s) {
  double lowest = std::numeric_limits<double>::infinity(), highest = -lowest;
  for (const BlockEffect& b : s.blocks) {
    lowest = std::min({lowest, b.baseline, b.treatment});
    highest = std::max({highest, b.baseline, b.treatment});
  }
  const AxisScale axis = nice_axis(lowest, highest);
  const std::string title = s.estimand == "as_measured" ? d.metric.name : d.metric.name + " (" + s.estimand + ")";
  const Frame f;
  std::string out = "<h2>Per-block paired values</h2>\n" + svg_open(f, "per-block values of " + title);
  out += y_axis(f, axis, title) + block_labels(f, s.blocks, s.blocks.size());
  for (size_t i = 0; i < s.blocks.size(); ++i) {
    const BlockEffect& b = s.blocks[i];
    const double x = f.slot_x(i, s.blocks.size());
    out += line("pair-link", x, f.y(axis, b.baseline), x, f.y(axis, b.treatment));
    out += marker("pair-baseline", x, f.y(axis, b.baseline), 4.0,
                  fmt::format("block {} {}: {:.6g}", b.block, d.baseline, b.baseline));
    out += marker("pair-treatment", x, f.y(axis, b.treatment), 4.0,
                  fmt::format("block {} {}: {:.6g}", b.block, d.treatment(), b.treatment));
  }
  out += "</svg>\n";
  out += element(
      R"(<p><span class="key key-baseline"></span>baseline {} <span class="key key-treatment"></span>treatment {})"
      R"( &mdash; each arm's mean over its draws in the block</p>)",
      escape(d.baseline), escape(d.treatment()));
  return out;
}

// A horizontal reference line of the effect plot, in percent of effect.
struct ReferenceLine {
  const char* css_class;
  double effect_percent;
  std::string label;
  bool label_at_left;  // the adopt and reject lines coincide by default: their labels go to opposite ends
};

std::string effect_plot(const Design& d, const EffectSummary& s) {
  std::vector<ReferenceLine> references = {{"zero-line", 0.0, "", false}};
  if (d.decision.kind == DecisionRule::Kind::Bands) {
    // The bands are improvements; improvement() is its own inverse, so it also turns them into effects.
    const double adopt_at = d.decision.adopt_if_lower_at_least * d.decision.expected_improvement;
    const double reject_below = d.decision.reject_if_upper_below * d.decision.expected_improvement;
    references.push_back({"adopt-line", 100.0 * improvement(adopt_at, d.metric.better),
                          "adopt line: improvement " + signed_percent(adopt_at), false});
    references.push_back({"reject-line", 100.0 * improvement(reject_below, d.metric.better),
                          "reject line: improvement " + signed_percent(reject_below), true});
  }
  const bool has_interval = !std::isnan(s.ci95.lower);
  std::vector<double> shown;
  for (const BlockEffect& b : s.blocks) shown.push_back(100.0 * b.effect);
  for (const ReferenceLine& r : references) shown.push_back(r.effect_percent);
  if (has_interval) shown.insert(shown.end(), {100.0 * s.ci95.lower, 100.0 * s.ci95.upper});
  const auto [lowest, highest] = std::minmax_element(shown.begin(), shown.end());
  const AxisScale axis = nice_axis(*lowest, *highest);
  const Frame f;
  const size_t slots = s.blocks.size() + 2;  // the blocks, a gap, the mean
  const std::string title = fmt::format("effect, % ({} is better)", to_string(d.metric.better));
  std::string out = "<h2>Effect with interval</h2>\n" + svg_open(f, "per-block effects and the mean effect");
  out += y_axis(f, axis, title) + block_labels(f, s.blocks, slots);
  for (const ReferenceLine& r : references) {
    const double y = f.y(axis, r.effect_percent);
    out += line(r.css_class, f.left, y, f.width - f.right, y);
    if (!r.label.empty())
      out += r.label_at_left ? text(f.left + 4.0, y - 4.0, "start", r.label)
                             : text(f.width - f.right, y - 4.0, "end", r.label);
  }
  for (size_t i = 0; i < s.blocks.size(); ++i)
    out += marker("block-effect", f.slot_x(i, slots), f.y(axis, 100.0 * s.blocks[i].effect), 3.5,
                  fmt::format("block {}: {}", s.blocks[i].block, signed_percent(s.blocks[i].effect)));
  const double mean_x = f.slot_x(slots - 1, slots);
  if (has_interval) {
    const double top = f.y(axis, 100.0 * s.ci95.upper), bottom = f.y(axis, 100.0 * s.ci95.lower);
    out += element(R"(<rect class="effect-interval" x="{:.1f}" y="{:.1f}" width="10" height="{:.1f}"/>)", mean_x - 5.0,
                   top, bottom - top);
  }
  out += marker("mean-effect", mean_x, f.y(axis, 100.0 * s.mean_effect), 4.5, "mean effect " + mean_effect_text(s));
  out += text(mean_x, f.height - f.bottom + 16.0, "middle", "mean");
  out +=
      "</svg>\n<p>Dots: each block's effect, treatment / baseline - 1. Bar: the 95% interval of the mean "
      "effect.</p>\n";
  return out;
}

// Mean seconds per breakdown metric and arm, over the arm's rows that carry the metric.
struct Breakdown {
  std::vector<std::string> metrics;          // those present in any row, in kBreakdownMetrics order
  std::vector<std::vector<double>> seconds;  // [arm][metric]; NaN where the arm's rows lack it
};

Breakdown time_breakdown(const std::vector<std::string>& arms, const std::vector<Row>& rows) {
  Breakdown b;
  for (const char* metric : kBreakdownMetrics)
    if (std::any_of(rows.begin(), rows.end(), [&](const Row& r) { return r.metrics.contains(metric); }))
      b.metrics.push_back(metric);
  for (const std::string& arm : arms) {
    std::vector<double>& means = b.seconds.emplace_back();
    for (const std::string& metric : b.metrics) {
      double sum = 0.0;
      int64_t count = 0;
      for (const Row& r : rows) {
        if (r.arm != arm || !r.metrics.contains(metric)) continue;
        sum += r.metrics.at(metric);
        ++count;
      }
      means.push_back(count ? sum / double(count) : std::numeric_limits<double>::quiet_NaN());
    }
  }
  return b;
}

std::string seconds_text(double seconds) { return std::isnan(seconds) ? "-" : fmt::format("{:.4g}", seconds); }

std::string breakdown_plot(const Design& d, const std::vector<Row>& rows) {
  const std::vector<std::string> arms = {d.baseline, d.treatment()};
  const Breakdown b = time_breakdown(arms, rows);
  if (b.metrics.empty()) return "";
  std::vector<double> totals;
  for (const auto& means : b.seconds) {
    double total = 0.0;
    for (const double m : means) total += std::isnan(m) ? 0.0 : m;
    totals.push_back(total);
  }
  const AxisScale axis = nice_axis(0.0, *std::max_element(totals.begin(), totals.end()));
  constexpr double kBar = 28.0, kGap = 16.0;
  const Frame f{.height = 12.0 + 2.0 * (kBar + kGap) + 36.0, .left = 120.0, .right = 60.0, .bottom = 36.0};
  std::string out = "<h2>Time breakdown</h2>\n" + svg_open(f, "mean time breakdown per arm");
  for (const double tick : axis.ticks()) {
    out += line("grid", f.x(axis, tick), f.top, f.x(axis, tick), f.height - f.bottom);
    out += text(f.x(axis, tick), f.height - f.bottom + 14.0, "middle", axis.tick_label(tick));
  }
  out += text(f.left + f.plot_width() / 2.0, f.height - 4.0, "middle", "seconds, mean over the arm's rows");
  std::string labels_on_bars;  // seconds written on the segments wide enough for them, in white
  for (size_t arm = 0; arm < arms.size(); ++arm) {
    const double y = f.top + kGap / 2.0 + double(arm) * (kBar + kGap);
    out += text(f.left - 8.0, y + kBar / 2.0 + 4.0, "end", arms[arm]);
    double start = 0.0;
    for (size_t m = 0; m < b.metrics.size(); ++m) {
      const double seconds = b.seconds[arm][m];
      if (std::isnan(seconds)) continue;
      const double x = f.x(axis, start), width = f.x(axis, start + seconds) - x;
      out += element(R"(<rect class="breakdown-segment" x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{}" fill="{}">)"
                     R"(<title>{} {}: {} s</title></rect>)",
                     x, y, width, kBar, kBreakdownColors[m], escape(arms[arm]), b.metrics[m], seconds_text(seconds));
      if (width >= 40.0) labels_on_bars += text(x + width / 2.0, y + kBar / 2.0 + 4.0, "middle", seconds_text(seconds));
      start += seconds;
    }
    out += text(f.x(axis, start) + 6.0, y + kBar / 2.0 + 4.0, "start", seconds_text(totals[arm]) + " s");
  }
  out += "<g class=\"on-bar\">\n" + labels_on_bars + "</g>\n</svg>\n";
  // The legend doubles as the table of the seconds each segment stands for.
  out += fmt::format("<table>\n<tr><th></th><th>mean seconds</th><th>{}</th><th>{}</th></tr>\n", escape(arms[0]),
                     escape(arms[1]));
  for (size_t m = 0; m < b.metrics.size(); ++m)
    out += element(R"(<tr><td><span class="swatch" style="background: {}"></span></td><td>{}</td>)"
                   R"(<td class="seconds">{}</td><td class="seconds">{}</td></tr>)",
                   kBreakdownColors[m], b.metrics[m], seconds_text(b.seconds[0][m]), seconds_text(b.seconds[1][m]));
  out += element(R"(<tr><td></td><th>total</th><td class="seconds">{}</td><td class="seconds">{}</td></tr>)",
                 seconds_text(totals[0]), seconds_text(totals[1]));
  out += "</table>\n";
  return out;
}

std::string summary_table(const Design& d, const Analysis& a) {
  std::string out = "<table>\n";
  auto row = [&](const std::string& name, const std::string& value_html) {
    out += fmt::format("<tr><th>{}</th><td>{}</td></tr>\n", escape(name), value_html);
  };
  row("design id", "<code>" + escape(a.design_id) + "</code>");
  row("arms", escape(fmt::format("baseline {}, treatment {}", d.baseline, d.treatment())));
  row("metric", escape(fmt::format("{} ({} is better), estimand {}", d.metric.name, to_string(d.metric.better),
                                   a.primary.estimand)));
  row("blocks", escape(fmt::format("{} analysed of {} registered", a.primary.blocks.size(), d.blocks)));
  row("rule", escape(fmt::format("{}: {} ({})", rule_text(d.decision), to_string(a.rule.verdict), a.rule.reason)));
  row("mean effect", escape(mean_effect_text(a.primary)));
  row("sign test", escape(sign_test_text(a.primary.sign)));
  row("permutation", escape(permutation_text(a.primary.permutation)));
  if (a.drift) row("drift guard", escape(drift_text(*a.drift)));
  for (const QualityCheck& q : a.quality) row("quality guard " + q.guard.metric, escape(quality_text(q)));
  if (a.secondary)
    row(fmt::format("secondary estimand {} (reported, not decided on)", a.secondary->estimand),
        escape(mean_effect_text(*a.secondary)));
  std::string warnings;
  for (const std::string& w : a.warnings) warnings += "<li>" + escape(w) + "</li>\n";
  row("warnings", warnings.empty() ? "none" : "<ul>\n" + warnings + "</ul>");
  return out + "</table>\n";
}

}  // namespace

std::string analysis_html(const Design& d, const Analysis& a, const std::vector<Row>& rows) {
  const char* verdict = to_string(a.verdict.verdict);
  std::string out = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  out += fmt::format("<title>{} &ndash; frank lab analysis</title>\n<style>{}</style>\n</head>\n<body>\n",
                     escape(d.name), kStyle);
  out += fmt::format("<h1>{}</h1>\n", escape(d.name));
  out += element(R"(<p class="verdict verdict-{0}"><strong>{0}</strong> &ndash; {1}</p>)", verdict,
                 escape(a.verdict.reason));
  out += summary_table(d, a);
  out += paired_values_plot(d, a.primary) + effect_plot(d, a.primary) + breakdown_plot(d, rows);
  return out + "</body>\n</html>\n";
}

}  // namespace frank::lab
