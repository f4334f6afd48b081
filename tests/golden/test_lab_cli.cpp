// `frank lab register` and `frank lab analyze` as a user calls them: the printed design id is
// the SHA-256 of the --out file, the analysis JSON and HTML carry the verdict, bad input exits 1.
// Skipped while the binary has no `lab` subcommand (register_lab not yet wired into main.cpp).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "../unit/lab_test_util.h"
#include "run_frank.h"
#include "frank/core/sha256.h"
#include "frank/lab/design.h"
#include "frank/lab/registration.h"

namespace frank::lab {
namespace {

using frank::test::run_frank;

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class LabCli : public ::testing::Test {
 protected:
  void SetUp() override {
    json d = test::small_design(5);
    d["decision"] = {{"kind", "sign_test"}, {"alpha", 0.05}};
    test::write_text(dir / "design.json", d.dump(2));
    id = design_id(parse_design(d));
  }
  test::TempDir dir;
  std::string id;
};

TEST_F(LabCli, RegisterPrintsTheIdOfTheCanonicalDesign) {
  const auto r =
      run_frank(fmt::format("lab register {} --out {}", (dir / "design.json").string(), (dir / "c.json").string()));
  ASSERT_EQ(r.exit_code, 0) << r.output();
  EXPECT_THAT(r.output(), HasSubstr("design id     " + id));
  EXPECT_EQ(sha256_hex(read_text(dir / "c.json")), id);
  EXPECT_THAT(r.output(), HasSubstr("block   4:"));
  EXPECT_THAT(r.output(), HasSubstr("smallest p    sign test 0.03125 (5 blocks)"));
  EXPECT_THAT(r.output(), HasSubstr("give --baseline-rows"));
  // The registered file is itself a design with the same id.
  const auto again = run_frank("lab register " + (dir / "c.json").string());
  EXPECT_THAT(again.output(), HasSubstr("design id     " + id));
}

TEST_F(LabCli, RegisterWithEarlierRowsPrintsTheDetectableEffect) {
  test::write_text(dir / "earlier.csv",
                   "block,arm,value\n0,main,10\n0,main,10.2\n1,main,10.6\n1,main,10.4\n2,main,9.9\n");
  const auto r = run_frank(fmt::format("lab register {} --baseline-rows {}", (dir / "design.json").string(),
                                   (dir / "earlier.csv").string()));
  ASSERT_EQ(r.exit_code, 0) << r.output();
  EXPECT_THAT(r.output(), HasSubstr("earlier rows  5 rows, 3 starts"));
  EXPECT_THAT(r.output(), HasSubstr("detectable    an improvement of"));
}

TEST_F(LabCli, AnalyzeRowsWritesJson) {
  test::write_text(dir / "rows.csv",
                   "block,arm,value\n0,main,10\n0,fast,9\n1,main,10\n1,fast,9.5\n2,main,12\n2,fast,11\n"
                   "3,main,11\n3,fast,10\n4,main,10\n4,fast,9.9\n");
  const auto r = run_frank(fmt::format("lab analyze --design {} --rows {} --json {}", (dir / "design.json").string(),
                                   (dir / "rows.csv").string(), (dir / "a.json").string()));
  ASSERT_EQ(r.exit_code, 0) << r.output();
  EXPECT_THAT(r.output(), HasSubstr("verdict       adopt"));
  const json j = json::parse(read_text(dir / "a.json"));
  EXPECT_EQ(j["design_id"], id);
  EXPECT_EQ(j["verdict"], "adopt");
  EXPECT_EQ(j["sign_test_p"], 1.0 / 32);
}

TEST_F(LabCli, AnalyzeRowsWritesHtml) {
  test::write_text(dir / "rows.csv",
                   "block,arm,value,decode_s\n0,main,10,8\n0,fast,9,7\n1,main,10,8\n1,fast,9.5,7.5\n"
                   "2,main,12,9\n2,fast,11,8\n3,main,11,9\n3,fast,10,8\n4,main,10,8\n4,fast,9.9,7.9\n");
  const auto r = run_frank(fmt::format("lab analyze --design {} --rows {} --html {}", (dir / "design.json").string(),
                                   (dir / "rows.csv").string(), (dir / "report.html").string()));
  ASSERT_EQ(r.exit_code, 0) << r.output();
  ASSERT_TRUE(std::filesystem::exists(dir / "report.html"));
  const std::string html = read_text(dir / "report.html");
  EXPECT_THAT(html, StartsWith("<!DOCTYPE html>"));
  EXPECT_THAT(html, HasSubstr("<strong>adopt</strong>"));
  EXPECT_THAT(html, HasSubstr(id));
  EXPECT_THAT(html, HasSubstr("<h2>Time breakdown</h2>"));  // the CSV's decode_s column
}

TEST_F(LabCli, BadInputExitsWithOne) {
  const auto neither = run_frank("lab analyze --design " + (dir / "design.json").string());
  EXPECT_EQ(neither.exit_code, 1);
  EXPECT_THAT(neither.output(), HasSubstr("error: lab analyze: give --ledger FILE or --rows CSV"));
  test::write_text(dir / "ledger.jsonl", "{\"design\":\"" + std::string(64, '0') + "\"}\n");
  const auto foreign = run_frank(fmt::format("lab analyze --design {} --ledger {}", (dir / "design.json").string(),
                                         (dir / "ledger.jsonl").string()));
  EXPECT_EQ(foreign.exit_code, 1);
  EXPECT_THAT(foreign.output(), HasSubstr("not of the registered design " + id));
  test::write_text(dir / "bad.json", R"({"format": "frank-lab-design/1", "name": "x"})");
  const auto bad = run_frank("lab register " + (dir / "bad.json").string());
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(bad.output(), HasSubstr("error: design file"));
  EXPECT_THAT(bad.output(), HasSubstr("arms: missing"));
  EXPECT_NE(run_frank(fmt::format("lab analyze --design {} --rows a --ledger b", (dir / "design.json").string())).exit_code,
            0);
}

}  // namespace
}  // namespace frank::lab
