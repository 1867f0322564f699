// The on-disk compile cache (src/runtime/cache.cpp): keys, round trips, atomic writes, and entries
// that are corrupt, truncated or hold another key — all of which must read as a miss, never as a CUBIN.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "runtime/runtime.h"

namespace solder::runtime {
namespace {

namespace fs = std::filesystem;

// A fresh directory under /tmp, removed after the test.
class RuntimeCache : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "solder-cache-test-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Something that looks like a CUBIN (the cache checks the ELF magic).
  static std::vector<char> fake_cubin(size_t size, char fill) {
    std::vector<char> cubin(size, fill);
    const char magic[] = {0x7f, 'E', 'L', 'F'};
    std::copy(magic, magic + 4, cubin.begin());
    return cubin;
  }
  std::string entry(const std::string& key_text) const { return (fs::path(dir_) / (cache_key(key_text) + ".cubin")).string(); }
  static std::string read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  static void write(const std::string& path, const std::string& data) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
  }

  std::string dir_;
};

TEST(RuntimeCacheKey, DependsOnEverythingTheCubinDependsOn) {
  std::vector<std::string> options = {"--gpu-architecture=sm_90a", "-std=c++20"};
  std::string base = compile_key_text("src", "k.cu", options, "13.0", "abcd");
  EXPECT_EQ(cache_key(base), cache_key(compile_key_text("src", "k.cu", options, "13.0", "abcd")));
  EXPECT_EQ(cache_key(base).size(), 16u);
  std::vector<std::string> other_arch = {"--gpu-architecture=sm_100a", "-std=c++20"};
  std::vector<std::string> fast = {"--gpu-architecture=sm_90a", "-std=c++20", "--use_fast_math"};
  for (const std::string& changed : {compile_key_text("src2", "k.cu", options, "13.0", "abcd"),
                                     compile_key_text("src", "k2.cu", options, "13.0", "abcd"),
                                     compile_key_text("src", "k.cu", other_arch, "13.0", "abcd"),
                                     compile_key_text("src", "k.cu", fast, "13.0", "abcd"),
                                     compile_key_text("src", "k.cu", options, "12.8", "abcd"),
                                     compile_key_text("src", "k.cu", options, "13.0", "abce")})
    EXPECT_NE(cache_key(base), cache_key(changed)) << changed;
}

TEST(RuntimeCacheKey, DirectoryFromFlagsEnvironmentOrHome) {
  CompileFlags flags;
  flags.cache_dir = "/somewhere/else";
  EXPECT_EQ(cache_directory(flags), "/somewhere/else");
  const char* saved = std::getenv("SOLDER_CACHE_DIR");
  std::string saved_value = saved ? saved : "";
  setenv("SOLDER_CACHE_DIR", "/tmp/solder-env-cache", 1);
  EXPECT_EQ(cache_directory(), "/tmp/solder-env-cache");
  unsetenv("SOLDER_CACHE_DIR");
  if (const char* home = std::getenv("HOME"); home && *home)
    EXPECT_EQ(cache_directory(), (fs::path(home) / ".cache" / "solder").string());
  if (saved) setenv("SOLDER_CACHE_DIR", saved_value.c_str(), 1);
}

TEST_F(RuntimeCache, StoreThenLoadRoundTrips) {
  std::vector<char> cubin = fake_cubin(1000, 'x');
  EXPECT_FALSE(cache_load(dir_, "key one").has_value());
  std::string path = cache_store(dir_, "key one", cubin);
  EXPECT_EQ(path, entry("key one"));
  std::optional<std::vector<char>> loaded = cache_load(dir_, "key one");
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(*loaded, cubin);
  EXPECT_FALSE(cache_load(dir_, "key two").has_value());
}

TEST_F(RuntimeCache, WritesLeaveNoTemporaryFiles) {
  cache_store(dir_, "a", fake_cubin(64, 'a'));
  cache_store(dir_, "a", fake_cubin(80, 'b'));  // replaces the entry
  cache_store(dir_, "b", fake_cubin(64, 'c'));
  std::vector<std::string> names;
  for (auto& file : fs::directory_iterator(dir_)) names.push_back(file.path().filename().string());
  EXPECT_EQ(names.size(), 2u);
  for (const std::string& name : names) EXPECT_EQ(fs::path(name).extension(), ".cubin") << name;
  EXPECT_EQ(cache_load(dir_, "a")->size(), 80u);
}

TEST_F(RuntimeCache, CreatesMissingDirectoriesAndSurvivesUnwritableOnes) {
  std::string nested = dir_ + "/a/b/c";
  EXPECT_FALSE(cache_store(nested, "k", fake_cubin(16, 'z')).empty());
  EXPECT_TRUE(cache_load(nested, "k").has_value());
  // A path under a regular file cannot be created: store reports "" and does not throw.
  write(dir_ + "/file", "x");
  EXPECT_EQ(cache_store(dir_ + "/file/sub", "k", fake_cubin(16, 'z')), "");
  EXPECT_FALSE(cache_load(dir_ + "/file/sub", "k").has_value());
  EXPECT_EQ(cache_store("", "k", fake_cubin(16, 'z')), "");
}

TEST_F(RuntimeCache, CorruptEntriesAreMisses) {
  std::vector<char> cubin = fake_cubin(256, 'q');
  std::string path = cache_store(dir_, "key", cubin);
  ASSERT_FALSE(path.empty());
  const std::string good = read(path);

  // Every truncation, including the empty file.
  for (size_t size : {size_t(0), size_t(5), size_t(16), size_t(30), good.size() / 2, good.size() - 1}) {
    write(path, good.substr(0, size));
    EXPECT_FALSE(cache_load(dir_, "key").has_value()) << "truncated to " << size;
  }
  // A flipped byte anywhere: magic, key, CUBIN, checksum.
  for (size_t at : {size_t(2), size_t(20), good.size() / 2, good.size() - 3}) {
    std::string bad = good;
    bad[at] ^= 0x5a;
    write(path, bad);
    EXPECT_FALSE(cache_load(dir_, "key").has_value()) << "byte " << at << " flipped";
  }
  // Trailing garbage, and a length field pointing past the end.
  write(path, good + "extra");
  EXPECT_FALSE(cache_load(dir_, "key").has_value());
  std::string huge = good;
  huge[16 + 7] = '\x7f';  // the key length's top byte
  write(path, huge);
  EXPECT_FALSE(cache_load(dir_, "key").has_value());
  // Not a CUBIN at all (valid framing, no ELF magic).
  cache_store(dir_, "key", std::vector<char>(64, 'n'));
  EXPECT_FALSE(cache_load(dir_, "key").has_value());
  // A good entry again is read again.
  write(path, good);
  EXPECT_EQ(cache_load(dir_, "key"), cubin);
}

TEST_F(RuntimeCache, EntryOfAnotherKeyUnderTheSameNameIsAMiss) {
  // As if two key texts hashed alike: the entry file of "key A" holds the entry of "key B".
  std::string path_b = cache_store(dir_, "key B", fake_cubin(64, 'b'));
  fs::copy_file(path_b, entry("key A"), fs::copy_options::overwrite_existing);
  EXPECT_FALSE(cache_load(dir_, "key A").has_value());
}

TEST_F(RuntimeCache, ConcurrentWritersLeaveAValidEntry) {
  std::vector<std::thread> writers;
  for (int t = 0; t < 8; ++t)
    writers.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) cache_store(dir_, "shared key", fake_cubin(4096 + 64 * t, char('a' + t)));
    });
  // A reader running alongside sees a complete entry or none, never a torn one.
  for (int i = 0; i < 200; ++i)
    if (auto cubin = cache_load(dir_, "shared key")) EXPECT_EQ(cubin->size() % 64, 0u);
  for (auto& writer : writers) writer.join();
  std::optional<std::vector<char>> cubin = cache_load(dir_, "shared key");
  ASSERT_TRUE(cubin.has_value());
  EXPECT_EQ((cubin->size() - 4096) / 64, size_t(cubin->back() - 'a'));
  size_t files = std::distance(fs::directory_iterator(dir_), fs::directory_iterator());
  EXPECT_EQ(files, 1u);
}

}  // namespace
}  // namespace solder::runtime
