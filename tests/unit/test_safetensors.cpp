// DType parsing / conversions and SafetensorsFile: round trips of files written here, and one
// test per header validation rule checking that the error names the file and the key fact.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "frank/core/dtype.h"
#include "frank/core/error.h"
#include "frank/core/mmap_file.h"
#include "frank/model/safetensors.h"
#include "safetensors_test_util.h"

namespace frank {
namespace {

using model::SafetensorsFile;
using model::TensorInfo;
using test::build_safetensors;
using test::raw_safetensors;
using test::TempDir;
using test::to_bytes;
using ::testing::AllOf;
using ::testing::HasSubstr;

// Runs f and returns the frank::Error message; any other outcome fails the test.
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

// ---------------------------------------------------------------- DType

TEST(DType, ParsesCanonicalNamesAndAliases) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I64, DType::I32, DType::I16, DType::I8,
                  DType::U8, DType::U16, DType::U32, DType::U64, DType::BOOL, DType::F8_E4M3, DType::F8_E5M2,
                  DType::F8_E8M0, DType::F4}) {
    EXPECT_EQ(parse_dtype(dtype_name(t)), t) << dtype_name(t);
  }
  EXPECT_EQ(parse_dtype("F8_E8M0FNU"), DType::F8_E8M0);
  EXPECT_EQ(parse_dtype("F8_E4M3FN"), DType::F8_E4M3);
  EXPECT_EQ(parse_dtype("F4"), DType::F4);
  EXPECT_EQ(parse_dtype("f32"), DType::Unknown);  // names are case-sensitive in the format
  EXPECT_EQ(parse_dtype(""), DType::Unknown);
  EXPECT_EQ(parse_dtype("COMPLEX64"), DType::Unknown);
  EXPECT_EQ(dtype_name(DType::Unknown), "Unknown");
}

TEST(DType, ElementSizes) {
  EXPECT_EQ(dtype_size(DType::F64), 8u);
  EXPECT_EQ(dtype_size(DType::I64), 8u);
  EXPECT_EQ(dtype_size(DType::F32), 4u);
  EXPECT_EQ(dtype_size(DType::BF16), 2u);
  EXPECT_EQ(dtype_size(DType::F16), 2u);
  EXPECT_EQ(dtype_size(DType::I8), 1u);
  EXPECT_EQ(dtype_size(DType::BOOL), 1u);
  EXPECT_EQ(dtype_size(DType::F8_E4M3), 1u);
  EXPECT_EQ(dtype_size(DType::F8_E8M0), 1u);
  EXPECT_EQ(dtype_size(DType::F4), 0u);  // sub-byte: no whole-byte size
  EXPECT_EQ(dtype_bits(DType::F4), 4);
  EXPECT_EQ(dtype_size(DType::Unknown), 0u);
  EXPECT_TRUE(is_fp8_or_fp4(DType::F8_E5M2));
  EXPECT_FALSE(is_fp8_or_fp4(DType::BF16));
}

TEST(DType, Bf16KnownValues) {
  EXPECT_EQ(bf16_to_f32(0x3F80), 1.0f);
  EXPECT_EQ(bf16_to_f32(0xC000), -2.0f);
  EXPECT_EQ(bf16_to_f32(0x4049), 3.140625f);
  EXPECT_EQ(bf16_to_f32(0x0001), std::ldexp(1.0f, -133));  // smallest bf16 subnormal
  EXPECT_EQ(bf16_to_f32(0x7F80), std::numeric_limits<float>::infinity());
  EXPECT_EQ(bf16_to_f32(0xFF80), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(bf16_to_f32(0x7FC0)));
  EXPECT_TRUE(std::signbit(bf16_to_f32(0x8000)));
}

TEST(DType, TestHelperRoundsBf16ToNearestEven) {
  EXPECT_EQ(test::f32_to_bf16_rne(1.0f), 0x3F80);
  EXPECT_EQ(test::f32_to_bf16_rne(-2.0f), 0xC000);
  EXPECT_EQ(test::f32_to_bf16_rne(3.14159265f), 0x4049);
  EXPECT_EQ(test::f32_to_bf16_rne(1.0f + std::ldexp(1.0f, -8)), 0x3F80);      // tie -> even (down)
  EXPECT_EQ(test::f32_to_bf16_rne(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82);  // tie -> even (up)
  EXPECT_EQ(test::f32_to_bf16_rne(1.0f + std::ldexp(1.0f, -9) * 3), 0x3F81);  // above half -> up
}

TEST(DType, F16KnownValues) {
  EXPECT_EQ(f16_to_f32(0x3C00), 1.0f);
  EXPECT_EQ(f16_to_f32(0xC000), -2.0f);
  EXPECT_EQ(f16_to_f32(0x3555), 0.333251953125f);
  EXPECT_EQ(f16_to_f32(0x7BFF), 65504.0f);
  EXPECT_EQ(f16_to_f32(0x0400), std::ldexp(1.0f, -14));          // smallest normal
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));          // smallest subnormal
  EXPECT_EQ(f16_to_f32(0x03FF), 1023.0f * std::ldexp(1.0f, -24));  // largest subnormal
  EXPECT_EQ(f16_to_f32(0x8001), -std::ldexp(1.0f, -24));
  EXPECT_EQ(f16_to_f32(0x7C00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(f16_to_f32(0xFC00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7E00)));
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7C01)));  // signalling-style NaN stays NaN, not inf
  EXPECT_EQ(f16_to_f32(0x0000), 0.0f);
  EXPECT_TRUE(std::signbit(f16_to_f32(0x8000)));
}

// Every finite f16 against the textbook formula, which is exact in float arithmetic.
TEST(DType, F16AllFiniteValuesMatchFormula) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const uint32_t e = (h >> 10) & 0x1F, m = h & 0x3FF;
    if (e == 0x1F) continue;
    float want = e == 0 ? std::ldexp(static_cast<float>(m), -24)
                        : std::ldexp(static_cast<float>(1024 + m), static_cast<int>(e) - 25);
    if (h & 0x8000) want = -want;
    ASSERT_EQ(f16_to_f32(static_cast<uint16_t>(h)), want) << std::hex << h;
    ASSERT_EQ(std::signbit(f16_to_f32(static_cast<uint16_t>(h))), (h & 0x8000) != 0) << std::hex << h;
  }
}

// ---------------------------------------------------------------- MappedFile

TEST(MappedFile, MapsContentsAndMoves) {
  TempDir dir;
  test::write_file(dir / "a.bin", "hello");
  MappedFile m = MappedFile::open(dir / "a.bin");
  ASSERT_EQ(m.size(), 5u);
  EXPECT_EQ(std::memcmp(m.bytes().data(), "hello", 5), 0);
  MappedFile moved = std::move(m);
  EXPECT_EQ(moved.size(), 5u);
  EXPECT_EQ(m.size(), 0u);  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
  EXPECT_EQ(moved.path(), dir / "a.bin");
}

TEST(MappedFile, EmptyFileGivesEmptyView) {
  TempDir dir;
  test::write_file(dir / "empty.bin", "");
  EXPECT_EQ(MappedFile::open(dir / "empty.bin").size(), 0u);
}

TEST(MappedFile, MissingFileNamesPathAndReason) {
  TempDir dir;
  EXPECT_THAT(error_of([&] { MappedFile::open(dir / "nope.bin"); }),
              AllOf(HasSubstr("nope.bin"), HasSubstr("No such file")));
}

TEST(MappedFile, DirectoryIsRejected) {
  TempDir dir;
  EXPECT_THAT(error_of([&] { MappedFile::open(dir.path()); }), HasSubstr("not a regular file"));
}

// ---------------------------------------------------------------- SafetensorsFile round trips

TEST(Safetensors, RoundTripsTensorsAndMetadata) {
  TempDir dir;
  const std::vector<float> f32 = {1.0f, -2.5f, 3.25f, 0.0f, 1e-30f, -7.0f};
  const std::vector<uint16_t> bf16 = {test::f32_to_bf16_rne(1.0f), test::f32_to_bf16_rne(-2.0f)};
  const std::vector<uint16_t> f16 = {0x3C00, 0x0001, 0x7C00};
  const std::vector<int64_t> i64 = {-1, 42};
  test::write_file(dir / "m.safetensors",
                   build_safetensors({{"a.f32", "F32", {2, 3}, to_bytes(f32)},
                                      {"b.bf16", "BF16", {2}, to_bytes(bf16)},
                                      {"c.f16", "F16", {3}, to_bytes(f16)},
                                      {"d.i64", "I64", {1, 2}, to_bytes(i64)}},
                                     {{"format", "pt"}}));
  const SafetensorsFile f = SafetensorsFile::open(dir / "m.safetensors");
  EXPECT_EQ(f.path(), dir / "m.safetensors");
  ASSERT_EQ(f.tensors().size(), 4u);
  EXPECT_EQ(f.metadata(), (std::map<std::string, std::string>{{"format", "pt"}}));

  const TensorInfo& a = f.tensors().at("a.f32");
  EXPECT_EQ(a.name, "a.f32");
  EXPECT_EQ(a.dtype, DType::F32);
  EXPECT_EQ(a.dtype_name, "F32");
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a.numel(), 6);
  EXPECT_EQ(a.begin, 0u);
  EXPECT_EQ(a.end, 24u);
  const auto ab = f.bytes(a);
  ASSERT_EQ(ab.size(), 24u);
  EXPECT_EQ(std::memcmp(ab.data(), f32.data(), 24), 0);

  const TensorInfo& b = f.tensors().at("b.bf16");
  EXPECT_EQ(b.dtype, DType::BF16);
  EXPECT_EQ(b.begin, 24u);
  const auto bb = f.bytes(b);
  ASSERT_EQ(bb.size(), 4u);
  uint16_t raw[2];
  std::memcpy(raw, bb.data(), 4);
  EXPECT_EQ(raw[0], 0x3F80);
  EXPECT_EQ(raw[1], 0xC000);

  const TensorInfo& c = f.tensors().at("c.f16");
  EXPECT_EQ(c.dtype, DType::F16);
  EXPECT_EQ(f.bytes(c).size(), 6u);
  EXPECT_EQ(f.tensors().at("d.i64").dtype, DType::I64);
}

TEST(Safetensors, ScalarEmptyAndUnalignedTensors) {
  TempDir dir;
  // The header is padded to an odd length, so the data section is not 4-byte aligned.
  std::string header = R"({"s":{"dtype":"F32","shape":[],"data_offsets":[0,4]},"z":{"dtype":"F32","shape":[0,5],"data_offsets":[4,4]}})";
  while (header.size() % 2 == 0) header += ' ';  // trailing whitespace padding is legal
  const float v = 2.5f;
  test::write_file(dir / "x.safetensors", raw_safetensors(header, to_bytes(std::vector<float>{v})));
  const SafetensorsFile f = SafetensorsFile::open(dir / "x.safetensors");
  const TensorInfo& s = f.tensors().at("s");
  EXPECT_TRUE(s.shape.empty());
  EXPECT_EQ(s.numel(), 1);
  float got;
  std::memcpy(&got, f.bytes(s).data(), 4);
  EXPECT_EQ(got, v);
  EXPECT_EQ(f.tensors().at("z").numel(), 0);
  EXPECT_TRUE(f.bytes(f.tensors().at("z")).empty());
}

TEST(Safetensors, UnknownAndSubByteDtypesOpen) {
  TempDir dir;
  // F4 packs two per byte: 6 elements in 3 bytes, no size check; unknown dtype keeps its name.
  const std::string header =
      R"({"q":{"dtype":"F4","shape":[2,3],"data_offsets":[0,3]},"w":{"dtype":"WEIRD9","shape":[7],"data_offsets":[3,5]}})";
  test::write_file(dir / "x.safetensors", raw_safetensors(header, "abcde"));
  const SafetensorsFile f = SafetensorsFile::open(dir / "x.safetensors");
  EXPECT_EQ(f.tensors().at("q").dtype, DType::F4);
  EXPECT_EQ(f.tensors().at("w").dtype, DType::Unknown);
  EXPECT_EQ(f.tensors().at("w").dtype_name, "WEIRD9");
  EXPECT_EQ(f.bytes(f.tensors().at("w")).size(), 2u);
}

TEST(Safetensors, BytesRejectsForeignRange) {
  TempDir dir;
  test::write_file(dir / "x.safetensors", build_safetensors({{"a", "U8", {4}, "abcd"}}));
  const SafetensorsFile f = SafetensorsFile::open(dir / "x.safetensors");
  TensorInfo bogus = f.tensors().at("a");
  bogus.end = 100;
  EXPECT_THAT(error_of([&] { f.bytes(bogus); }), HasSubstr("outside the data section"));
}

TEST(Safetensors, NumelOverflowOnHandBuiltInfoThrows) {
  TensorInfo t;
  t.name = "big";
  t.shape = {int64_t{1} << 40, int64_t{1} << 40};
  EXPECT_THAT(error_of([&] { (void)t.numel(); }), HasSubstr("big"));
}

// ---------------------------------------------------------------- SafetensorsFile validation

class SafetensorsErrors : public ::testing::Test {
 protected:
  // Writes `bytes` as bad.safetensors and returns open()'s error message.
  std::string open_error(const std::string& bytes) {
    test::write_file(path(), bytes);
    return error_of([&] { SafetensorsFile::open(path()); });
  }
  // Same, with a valid length prefix around the given header and data.
  std::string header_error(const std::string& header, const std::string& data = std::string(64, '\0')) {
    return open_error(raw_safetensors(header, data));
  }
  std::filesystem::path path() const { return dir_ / "bad.safetensors"; }

  TempDir dir_;
};

TEST_F(SafetensorsErrors, MissingFile) {
  EXPECT_THAT(error_of([&] { SafetensorsFile::open(dir_ / "absent.safetensors"); }),
              AllOf(HasSubstr("absent.safetensors"), HasSubstr("No such file")));
}

TEST_F(SafetensorsErrors, EmptyFile) {
  EXPECT_THAT(open_error(""), AllOf(HasSubstr("bad.safetensors"), HasSubstr("empty")));
}

TEST_F(SafetensorsErrors, ShorterThanLengthPrefix) {
  EXPECT_THAT(open_error("abcde"), AllOf(HasSubstr("bad.safetensors"), HasSubstr("too short (5 bytes)")));
}

TEST_F(SafetensorsErrors, HeaderLongerThanFile) {
  EXPECT_THAT(open_error(raw_safetensors("{}", "", 1000)),
              AllOf(HasSubstr("bad.safetensors"), HasSubstr("header length 1000"), HasSubstr("larger than the file")));
}

TEST_F(SafetensorsErrors, AbsurdHeaderLength) {
  EXPECT_THAT(open_error(raw_safetensors("{}", "", uint64_t{1} << 62)),
              AllOf(HasSubstr("header length"), HasSubstr("limit")));
  EXPECT_THAT(open_error(raw_safetensors("{}", "", 200'000'000)), HasSubstr("limit"));
}

TEST_F(SafetensorsErrors, HeaderNotJson) {
  EXPECT_THAT(header_error("{\"a\": "), AllOf(HasSubstr("bad.safetensors"), HasSubstr("not valid JSON")));
  EXPECT_THAT(header_error(""), HasSubstr("not valid JSON"));
  EXPECT_THAT(header_error(std::string("{}\0", 3)), HasSubstr("not valid JSON"));
}

TEST_F(SafetensorsErrors, HeaderNotObject) {
  EXPECT_THAT(header_error("[1, 2]"), HasSubstr("not a JSON object"));
  EXPECT_THAT(header_error("42"), HasSubstr("not a JSON object"));
}

TEST_F(SafetensorsErrors, EntryNotObject) {
  EXPECT_THAT(header_error(R"({"w": 5})"), AllOf(HasSubstr("tensor 'w'"), HasSubstr("not a JSON object")));
}

TEST_F(SafetensorsErrors, MissingFields) {
  EXPECT_THAT(header_error(R"({"w":{"shape":[1],"data_offsets":[0,4]}})"),
              AllOf(HasSubstr("tensor 'w'"), HasSubstr("missing \"dtype\"")));
  EXPECT_THAT(header_error(R"({"w":{"dtype":"F32","data_offsets":[0,4]}})"), HasSubstr("missing \"shape\""));
  EXPECT_THAT(header_error(R"({"w":{"dtype":"F32","shape":[1]}})"), HasSubstr("missing \"data_offsets\""));
}

TEST_F(SafetensorsErrors, WrongJsonTypes) {
  EXPECT_THAT(header_error(R"({"w":{"dtype":5,"shape":[1],"data_offsets":[0,4]}})"),
              AllOf(HasSubstr("tensor 'w'"), HasSubstr("\"dtype\" is not a string")));
  EXPECT_THAT(header_error(R"({"w":{"dtype":"F32","shape":"1","data_offsets":[0,4]}})"),
              HasSubstr("\"shape\" is not an array"));
  EXPECT_THAT(header_error(R"({"w":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})"),
              HasSubstr("not a non-negative integer"));
  EXPECT_THAT(header_error(R"({"w":{"dtype":"F32","shape":["1"],"data_offsets":[0,4]}})"),
              HasSubstr("not a non-negative integer"));
  EXPECT_THAT(header_error(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":{"a":0}}})"),
              HasSubstr("must be [begin, end]"));
  EXPECT_THAT(header_error(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,"4"]}})"),
              HasSubstr("two non-negative integers"));
}

TEST_F(SafetensorsErrors, NegativeDim) {
  EXPECT_THAT(header_error(R"({"w":{"dtype":"F32","shape":[2,-1],"data_offsets":[0,4]}})"),
              AllOf(HasSubstr("tensor 'w'"), HasSubstr("-1"), HasSubstr("non-negative")));
}

TEST_F(SafetensorsErrors, DimLargerThanInt64) {
  EXPECT_THAT(header_error(R"({"w":{"dtype":"F32","shape":[9223372036854775808],"data_offsets":[0,4]}})"),
              HasSubstr("non-negative integer"));
}

TEST_F(SafetensorsErrors, BadOffsets) {
  EXPECT_THAT(header_error(R"({"w":{"dtype":"U8","shape":[4],"data_offsets":[0,4,8]}})"),
              HasSubstr("must be [begin, end]"));
  EXPECT_THAT(header_error(R"({"w":{"dtype":"U8","shape":[4],"data_offsets":[-4,0]}})"),
              HasSubstr("two non-negative integers"));
  EXPECT_THAT(header_error(R"({"w":{"dtype":"U8","shape":[4],"data_offsets":[8,4]}})"),
              AllOf(HasSubstr("tensor 'w'"), HasSubstr("begin 8 > end 4")));
}

TEST_F(SafetensorsErrors, EndBeyondDataSection) {
  EXPECT_THAT(header_error(R"({"w":{"dtype":"U8","shape":[8],"data_offsets":[60,68]}})"),
              AllOf(HasSubstr("tensor 'w'"), HasSubstr("end 68"), HasSubstr("beyond the data section (64 bytes)")));
  // Huge end must not wrap around any arithmetic.
  EXPECT_THAT(header_error(R"({"w":{"dtype":"U8","shape":[0],"data_offsets":[0,18446744073709551615]}})"),
              HasSubstr("beyond the data section"));
}

TEST_F(SafetensorsErrors, ByteSizeMismatch) {
  EXPECT_THAT(header_error(R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,12]}})"),
              AllOf(HasSubstr("tensor 'w'"), HasSubstr("span 12 bytes"), HasSubstr("[2, 2]"), HasSubstr("needs 16")));
  EXPECT_THAT(header_error(R"({"w":{"dtype":"BF16","shape":[3],"data_offsets":[0,8]}})"), HasSubstr("needs 6"));
}

TEST_F(SafetensorsErrors, NumelOverflow) {
  EXPECT_THAT(header_error(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})"),
              AllOf(HasSubstr("tensor 'w'"), HasSubstr("overflow")));
  // numel fits in int64 but numel * 4 bytes does not.
  EXPECT_THAT(header_error(R"({"w":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,4]}})"),
              HasSubstr("overflow"));
}

TEST_F(SafetensorsErrors, OverlappingRanges) {
  EXPECT_THAT(header_error(R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},
                               "b":{"dtype":"U8","shape":[8],"data_offsets":[4,12]}})"),
              AllOf(HasSubstr("'a'"), HasSubstr("'b'"), HasSubstr("overlap")));
  // Identical ranges overlap too.
  EXPECT_THAT(header_error(R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},
                               "b":{"dtype":"I8","shape":[8],"data_offsets":[0,8]}})"),
              HasSubstr("overlap"));
}

TEST_F(SafetensorsErrors, AdjacentRangesAreFine) {
  test::write_file(path(), raw_safetensors(R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},
                                               "b":{"dtype":"U8","shape":[8],"data_offsets":[8,16]}})",
                                           std::string(16, 'x')));
  EXPECT_EQ(SafetensorsFile::open(path()).tensors().size(), 2u);
}

TEST_F(SafetensorsErrors, BadMetadata) {
  EXPECT_THAT(header_error(R"({"__metadata__":{"format":1}})"),
              AllOf(HasSubstr("__metadata__"), HasSubstr("format"), HasSubstr("not a string")));
  EXPECT_THAT(header_error(R"({"__metadata__":[]})"), HasSubstr("__metadata__"));
}

}  // namespace
}  // namespace frank
