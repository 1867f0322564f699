// write_file_atomically: a fresh temporary (O_EXCL|O_NOFOLLOW, random name) renamed over the target;
// targets that are not regular files are refused; failures leave nothing behind and say why.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "ir/diagnostics.h"
#include "support/atomic_file.h"

namespace solder {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path;
  TempDir() {
    char name[] = "/tmp/solder-atomic-XXXXXX";
    path = mkdtemp(name);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
  // Every entry of the directory, to see that no temporary is left behind.
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    for (auto& e : fs::directory_iterator(path)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }
};

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(AtomicFile, WritesAndReplacesARegularFile) {
  TempDir dir;
  EXPECT_EQ(write_file_atomically(dir / "out.cu", "first"), "");
  EXPECT_EQ(read(dir / "out.cu"), "first");
  chmod((dir / "out.cu").c_str(), 0640);
  EXPECT_EQ(write_file_atomically(dir / "out.cu", "second"), "");
  EXPECT_EQ(read(dir / "out.cu"), "second");
  struct stat st;
  ASSERT_EQ(stat((dir / "out.cu").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);  // the permissions are kept
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"out.cu"});
}

TEST(AtomicFile, ASymlinkPlantedAtTheOldTemporaryNameIsNotFollowed) {
  TempDir dir;
  { std::ofstream(dir / "victim") << "precious"; }
  // The old writer used the fixed name OUT.tmp-solder with O_TRUNC: a symlink there was followed.
  fs::create_symlink(dir / "victim", dir / "out.cu.tmp-solder");
  EXPECT_EQ(write_file_atomically(dir / "out.cu", "generated"), "");
  EXPECT_EQ(read(dir / "victim"), "precious");
  EXPECT_EQ(read(dir / "out.cu"), "generated");
  EXPECT_TRUE(fs::is_symlink(dir / "out.cu.tmp-solder"));
  EXPECT_EQ(dir.entries().size(), 3u);
}

TEST(AtomicFile, AFifoDirectoryOrDeviceAsTheTargetIsRefused) {
  TempDir dir;
  ASSERT_EQ(mkfifo((dir / "fifo").c_str(), 0600), 0);
  std::string error = write_file_atomically(dir / "fifo", "x");
  EXPECT_NE(error.find("is a FIFO, not a regular file"), std::string::npos) << error;
  struct stat st;
  ASSERT_EQ(lstat((dir / "fifo").c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));  // still the FIFO, not replaced

  fs::create_directory(dir / "sub");
  error = write_file_atomically(dir / "sub", "x");
  EXPECT_NE(error.find("is a directory"), std::string::npos) << error;

  fs::create_symlink(dir / "fifo", dir / "link-to-fifo");
  error = write_file_atomically(dir / "link-to-fifo", "x");
  EXPECT_NE(error.find("is a FIFO"), std::string::npos) << error;
  EXPECT_TRUE(fs::is_symlink(dir / "link-to-fifo"));

  error = write_file_atomically("/dev/null", "x");
  EXPECT_NE(error.find("is a character device"), std::string::npos) << error;
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"fifo", "link-to-fifo", "sub"}));
}

TEST(AtomicFile, ASymlinkToARegularFileIsReplacedNotWrittenThrough) {
  TempDir dir;
  { std::ofstream(dir / "target") << "keep"; }
  fs::create_symlink(dir / "target", dir / "out.cu");
  EXPECT_EQ(write_file_atomically(dir / "out.cu", "new"), "");
  EXPECT_EQ(read(dir / "target"), "keep");
  EXPECT_FALSE(fs::is_symlink(dir / "out.cu"));
  EXPECT_EQ(read(dir / "out.cu"), "new");
}

TEST(AtomicFile, FailuresSayWhyAndLeaveNothingBehind) {
  TempDir dir;
  std::string error = write_file_atomically(dir / "missing/out.cu", "x");
  EXPECT_NE(error.find("cannot write '" + (dir / "missing/out.cu") + "'"), std::string::npos) << error;
  EXPECT_NE(error.find("No such file or directory"), std::string::npos) << error;
  if (geteuid() != 0) {  // root ignores directory permissions
    fs::create_directory(dir / "locked");
    chmod((dir / "locked").c_str(), 0500);
    error = write_file_atomically(dir / "locked/out.cu", "x");
    EXPECT_NE(error.find("Permission denied"), std::string::npos) << error;
    chmod((dir / "locked").c_str(), 0700);
  }
  // A name ending in a slash names a directory.
  error = write_file_atomically(dir / "trailing/", "x");
  EXPECT_FALSE(error.empty());
  EXPECT_THROW(write_file_atomically_or_throw(dir / "missing/out.cu", "x"), Error);
  for (auto& name : dir.entries()) EXPECT_EQ(name.find("tmp"), std::string::npos) << name;
}

TEST(AtomicFile, TemporaryNamesAreFreshEachTime) {
  // Many writers of one target in one directory: each creates its own temporary (O_EXCL), so all
  // succeed and the target holds one complete text.
  TempDir dir;
  std::vector<std::thread> writers;
  std::atomic<int> failures{0};
  for (int t = 0; t < 8; ++t)
    writers.emplace_back([&, t] {
      std::string text(10000, static_cast<char>('a' + t));
      for (int i = 0; i < 20; ++i)
        if (!write_file_atomically(dir / "out", text).empty()) ++failures;
    });
  for (auto& w : writers) w.join();
  EXPECT_EQ(failures.load(), 0);
  std::string text = read(dir / "out");
  ASSERT_EQ(text.size(), 10000u);
  EXPECT_EQ(text, std::string(10000, text[0]));
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"out"});
}

}  // namespace
}  // namespace solder
