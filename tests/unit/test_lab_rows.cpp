// Reading rows (CSV and the JSONL ledger) and checking them against the design: rows the design
// cannot have produced are errors naming file and line; departures are reported as deviations.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "frank/core/error.h"
#include "frank/lab/design.h"
#include "frank/lab/ledger.h"
#include "frank/lab/registration.h"
#include "frank/lab/row_checks.h"
#include "frank/lab/rows_csv.h"
#include "lab_test_util.h"

namespace frank::lab {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

template <class F>
void expect_error(F&& f, const std::string& fragment) {
  try {
    f();
    ADD_FAILURE() << "expected an error mentioning '" << fragment << "'";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(fragment));
  }
}

TEST(LabRows, CsvWithOptionalColumns) {
  test::TempDir dir;
  test::write_text(dir / "rows.csv",
                   "\nblock, arm ,value,covariate,passed\n0,main,10.5,2.5,1\n0,fast,9.5,2.25,1\n\n0,fast,9.25,2,0\n");
  const auto rows = read_rows_csv(dir / "rows.csv", "time_s", "tokens_per_step");
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[2].arm, "fast");
  EXPECT_EQ(rows[2].draw, 1);  // numbered per block, arm and start in file order
  EXPECT_EQ(rows[1].draw, 0);
  EXPECT_EQ(rows[0].metrics.at("time_s"), 10.5);
  EXPECT_EQ(rows[1].metrics.at("tokens_per_step"), 2.25);
  EXPECT_EQ(rows[2].metrics.at("passed"), 0.0);
  EXPECT_THAT(rows[2].origin, HasSubstr("rows.csv:6"));

  test::write_text(dir / "starts.csv", "arm,start,draw,block,value\nmain,1,4,2,3e1\n");
  const auto started = read_rows_csv(dir / "starts.csv", "time_s", "");
  EXPECT_EQ(started[0].block, 2);
  EXPECT_EQ(started[0].start, 1);
  EXPECT_EQ(started[0].draw, 4);
  EXPECT_EQ(started[0].metrics.at("time_s"), 30.0);
}

TEST(LabRows, BadCsvNamesFileAndLine) {
  test::TempDir dir;
  auto read = [&](const std::string& text, const std::string& covariate = "") {
    test::write_text(dir / "r.csv", text);
    return read_rows_csv(dir / "r.csv", "time_s", covariate);
  };
  expect_error([&] { read(""); }, "empty, expected a header line");
  expect_error([&] { read("block,arm\n0,main\n"); }, "no column \"value\"");
  expect_error([&] { read("block,arm,value,value\n"); }, "column names must be unique");
  expect_error([&] { read("block,arm,value\n0,main\n"); }, "r.csv:2: 2 fields, the header has 3");
  expect_error([&] { read("block,arm,value\n0,main,fast\n"); }, "r.csv:2: column value must be a finite number");
  expect_error([&] { read("block,arm,value\n0,main,nan\n"); }, "column value must be a finite number");
  expect_error([&] { read("block,arm,value\n-1,main,3\n"); }, "column block must be an integer >= 0");
  expect_error([&] { read("block,arm,value\n0,\"main\",3\n"); }, "quoted fields are not supported");
  expect_error([&] { read("block,arm,value\n0,,3\n"); }, "empty arm");
  expect_error([&] { read("block,arm,value,covariate\n0,main,3,1\n"); }, "the design declares no covariate");
  expect_error([&] { read("block,arm,value,time_s\n0,main,3,1\n"); }, "column \"time_s\" clashes");
  expect_error([&] { read_rows_csv(dir / "none.csv", "time_s", ""); }, "cannot open rows file");
}

TEST(LabRows, LedgerRowsOfTheDesign) {
  test::TempDir dir;
  const std::string id(64, 'a');
  test::write_text(dir / "l.jsonl",
                   "{\"design\":\"" + id +
                       "\",\"block\":0,\"arm\":\"main\",\"start\":0,\"draw\":1,\"metrics\":{\"time_s\":4.5,\"x\":1},"
                       "\"host\":\"ignored\"}\n\n"
                       "{\"design\":\"" +
                       id + "\",\"block\":1,\"arm\":\"fast\",\"start\":0,\"draw\":0,\"metrics\":{\"time_s\":4}}\n");
  const auto rows = read_ledger(dir / "l.jsonl", id);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].draw, 1);
  EXPECT_EQ(rows[0].metrics.at("time_s"), 4.5);
  EXPECT_EQ(rows[1].block, 1);
  EXPECT_THAT(rows[1].origin, HasSubstr("l.jsonl:3"));
}

TEST(LabRows, BadLedgerLines) {
  test::TempDir dir;
  const std::string id(64, 'a');
  auto read = [&](const std::string& line) {
    test::write_text(dir / "l.jsonl", line + "\n");
    return read_ledger(dir / "l.jsonl", id);
  };
  const std::string head = "{\"design\":\"" + id + "\",";
  expect_error([&] { read("{\"design\":\"" + std::string(64, 'b') + "\"}"); }, "not of the registered design");
  expect_error([&] { read("{\"block\":0}"); }, "l.jsonl:1: \"design\" must be the design id");
  expect_error([&] { read(head + "\"block\":0"); }, "l.jsonl:1: not valid JSON");
  expect_error([&] { read(head + "\"block\":-1,\"arm\":\"main\",\"start\":0,\"draw\":0,\"metrics\":{}}"); },
               "\"block\" must be an integer >= 0");
  expect_error([&] { read(head + "\"block\":0,\"arm\":3,\"start\":0,\"draw\":0,\"metrics\":{}}"); },
               "\"arm\" must be a string");
  expect_error([&] { read(head + "\"block\":0,\"arm\":\"main\",\"start\":0,\"draw\":0}"); },
               "\"metrics\" must be an object");
  expect_error([&] { read(head + "\"block\":0,\"arm\":\"main\",\"start\":0,\"draw\":0,\"metrics\":{\"t\":\"1\"}}"); },
               "metric \"t\" must be a number");
  expect_error([&] { read("[1]"); }, "a ledger row must be a JSON object");
  expect_error([&] { read_ledger(dir / "none.jsonl", id); }, "cannot open ledger");
}

TEST(LabRows, RowsTheDesignCannotHaveProducedAreErrors) {
  json j = test::small_design();
  j["quality_guards"] = {{{"metric", "passed"}, {"better", "higher"}, {"scale", "absolute"}, {"margin", 0.1}}};
  const Design d = parse_design(j);
  auto with = [](std::vector<Row> rows) {
    for (Row& r : rows) r.metrics["passed"] = 1;
    return rows;
  };
  const auto good = with(test::paired_rows({{10, 9}, {10, 9}, {10, 9}}));
  auto copy = good;
  EXPECT_TRUE(check_rows(copy, d).empty());
  std::vector<Row> none;
  expect_error([&] { check_rows(none, d); }, "no rows");
  auto rows = good;
  rows[1].arm = "slow";
  expect_error([&] { check_rows(rows, d); }, "unknown arm \"slow\"");
  rows = good;
  rows[1].block = 3;
  expect_error([&] { check_rows(rows, d); }, "block 3 is not one of the design's blocks 0..2");
  rows = good;
  rows[1].start = 1;
  expect_error([&] { check_rows(rows, d); }, "start 1 is not one of the design's starts 0..0");
  rows = good;
  rows.push_back(rows[0]);
  expect_error([&] { check_rows(rows, d); }, "block 0, arm \"main\", start 0, draw 0 appears twice");
  rows = good;
  rows[2].metrics.erase("passed");
  expect_error([&] { check_rows(rows, d); }, "no value for metric \"passed\"");
}

TEST(LabRows, BlockWithOneArmIsLeftOut) {
  const Design d = parse_design(test::small_design());
  std::vector<Row> rows = test::paired_rows({{10, 9}, {10, 9}, {10, 9}});
  rows.erase(rows.begin() + 5);  // block 2 loses its "fast" row: that arm crashed before its first draw
  const auto warnings = check_rows(rows, d);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("block 2 has rows of arm \"main\" only: no rows of arm \"fast\"; the block is left out"),
            std::string::npos);
  EXPECT_EQ(rows.size(), 4u);
  for (const Row& row : rows) EXPECT_NE(row.block, 2);
  std::vector<Row> lone = {rows[0]};
  expect_error([&] { check_rows(lone, d); }, "no block has rows of both arms");
}

TEST(LabRows, DeparturesAreDeviations) {
  json j = test::small_design(4);
  j["draws_per_start"] = 2;
  const Design d = parse_design(j);
  auto rows = test::paired_rows({{10, 9}, {10, 9}, {10, 9}});  // one draw each, block 3 missing
  EXPECT_THAT(check_rows(rows, d), ElementsAre("deviation: 1 of 4 registered blocks have no rows (blocks 3)",
                                               "deviation: 6 starts do not have draws_per_start = 2 draws"));
}

}  // namespace
}  // namespace frank::lab
