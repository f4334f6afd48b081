// The top-k row dump reads back what was written, and refuses files that are not dumps or are cut short.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "frank/core/error.h"
#include "frank/engine/topk_row_dump.h"
#include "safetensors_test_util.h"

namespace frank::engine {
namespace {

TEST(TopkRowDump, RoundTrip) {
  test::TempDir tmp;
  {
    TopkRowDump dump(tmp / "d");
    dump.write(7, 4, std::vector<float>{1.0f, -0.0f, 3.5f});
    dump.write(8, 4, std::vector<float>{});
    EXPECT_EQ(dump.rows(), 2);
  }
  const auto rows = read_topk_rows(tmp / "d" / "topk-rows.bin");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].position, 7);
  EXPECT_EQ(rows[0].k, 4);
  EXPECT_EQ(rows[0].scores, (std::vector<float>{1.0f, -0.0f, 3.5f}));
  EXPECT_TRUE(std::signbit(rows[0].scores[1]));
  EXPECT_EQ(rows[1].position, 8);
  EXPECT_TRUE(rows[1].scores.empty());
}

TEST(TopkRowDump, BadFilesAreRefused) {
  test::TempDir tmp;
  {
    TopkRowDump dump(tmp.path());
    dump.write(1, 2, std::vector<float>{1.0f, 2.0f});
  }
  const auto file = tmp / "topk-rows.bin";
  std::filesystem::resize_file(file, std::filesystem::file_size(file) - 2);
  EXPECT_THROW(read_topk_rows(file), Error);
  std::ofstream(tmp / "other.bin") << "not a dump";
  EXPECT_THROW(read_topk_rows(tmp / "other.bin"), Error);
  EXPECT_THROW(read_topk_rows(tmp / "missing.bin"), Error);
}

}  // namespace
}  // namespace frank::engine
