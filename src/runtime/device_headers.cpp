// Solder's device headers as NVRTC sees them: embedded in the binary by the build
// (src/runtime/embed_headers.cmake), or read from the source tree when the build does not embed them,
// plus any added at run time with register_embedded_header().
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <regex>
#include <sstream>

#include "runtime/embedded_headers.h"
#include "runtime/runtime.h"

namespace solder::runtime {

namespace fs = std::filesystem;

namespace {

// The headers the build or the source tree provides, found once per process.
struct BaseHeaders {
  std::map<std::string, std::string> headers;  // path → text
  std::string origin;
};

#ifndef SOLDER_EMBEDDED_DEVICE_HEADERS
// ---- Reading the headers from the source tree (builds that do not embed them) ----------------

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Every *.cuh and *.h under `root`, named relative to it.
BaseHeaders read_header_tree(const fs::path& root) {
  BaseHeaders base;
  base.origin = root.string();
  std::error_code error;
  for (auto it = fs::recursive_directory_iterator(root, error); !error && it != fs::recursive_directory_iterator();
       it.increment(error)) {
    if (!it->is_regular_file()) continue;
    std::string extension = it->path().extension().string();
    if (extension != ".cuh" && extension != ".h") continue;
    base.headers[fs::relative(it->path(), root).generic_string()] = read_file(it->path());
  }
  return base;
}

// The device/ folder of the source tree: $SOLDER_SOURCE_DIR/device, or the first device/ (holding a
// solder/ folder) beside the executable or one of its parents (build/solder → device/).
std::optional<fs::path> find_source_device_folder(std::string* looked_at) {
  auto usable = [](const fs::path& folder) {
    std::error_code error;
    return fs::is_directory(folder / "solder", error);
  };
  if (const char* source = std::getenv("SOLDER_SOURCE_DIR"); source && *source) {
    fs::path folder = fs::path(source) / "device";
    if (usable(folder)) return folder;
    *looked_at += " " + folder.string();
  }
  std::error_code error;
  fs::path executable = fs::read_symlink("/proc/self/exe", error);
  if (!error) {
    fs::path folder = executable.parent_path();
    for (int level = 0; level < 4 && !folder.empty(); ++level, folder = folder.parent_path()) {
      if (usable(folder / "device")) return folder / "device";
      *looked_at += " " + (folder / "device").string();
      if (folder == folder.root_path()) break;
    }
  }
  return std::nullopt;
}

#endif  // SOLDER_EMBEDDED_DEVICE_HEADERS

BaseHeaders load_base_headers() {
#ifdef SOLDER_EMBEDDED_DEVICE_HEADERS
  BaseHeaders base;
  base.origin = "embedded in the binary";
  for (size_t i = 0; i < detail::embedded_device_header_count; ++i) {
    const detail::EmbeddedHeader& header = detail::embedded_device_headers[i];
    base.headers[header.path] = std::string(header.text, header.size);
  }
  return base;
#else
  std::string looked_at;
  if (std::optional<fs::path> folder = find_source_device_folder(&looked_at)) return read_header_tree(*folder);
  BaseHeaders none;
  none.origin = "none: they are not embedded in this binary (the build does not include "
                "src/runtime/embed_headers.cmake) and no device/ folder was found at" + looked_at +
                " (set SOLDER_SOURCE_DIR to the source tree)";
  return none;
#endif
}

struct Registry {
  std::mutex mutex;
  std::optional<BaseHeaders> base;
  std::map<std::string, std::string> registered;  // path → text, added at run time
};

Registry& registry() {
  static Registry instance;
  return instance;
}

}  // namespace

void register_embedded_header(const std::string& path, const std::string& text) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.registered[path] = text;
}

DeviceHeaderSet device_headers() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  if (!r.base) r.base = load_base_headers();
  std::map<std::string, std::string> all = r.base->headers;
  for (const auto& [path, text] : r.registered) all[path] = text;

  DeviceHeaderSet set;
  set.origin = r.base->origin;
  if (!r.registered.empty()) set.origin += " (+" + std::to_string(r.registered.size()) + " registered at run time)";
  unsigned long long digest = detail::fnv1a_64("", 0);
  for (auto& [path, text] : all) {
    digest = detail::fnv1a_64(path.data(), path.size() + 1, digest);  // the '\0' separates path and text
    digest = detail::fnv1a_64(text.data(), text.size(), digest);
    set.headers.push_back(DeviceHeader{path, std::move(text)});
  }
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", digest);
  set.digest = hex;
  return set;
}

namespace detail {

std::string resolve_relative_includes(const std::string& path, const std::string& text,
                                      const std::set<std::string>& known_paths) {
  static const std::regex quoted_include(R"(^(\s*#\s*include\s*")([^"]+)("[\s\S]*)$)");
  fs::path folder = fs::path(path).parent_path();
  std::string out;
  out.reserve(text.size());
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    size_t stop = end == std::string::npos ? text.size() : end;
    std::string line = text.substr(start, stop - start);
    std::smatch match;
    if (line.find("include") != std::string::npos && std::regex_match(line, match, quoted_include)) {
      std::string resolved = (folder / match[2].str()).lexically_normal().generic_string();
      if (resolved != match[2].str() && known_paths.count(resolved))
        line = match[1].str() + resolved + match[3].str();
    }
    out += line;
    if (end != std::string::npos) out += '\n';
    start = stop + 1;
  }
  return out;
}

}  // namespace detail

}  // namespace solder::runtime
