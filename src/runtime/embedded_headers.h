// Private to src/runtime: the table of device headers that src/runtime/embed_headers.cmake generates
// (build/generated/embedded_device_headers.cpp) when the top CMakeLists.txt includes it, and the
// rewrite that lets NVRTC resolve includes between in-memory headers.
#pragma once

#include <cstddef>
#include <set>
#include <string>

namespace solder::runtime::detail {

struct EmbeddedHeader {
  const char* path;  // relative to device/, e.g. "solder/cluster/cluster.cuh"
  const char* text;
  size_t size;
};

// Defined in the generated file; device_headers.cpp refers to it only when the build defines
// SOLDER_EMBEDDED_DEVICE_HEADERS (which the CMake fragment does for that one source file).
extern const EmbeddedHeader embedded_device_headers[];
extern const size_t embedded_device_header_count;

// NVRTC looks up an in-memory header only by the exact name an #include spells, so `#include
// "ptx.cuh"` inside solder/cluster/cluster.cuh would not find solder/cluster/ptx.cuh. This returns the
// header's text with each quoted include that names another header of `known_paths` relative to
// `path` spelled as that header's full path. Lines are neither added nor removed.
std::string resolve_relative_includes(const std::string& path, const std::string& text,
                                      const std::set<std::string>& known_paths);

// FNV-1a, 64 bits: the hash of cache keys and header digests (not cryptographic; the cache compares
// the full key text, so a collision costs a recompile, never a wrong CUBIN).
inline unsigned long long fnv1a_64(const char* data, size_t size, unsigned long long hash = 14695981039346656037ull) {
  for (size_t i = 0; i < size; ++i) {
    hash ^= static_cast<unsigned char>(data[i]);
    hash *= 1099511628211ull;
  }
  return hash;
}

}  // namespace solder::runtime::detail
