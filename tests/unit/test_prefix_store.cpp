// The on-disk prefix cache: what is saved resumes exactly; anything damaged, foreign or
// inconsistent is ignored with a warning.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "frank/core/sha256.h"
#include "frank/engine/prefix_cache.h"
#include "frank/engine/prefix_store.h"
#include "frank/engine/state_codec.h"
#include "frank/model/synthetic.h"
#include "safetensors_test_util.h"

namespace frank::engine {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<Model> tiny(uint64_t seed) {
  auto m = model::synthetic_model("tiny", seed);
  return std::make_unique<Model>(std::move(m.config), std::move(m.weights));
}

std::vector<int32_t> tokens(size_t n, int32_t offset = 0) {
  std::vector<int32_t> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = static_cast<int32_t>((i * 37 + 11 + offset) % 256);
  return t;
}

struct StoreFixture : ::testing::Test {
  test::TempDir dir;
  std::unique_ptr<Model> model = tiny(1);
  std::vector<std::string> warnings;
  PrefixStore store{dir.path(), *model, [this](const std::string& w) { warnings.push_back(w); }};
  std::vector<int32_t> kept = tokens(45);

  std::filesystem::path save_kept() {
    Session s = model->new_session();
    std::vector<SessionCheckpoint> checkpoints;
    prefill_with_checkpoints(*model, s, kept, {16, 32}, checkpoints);
    store.save(kept, s, checkpoints);
    return *std::filesystem::directory_iterator(dir.path());
  }
  std::vector<int32_t> longer() const {
    auto p = kept;
    p.push_back(5);
    p.push_back(6);
    return p;
  }
  std::string read(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
  }
};

TEST_F(StoreFixture, SavedConversationResumesExactly) {
  save_kept();
  const auto prompt = longer();
  auto loaded = store.load_longest_prefix(prompt);
  ASSERT_TRUE(loaded);
  EXPECT_TRUE(warnings.empty());
  EXPECT_EQ(loaded->tokens, kept);
  EXPECT_EQ(loaded->checkpoints.size(), 2u);
  const Tensor resumed = model->forward(loaded->session, std::span<const int32_t>(prompt).subspan(kept.size()));
  Session fresh = model->new_session();
  const Tensor full = model->forward(fresh, prompt);
  for (int v = 0; v < 256; ++v) ASSERT_EQ(resumed.row(1)[v], full.row(full.rows() - 1)[v]);
  // Not a prefix, or not shorter than the prompt: nothing to load.
  EXPECT_FALSE(store.load_longest_prefix(tokens(50, 1)));
  EXPECT_FALSE(store.load_longest_prefix(kept));
}

TEST_F(StoreFixture, DamagedFileIsIgnoredWithWarning) {
  const auto path = save_kept();
  auto bytes = read(path);
  bytes[bytes.size() / 2] ^= 0x10;
  test::write_file(path, bytes);
  EXPECT_FALSE(store.load_longest_prefix(longer()));
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("checksum"));
}

TEST_F(StoreFixture, TruncatedFileIsIgnoredWithWarning) {
  const auto path = save_kept();
  test::write_file(path, read(path).substr(0, 40));
  EXPECT_FALSE(store.load_longest_prefix(longer()));
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("ignoring"));
}

TEST_F(StoreFixture, FileOfAnotherModelIsIgnored) {
  save_kept();
  auto other = tiny(2);
  std::vector<std::string> other_warnings;
  PrefixStore other_store(dir.path(), *other, [&](const std::string& w) { other_warnings.push_back(w); });
  EXPECT_FALSE(other_store.load_longest_prefix(longer()));
  ASSERT_EQ(other_warnings.size(), 1u);
  EXPECT_THAT(other_warnings[0], HasSubstr("another model"));
}

// A file whose checksum is right but whose contents do not fit the model (or its name) must not
// reach the forward pass.
TEST_F(StoreFixture, ConsistentChecksumButWrongContentsIsIgnored) {
  const auto path = save_kept();
  const auto bytes = read(path);
  const size_t header = 8 + 8 + model->fingerprint().size() + 64;
  // Rebuild the payload with a session whose window is one row short, and re-sign it.
  Session s = model->new_session();
  model->forward(s, kept);
  s.layers[3].window.resize(s.layers[3].window.size() - 32);
  Encoder payload;
  payload.ints(kept);
  payload.session(s);
  payload.u64(0);
  test::write_file(path, bytes.substr(0, header - 64) + sha256_hex(payload.bytes()) + payload.bytes());
  EXPECT_FALSE(store.load_longest_prefix(longer()));
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("layer 3 window does not fit"));
}

TEST_F(StoreFixture, RenamedFileWithOtherTokensIsIgnored) {
  const auto path = save_kept();
  // Claim the file holds the first 45 tokens of another prompt.
  const auto other = tokens(46, 3);
  const auto fake = dir.path() / fmt::format("45-{}.fpc", sha256_hex(std::string_view(
                                                         reinterpret_cast<const char*>(other.data()), 45 * 4)));
  std::filesystem::rename(path, fake);
  EXPECT_FALSE(store.load_longest_prefix(other));
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("tokens do not match"));
}

// With a byte budget the directory keeps the most recently saved or resumed conversations.
TEST(PrefixStoreBudget, LeastRecentlyUsedConversationsGoFirst) {
  test::TempDir dir;
  const auto model = tiny(1);
  std::vector<std::string> warnings;
  auto save = [&](PrefixStore& store, const std::vector<int32_t>& t) {
    Session s = model->new_session();
    model->forward(s, t);
    store.save(t, s, {});
  };
  auto files = [&] {
    size_t n = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path())) ++n;
    return n;
  };
  // Measure one conversation's file, then allow room for two.
  {
    PrefixStore probe(dir.path(), *model, [&](const std::string& w) { warnings.push_back(w); });
    save(probe, tokens(30, 0));
  }
  const auto one = std::filesystem::file_size(*std::filesystem::directory_iterator(dir.path()));
  PrefixStore store(dir.path(), *model, [&](const std::string& w) { warnings.push_back(w); }, 2 * one + one / 2);
  const auto a = tokens(30, 0), b = tokens(30, 1), c = tokens(30, 2);
  save(store, b);
  EXPECT_EQ(files(), 2u);
  // Resuming from `a` makes it the most recently used, so saving `c` deletes `b`.
  auto more_a = a;
  more_a.push_back(3);
  ASSERT_TRUE(store.load_longest_prefix(more_a));
  save(store, c);
  EXPECT_EQ(files(), 2u);
  auto more_b = b;
  more_b.push_back(3);
  EXPECT_FALSE(store.load_longest_prefix(more_b));
  EXPECT_TRUE(store.load_longest_prefix(more_a));
  EXPECT_TRUE(warnings.empty());
}

}  // namespace
}  // namespace frank::engine
