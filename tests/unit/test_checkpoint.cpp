// Checkpoint: the three directory layouts (index, single file, loose shards), fp32/int reads with
// exact conversion checks, and the errors a user sees for broken or unsupported checkpoints.
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "frank/core/error.h"
#include "frank/model/checkpoint.h"
#include "safetensors_test_util.h"

namespace frank::model {
namespace {

using test::build_safetensors;
using test::raw_safetensors;
using test::TempDir;
using test::to_bytes;
using test::write_file;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected frank::Error, nothing was thrown";
  return "";
}

const float kInf = std::numeric_limits<float>::infinity();

// ---------------------------------------------------------------- layouts

TEST(Checkpoint, SingleFileReadsF32Bf16F16) {
  TempDir dir;
  const std::vector<float> src = {1.0f, -2.0f, 3.14159265f, 0.5f, 1e-3f, -1234.5f};
  std::vector<uint16_t> bf16;
  for (float f : src) bf16.push_back(test::f32_to_bf16_rne(f));
  const std::vector<uint16_t> f16 = {0x3C00, 0xC000, 0x0001, 0x03FF, 0x7BFF, 0x7C00, 0xFC00, 0x8000};
  write_file(dir / "model.safetensors", build_safetensors({{"w.f32", "F32", {2, 3}, to_bytes(src)},
                                                           {"w.bf16", "BF16", {3, 2}, to_bytes(bf16)},
                                                           {"w.f16", "F16", {8}, to_bytes(f16)}}));
  // A stray shard next to model.safetensors must be ignored: the single file wins.
  write_file(dir / "other.safetensors", build_safetensors({{"w.f32", "F32", {1}, to_bytes(std::vector<float>{9})}}));

  const Checkpoint ck = Checkpoint::open(dir.path());
  EXPECT_EQ(ck.dir(), dir.path());
  EXPECT_THAT(ck.names(), ElementsAre("w.bf16", "w.f16", "w.f32"));
  EXPECT_TRUE(ck.has("w.f32"));
  EXPECT_FALSE(ck.has("nope"));
  EXPECT_EQ(ck.find("nope"), nullptr);
  ASSERT_NE(ck.find("w.bf16"), nullptr);
  EXPECT_EQ(ck.find("w.bf16")->dtype, DType::BF16);

  EXPECT_EQ(ck.read_f32("w.f32", {2, 3}), src);
  // bf16 keeps 8 mantissa bits: exactly representable values survive, pi becomes 3.140625.
  EXPECT_THAT(ck.read_f32("w.bf16", {3, 2}),
              ElementsAre(1.0f, -2.0f, 3.140625f, 0.5f, bf16_to_f32(bf16[4]), -1232.0f));
  EXPECT_NEAR(ck.read_f32("w.bf16", {3, 2})[4], 1e-3f, 1e-5f);
  EXPECT_THAT(ck.read_f32("w.f16", {8}), ElementsAre(1.0f, -2.0f, std::ldexp(1.0f, -24), 1023 * std::ldexp(1.0f, -24),
                                                     65504.0f, kInf, -kInf, 0.0f));
  EXPECT_TRUE(std::signbit(ck.read_f32("w.f16", {8})[7]));
}

TEST(Checkpoint, ShardedWithIndex) {
  TempDir dir;
  write_file(dir / "model-00001-of-00002.safetensors",
             build_safetensors({{"a", "F32", {2}, to_bytes(std::vector<float>{1, 2})},
                                {"b", "I64", {3}, to_bytes(std::vector<int64_t>{-5, 0, 1LL << 40})},
                                {"unlisted", "F32", {1}, to_bytes(std::vector<float>{0})}}));
  write_file(dir / "model-00002-of-00002.safetensors",
             build_safetensors({{"c", "BF16", {1, 1}, to_bytes(std::vector<uint16_t>{0xC000})}}));
  write_file(dir / "model.safetensors.index.json", R"({"metadata":{"total_size":1},"weight_map":{
      "a":"model-00001-of-00002.safetensors","b":"model-00001-of-00002.safetensors",
      "c":"model-00002-of-00002.safetensors"}})");
  const Checkpoint ck = Checkpoint::open(dir.path());
  EXPECT_THAT(ck.names(), ElementsAre("a", "b", "c"));  // the index, not the shard contents, decides
  EXPECT_EQ(ck.read_f32("a", {2}), (std::vector<float>{1, 2}));
  EXPECT_EQ(ck.read_i64("b", {3}), (std::vector<int64_t>{-5, 0, 1LL << 40}));
  EXPECT_EQ(ck.read_f32("c", {1, 1}), (std::vector<float>{-2.0f}));
}

TEST(Checkpoint, LooseShardsWithoutIndex) {
  TempDir dir;
  write_file(dir / "part1.safetensors", build_safetensors({{"x", "F32", {1}, to_bytes(std::vector<float>{7})}}));
  write_file(dir / "part2.safetensors", build_safetensors({{"y", "I32", {2}, to_bytes(std::vector<int32_t>{-3, 4})}}));
  write_file(dir / "notes.txt", "not a checkpoint");
  const Checkpoint ck = Checkpoint::open(dir.path());
  EXPECT_THAT(ck.names(), ElementsAre("x", "y"));
  EXPECT_EQ(ck.read_f32("x", {1}), (std::vector<float>{7}));
  EXPECT_EQ(ck.read_i64("y", {2}), (std::vector<int64_t>{-3, 4}));
}

TEST(Checkpoint, MovedCheckpointKeepsFindPointersValid) {
  TempDir dir;
  write_file(dir / "model.safetensors", build_safetensors({{"x", "F32", {1}, to_bytes(std::vector<float>{7})}}));
  Checkpoint a = Checkpoint::open(dir.path());
  const TensorInfo* before = a.find("x");
  Checkpoint b = std::move(a);
  EXPECT_EQ(b.find("x"), before);
  EXPECT_EQ(b.read_f32("x", {1}), (std::vector<float>{7}));
}

TEST(Checkpoint, ReadsEveryIntegerType) {
  TempDir dir;
  write_file(dir / "model.safetensors",
             build_safetensors({{"i8", "I8", {2}, to_bytes(std::vector<int8_t>{-128, 127})},
                                {"u8", "U8", {2}, to_bytes(std::vector<uint8_t>{0, 255})},
                                {"i16", "I16", {2}, to_bytes(std::vector<int16_t>{-32768, 32767})},
                                {"i32", "I32", {1}, to_bytes(std::vector<int32_t>{-2147483647 - 1})},
                                {"u32", "U32", {1}, to_bytes(std::vector<uint32_t>{4294967295u})},
                                {"u64", "U64", {1}, to_bytes(std::vector<uint64_t>{~0ull})},
                                {"i64", "I64", {}, to_bytes(std::vector<int64_t>{-7})}}));
  const Checkpoint ck = Checkpoint::open(dir.path());
  EXPECT_THAT(ck.read_i64("i8", {2}), ElementsAre(-128, 127));
  EXPECT_THAT(ck.read_i64("u8", {2}), ElementsAre(0, 255));
  EXPECT_THAT(ck.read_i64("i16", {2}), ElementsAre(-32768, 32767));
  EXPECT_THAT(ck.read_i64("i32", {1}), ElementsAre(-2147483648LL));
  EXPECT_THAT(ck.read_i64("u32", {1}), ElementsAre(4294967295LL));
  EXPECT_THAT(ck.read_i64("i64", {}), ElementsAre(-7));
  EXPECT_THAT(error_of([&] { ck.read_i64("u64", {1}); }), AllOf(HasSubstr("u64"), HasSubstr("does not fit")));
}

// ---------------------------------------------------------------- read errors

class CheckpointReadErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    write_file(dir_ / "model.safetensors",
               build_safetensors({{"w", "F32", {2, 3}, std::string(24, '\0')},
                                  {"fp8", "F8_E4M3", {4}, std::string(4, '\0')},
                                  {"scale", "F8_E8M0FNU", {2}, std::string(2, '\0')},
                                  {"packed", "I8", {2}, std::string(2, '\0')},
                                  {"fp4", "F4", {4}, std::string(2, '\0')},
                                  {"dbl", "F64", {1}, std::string(8, '\0')},
                                  {"odd", "MYSTERY", {3}, std::string(5, '\0')}}));
    ck_ = std::make_unique<Checkpoint>(Checkpoint::open(dir_.path()));
  }
  TempDir dir_;
  std::unique_ptr<Checkpoint> ck_;
};

TEST_F(CheckpointReadErrors, MissingTensorNamesDir) {
  EXPECT_THAT(error_of([&] { ck_->read_f32("nope", {1}); }),
              AllOf(HasSubstr("tensor 'nope' not found in checkpoint"), HasSubstr(dir_.path().string())));
  EXPECT_THAT(error_of([&] { ck_->read_i64("nope", {1}); }), HasSubstr("tensor 'nope' not found"));
}

TEST_F(CheckpointReadErrors, ShapeMismatchNamesBothShapes) {
  EXPECT_THAT(error_of([&] { ck_->read_f32("w", {3, 2}); }),
              AllOf(HasSubstr("'w'"), HasSubstr("shape [2, 3]"), HasSubstr("expected [3, 2]")));
  EXPECT_THAT(error_of([&] { ck_->read_f32("w", {6}); }), HasSubstr("expected [6]"));
}

TEST_F(CheckpointReadErrors, Fp8AndFp4AreReadForLinearWeightsOnly) {
  for (const auto& [name, dtype, shape] : std::vector<std::tuple<std::string, std::string, std::vector<int64_t>>>{
           {"fp8", "F8_E4M3", {4}}, {"scale", "F8_E8M0FNU", {2}}, {"packed", "I8", {2}}, {"fp4", "F4", {4}}}) {
    EXPECT_THAT(error_of([&] { ck_->read_f32(name, shape); }),
                AllOf(HasSubstr("'" + name + "'"), HasSubstr("dtype " + dtype),
                      HasSubstr("FP8/FP4 are read for Linear weights only")));
  }
}

TEST_F(CheckpointReadErrors, WrongDtypeKinds) {
  EXPECT_THAT(error_of([&] { ck_->read_f32("dbl", {1}); }), AllOf(HasSubstr("'dbl'"), HasSubstr("dtype F64")));
  EXPECT_THAT(error_of([&] { ck_->read_f32("odd", {3}); }), AllOf(HasSubstr("'odd'"), HasSubstr("MYSTERY")));
  EXPECT_THAT(error_of([&] { ck_->read_i64("odd", {3}); }), HasSubstr("MYSTERY"));
  EXPECT_THAT(error_of([&] { ck_->read_i64("w", {2, 3}); }), AllOf(HasSubstr("'w'"), HasSubstr("dtype F32")));
  EXPECT_THAT(error_of([&] { ck_->read_i64("fp8", {4}); }), HasSubstr("F8_E4M3"));
}

// ---------------------------------------------------------------- open errors

TEST(CheckpointOpenErrors, DirectoryMissing) {
  TempDir dir;
  EXPECT_THAT(error_of([&] { Checkpoint::open(dir / "gone"); }), AllOf(HasSubstr("gone"), HasSubstr("does not exist")));
}

TEST(CheckpointOpenErrors, PathIsAFile) {
  TempDir dir;
  write_file(dir / "f", "x");
  EXPECT_THAT(error_of([&] { Checkpoint::open(dir / "f"); }), HasSubstr("not a directory"));
}

TEST(CheckpointOpenErrors, NoSafetensors) {
  TempDir dir;
  write_file(dir / "config.json", "{}");
  EXPECT_THAT(error_of([&] { Checkpoint::open(dir.path()); }), HasSubstr("contains no .safetensors files"));
}

TEST(CheckpointOpenErrors, IndexInvalidJson) {
  TempDir dir;
  write_file(dir / "model.safetensors.index.json", "{\"weight_map\": {");
  EXPECT_THAT(error_of([&] { Checkpoint::open(dir.path()); }),
              AllOf(HasSubstr("model.safetensors.index.json"), HasSubstr("not valid JSON")));
}

TEST(CheckpointOpenErrors, IndexWithoutWeightMap) {
  TempDir dir;
  write_file(dir / "model.safetensors.index.json", R"({"metadata":{}})");
  EXPECT_THAT(error_of([&] { Checkpoint::open(dir.path()); }), HasSubstr("no \"weight_map\""));
  write_file(dir / "model.safetensors.index.json", R"({"weight_map":[]})");
  EXPECT_THAT(error_of([&] { Checkpoint::open(dir.path()); }), HasSubstr("no \"weight_map\""));
  write_file(dir / "model.safetensors.index.json", R"({"weight_map":{"a":3}})");
  EXPECT_THAT(error_of([&] { Checkpoint::open(dir.path()); }), AllOf(HasSubstr("'a'"), HasSubstr("not a string")));
}

TEST(CheckpointOpenErrors, IndexShardMissing) {
  TempDir dir;
  write_file(dir / "model.safetensors.index.json", R"({"weight_map":{"a":"shard-7.safetensors"}})");
  EXPECT_THAT(error_of([&] { Checkpoint::open(dir.path()); }),
              AllOf(HasSubstr("shard-7.safetensors"), HasSubstr("model.safetensors.index.json"),
                    HasSubstr("does not exist")));
}

TEST(CheckpointOpenErrors, IndexTensorAbsentFromShard) {
  TempDir dir;
  write_file(dir / "s.safetensors", build_safetensors({{"a", "F32", {1}, std::string(4, '\0')}}));
  write_file(dir / "model.safetensors.index.json", R"({"weight_map":{"a":"s.safetensors","ghost":"s.safetensors"}})");
  EXPECT_THAT(error_of([&] { Checkpoint::open(dir.path()); }),
              AllOf(HasSubstr("'ghost'"), HasSubstr("s.safetensors"), HasSubstr("not in that shard")));
}

TEST(CheckpointOpenErrors, CorruptShardNamesTheShard) {
  TempDir dir;
  write_file(dir / "s.safetensors", raw_safetensors("{oops", ""));
  write_file(dir / "model.safetensors.index.json", R"({"weight_map":{"a":"s.safetensors"}})");
  EXPECT_THAT(error_of([&] { Checkpoint::open(dir.path()); }), AllOf(HasSubstr("s.safetensors"), HasSubstr("JSON")));
}

TEST(CheckpointOpenErrors, DuplicateTensorAcrossShardsWithoutIndex) {
  TempDir dir;
  write_file(dir / "a.safetensors", build_safetensors({{"dup", "F32", {1}, std::string(4, '\0')}}));
  write_file(dir / "b.safetensors", build_safetensors({{"dup", "F32", {1}, std::string(4, '\0')}}));
  EXPECT_THAT(error_of([&] { Checkpoint::open(dir.path()); }),
              AllOf(HasSubstr("'dup'"), HasSubstr("a.safetensors"), HasSubstr("b.safetensors")));
}

}  // namespace
}  // namespace frank::model
