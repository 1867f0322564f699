// The on-disk compile cache: one file per CUBIN, written atomically (temporary file + rename), read
// defensively (anything malformed is a miss).
//
// Entry layout, <dir>/<cache_key>.cubin:
//   "solder-cubin-v1\n"      magic
//   u64 n, n bytes           the key text (compared in full on load)
//   u64 m, m bytes           the CUBIN (an ELF image)
//   u64                      FNV-1a of every byte above
// Integers are little-endian.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "runtime/embedded_headers.h"
#include "runtime/runtime.h"
#include "support/atomic_file.h"

namespace solder::runtime {

namespace fs = std::filesystem;

namespace {

constexpr char kMagic[] = "solder-cubin-v1\n";
constexpr size_t kMagicSize = sizeof(kMagic) - 1;

void put_u64(std::string& out, uint64_t value) {
  for (int i = 0; i < 8; ++i) out += static_cast<char>((value >> (8 * i)) & 0xff);
}

bool get_u64(const std::string& data, size_t& at, uint64_t* value) {
  if (data.size() - at < 8) return false;
  *value = 0;
  for (int i = 0; i < 8; ++i) *value |= uint64_t(static_cast<unsigned char>(data[at + i])) << (8 * i);
  at += 8;
  return true;
}

fs::path entry_path(const std::string& dir, const std::string& key_text) {
  return fs::path(dir) / (cache_key(key_text) + ".cubin");
}

}  // namespace

std::string compile_key_text(const std::string& source, const std::string& name,
                             const std::vector<std::string>& options, const std::string& nvrtc_version,
                             const std::string& headers_digest) {
  std::string key = "nvrtc " + nvrtc_version + "\nheaders " + headers_digest + "\n";
  for (const std::string& option : options) key += "option " + option + "\n";
  key += "name " + name + "\nsource " + std::to_string(source.size()) + "\n" + source;
  return key;
}

std::string cache_key(const std::string& key_text) {
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", detail::fnv1a_64(key_text.data(), key_text.size()));
  return hex;
}

std::string cache_directory(const CompileFlags& flags) {
  if (!flags.cache_dir.empty()) return flags.cache_dir;
  if (const char* dir = std::getenv("SOLDER_CACHE_DIR"); dir && *dir) return dir;
  if (const char* home = std::getenv("HOME"); home && *home) return (fs::path(home) / ".cache" / "solder").string();
  return "";
}

std::optional<std::vector<char>> cache_load(const std::string& dir, const std::string& key_text) {
  if (dir.empty()) return std::nullopt;
  std::ifstream in(entry_path(dir, key_text), std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream buffer;
  buffer << in.rdbuf();
  const std::string data = buffer.str();

  size_t at = kMagicSize;
  uint64_t key_size = 0, cubin_size = 0, checksum = 0;
  if (data.size() < kMagicSize || data.compare(0, kMagicSize, kMagic) != 0) return std::nullopt;
  if (!get_u64(data, at, &key_size) || key_size > data.size() - at) return std::nullopt;
  if (data.compare(at, key_size, key_text) != 0 || key_size != key_text.size()) return std::nullopt;
  at += key_size;
  if (!get_u64(data, at, &cubin_size) || cubin_size > data.size() - at) return std::nullopt;
  size_t cubin_at = at;
  at += cubin_size;
  size_t checked_bytes = at;
  if (!get_u64(data, at, &checksum) || at != data.size()) return std::nullopt;
  if (checksum != detail::fnv1a_64(data.data(), checked_bytes)) return std::nullopt;
  if (cubin_size < 4 || data.compare(cubin_at, 4, "\x7f" "ELF") != 0) return std::nullopt;
  return std::vector<char>(data.begin() + cubin_at, data.begin() + cubin_at + cubin_size);
}

std::string cache_store(const std::string& dir, const std::string& key_text, const std::vector<char>& cubin) {
  if (dir.empty()) return "";
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) return "";

  std::string data(kMagic, kMagicSize);
  put_u64(data, key_text.size());
  data += key_text;
  put_u64(data, cubin.size());
  data.append(cubin.data(), cubin.size());
  put_u64(data, detail::fnv1a_64(data.data(), data.size()));

  // A random temporary name beside the entry, then rename(): readers see the old entry or the new one.
  fs::path final_path = entry_path(dir, key_text);
  if (!write_file_atomically(final_path.string(), data).empty()) return "";
  return final_path.string();
}

}  // namespace solder::runtime
