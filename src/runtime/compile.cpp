// Compiling generated CUDA with NVRTC (through the on-disk cache), and finding the CUDA toolkit's
// headers at run time.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include "ir/diagnostics.h"
#include "runtime/compile_log.h"
#include "runtime/cuda_api.h"
#include "runtime/embedded_headers.h"
#include "runtime/runtime.h"

namespace solder::runtime {

namespace fs = std::filesystem;
using namespace cuda;

namespace {

// The CUDA toolkit's include folders NVRTC needs: <root>/include, and <root>/include/cccl where the
// toolkit keeps CCCL (<cuda/ptx>, <cuda/std/...>) there (CUDA 13).
struct Toolkit {
  std::vector<std::string> include_dirs;
  std::string looked_at;  // when none was found: the roots tried
};

const Toolkit& toolkit() {
  static const Toolkit found = [] {
    std::vector<fs::path> roots;
    for (const char* variable : {"CUDA_HOME", "CUDA_PATH"})
      if (const char* root = std::getenv(variable); root && *root) roots.emplace_back(root);
    // The toolkit NVRTC came from: <root>/lib64/libnvrtc.so or <root>/targets/<arch>/lib/libnvrtc.so.
    std::string ignored;
    if (const NvrtcApi* api = try_nvrtc(&ignored); api && !api->library_path.empty()) {
      fs::path folder = fs::path(api->library_path).parent_path();
      for (int level = 0; level < 3 && folder.has_parent_path(); ++level) roots.push_back(folder = folder.parent_path());
    }
    roots.emplace_back("/usr/local/cuda");
    Toolkit toolkit;
    for (const fs::path& root : roots) {
      std::error_code error;
      if (!fs::exists(root / "include" / "cuda_runtime_api.h", error)) {
        toolkit.looked_at += " " + root.string();
        continue;
      }
      toolkit.include_dirs.push_back((root / "include").string());
      if (fs::is_directory(root / "include" / "cccl", error)) toolkit.include_dirs.push_back((root / "include" / "cccl").string());
      toolkit.looked_at.clear();
      break;
    }
    return toolkit;
  }();
  return found;
}

std::string nvrtc_error(const NvrtcApi& api, nvrtcResult result) {
  const char* text = api.get_error_string(result);
  return text ? text : "NVRTC error " + std::to_string(result);
}

// Destroys the NVRTC program on every path out of compile_cuda.
struct ProgramGuard {
  const NvrtcApi& api;
  nvrtcProgram program = nullptr;
  ~ProgramGuard() {
    if (program) api.destroy_program(&program);
  }
};

// The message of a failed compile: the quoted errors, NVRTC's whole log, and hints when something the
// source needs (the device headers, the toolkit headers) was not found.
std::string compile_error_message(const std::string& name, const CompileFlags& flags, nvrtcResult result,
                                  const NvrtcApi& api, const std::string& log, const std::string& source,
                                  const DeviceHeaderSet& headers) {
  std::map<std::string, const std::string*> texts{{name, &source}};
  for (const DeviceHeader& header : headers.headers) texts.emplace(header.path, &header.text);
  std::string message = "NVRTC " + nvrtc_version() + " could not compile '" + name + "' for " + flags.arch + " (" +
                         nvrtc_error(api, result) + ")\n";
  message += detail::quote_compile_errors(log, texts);
  message += "NVRTC log:\n" + log;
  if (!message.empty() && message.back() != '\n') message += '\n';
  if (log.find("\"solder/") != std::string::npos && headers.headers.empty())
    message += "note: Solder's device headers: " + headers.origin + "\n";
  if (toolkit().include_dirs.empty())
    message += "note: the CUDA toolkit's headers were not found (looked in" + toolkit().looked_at +
               "); set CUDA_HOME\n";
  return message;
}

}  // namespace

std::string cutlass_include_dir(std::string* why) {
  std::vector<std::pair<std::string, std::string>> candidates;  // (folder, where it came from)
  if (const char* path = std::getenv("SOLDER_CUTLASS_INCLUDE"); path && *path)
    candidates.emplace_back(path, "$SOLDER_CUTLASS_INCLUDE");
#ifdef SOLDER_CUTLASS_INCLUDE_DEFAULT
  if (*SOLDER_CUTLASS_INCLUDE_DEFAULT) candidates.emplace_back(SOLDER_CUTLASS_INCLUDE_DEFAULT, "the build (CMake)");
#endif
  std::string looked;
  for (const auto& [folder, origin] : candidates) {
    std::error_code error;
    if (fs::exists(fs::path(folder) / "cute" / "tensor.hpp", error)) return folder;
    looked += " " + folder + " (" + origin + ")";
  }
  if (why) {
    *why = looked.empty() ? "the CUTLASS/CuTe headers were not found: set SOLDER_CUTLASS_INCLUDE, or pip install "
                            "nvidia-cutlass==4.2.0.0 and re-run cmake (scripts/setup.sh does both)"
                          : "no cute/tensor.hpp in" + looked;
  }
  return "";
}

bool nvrtc_available(std::string* why) { return try_nvrtc(why) != nullptr; }

std::string nvrtc_version() {
  std::string ignored;
  const NvrtcApi* api = try_nvrtc(&ignored);
  int major = 0, minor = 0;
  if (!api || api->version(&major, &minor) != NVRTC_SUCCESS) return "";
  return std::to_string(major) + "." + std::to_string(minor);
}

std::vector<std::string> nvrtc_options(const CompileFlags& flags) {
  std::vector<std::string> options = {"--gpu-architecture=" + flags.arch, "-std=c++20", "-default-device"};
  if (flags.fast_math) options.push_back("--use_fast_math");
  if (flags.line_info) options.push_back("-lineinfo");
  if (flags.debug) options.push_back("-G");
  if (flags.max_registers > 0) options.push_back("--maxrregcount=" + std::to_string(flags.max_registers));
  for (const std::string& define : flags.defines) options.push_back("-D" + define);
  for (const std::string& folder : toolkit().include_dirs) options.push_back("--include-path=" + folder);
  if (std::string cutlass = cutlass_include_dir(); !cutlass.empty()) options.push_back("--include-path=" + cutlass);
  for (const std::string& option : flags.extra_options) options.push_back(option);
  return options;
}

namespace {

// One translation unit through the cache and NVRTC.
struct Part {
  std::vector<char> cubin;
  std::string log;
  bool from_cache = false;
  std::string cache_path;
  double compile_seconds = 0;
};

Part compile_part(const NvrtcApi& api, const DeviceHeaderSet& headers, const std::string& source, const std::string& name,
                  const CompileFlags& flags, const std::vector<std::string>& options, const std::string& cache_dir) {
  const std::string key_text = compile_key_text(source, name, options, nvrtc_version(), headers.digest);
  Part part;
  if (std::optional<std::vector<char>> cubin = cache_load(cache_dir, key_text)) {
    part.cubin = std::move(*cubin);
    part.from_cache = true;
    part.cache_path = (fs::path(cache_dir) / (cache_key(key_text) + ".cubin")).string();
    return part;
  }

  // Device headers go in memory, their relative includes spelled as full paths (see embedded_headers.h).
  std::set<std::string> known_paths;
  for (const DeviceHeader& header : headers.headers) known_paths.insert(header.path);
  std::vector<std::string> header_texts;
  std::vector<const char*> header_pointers, include_names, option_pointers;
  for (const DeviceHeader& header : headers.headers)
    header_texts.push_back(detail::resolve_relative_includes(header.path, header.text, known_paths));
  for (size_t i = 0; i < headers.headers.size(); ++i) {
    header_pointers.push_back(header_texts[i].c_str());
    include_names.push_back(headers.headers[i].path.c_str());
  }
  for (const std::string& option : options) option_pointers.push_back(option.c_str());

  ProgramGuard guard{api};
  nvrtcResult result = api.create_program(&guard.program, source.c_str(), name.c_str(),
                                          static_cast<int>(header_pointers.size()), header_pointers.data(),
                                          include_names.data());
  if (result != NVRTC_SUCCESS) throw Error("nvrtcCreateProgram failed for '" + name + "': " + nvrtc_error(api, result));
  auto start = std::chrono::steady_clock::now();
  result = api.compile_program(guard.program, static_cast<int>(option_pointers.size()), option_pointers.data());
  part.compile_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  size_t log_size = 0;
  if (api.get_program_log_size(guard.program, &log_size) == NVRTC_SUCCESS && log_size > 1) {
    part.log.resize(log_size);
    api.get_program_log(guard.program, part.log.data());
    part.log.resize(log_size - 1);  // the terminating '\0'
  }
  if (result != NVRTC_SUCCESS) throw Error(compile_error_message(name, flags, result, api, part.log, source, headers));

  size_t cubin_size = 0;
  result = api.get_cubin_size(guard.program, &cubin_size);
  if (result != NVRTC_SUCCESS || cubin_size == 0)
    throw Error("NVRTC compiled '" + name + "' but returned no CUBIN (" + nvrtc_error(api, result) + ")");
  part.cubin.resize(cubin_size);
  result = api.get_cubin(guard.program, part.cubin.data());
  if (result != NVRTC_SUCCESS) throw Error("nvrtcGetCUBIN failed for '" + name + "': " + nvrtc_error(api, result));
  part.cache_path = cache_store(cache_dir, key_text, part.cubin);
  return part;
}

std::atomic<int> default_jobs{1};

// How many translation units compile_cuda may compile at once, each in a process of its own.
int compile_jobs(const CompileFlags& flags) {
  int jobs = flags.jobs;
  if (jobs <= 0) {
    if (const char* text = std::getenv("SOLDER_COMPILE_JOBS"); text && *text) jobs = std::atoi(text);
  }
  if (jobs <= 0) jobs = default_jobs.load();
  return std::clamp(jobs, 1, 16);
}

// Compiles each unit not yet in the cache in a child process of its own. Threads would not do: NVRTC
// serializes the threads of one process (on the H100 host, nerf_mlp's 11 kernels as 11 units on 16
// threads took 46.6 s, against 14.4 s as one unit). A
// child compiles through compile_part, which stores the CUBIN in the cache, and exits; the parent then
// reads the cache. Returns false when a child failed (the caller then compiles the source whole).
bool compile_in_processes(const NvrtcApi& api, const DeviceHeaderSet& headers, const std::vector<std::string>& units,
                          const std::string& name, const CompileFlags& flags, const std::vector<std::string>& options,
                          const std::string& cache_dir, std::vector<Part>& parts) {
  std::vector<std::string> keys;
  std::vector<pid_t> children;
  std::vector<size_t> missing;
  for (size_t i = 0; i < units.size(); ++i) {
    keys.push_back(compile_key_text(units[i], name, options, nvrtc_version(), headers.digest));
    if (std::optional<std::vector<char>> cubin = cache_load(cache_dir, keys[i])) {
      parts[i].cubin = std::move(*cubin);
      parts[i].from_cache = true;
      parts[i].cache_path = (fs::path(cache_dir) / (cache_key(keys[i]) + ".cubin")).string();
    } else {
      missing.push_back(i);
    }
  }
  if (missing.size() == 1) {
    parts[missing[0]] = compile_part(api, headers, units[missing[0]], name, flags, options, cache_dir);
    return true;
  }
  std::fflush(nullptr);  // a child must not write what the parent had buffered
  for (size_t i : missing) {
    const pid_t child = fork();
    if (child == 0) {
      int status = 1;
      try {
        status = compile_part(api, headers, units[i], name, flags, options, cache_dir).cache_path.empty() ? 1 : 0;
      } catch (...) {
      }
      _exit(status);  // no destructors, no atexit handlers, no stdio flush: the parent owns those
    }
    children.push_back(child);
  }
  bool ok = true;
  for (pid_t child : children) {
    int status = 0;
    if (child < 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) ok = false;
  }
  if (!ok) return false;
  for (size_t i : missing) {
    std::optional<std::vector<char>> cubin = cache_load(cache_dir, keys[i]);
    if (!cubin) return false;
    parts[i].cubin = std::move(*cubin);
    parts[i].cache_path = (fs::path(cache_dir) / (cache_key(keys[i]) + ".cubin")).string();
  }
  return true;
}

}  // namespace

namespace detail {

// A namespace-scope variable definition (`__device__ long long x[3];`): a module-wide object that
// every translation unit would otherwise get a copy of.
static bool defines_module_variable(const std::string& line) {
  size_t start = line.find_first_not_of(" \t");
  if (start == std::string::npos || start != 0) return false;  // generated namespace-scope code starts at column 0
  std::string text = line;
  if (text.rfind("static ", 0) == 0) text = text.substr(7);
  if (text.rfind("__device__", 0) != 0 && text.rfind("__constant__", 0) != 0 && text.rfind("__managed__", 0) != 0)
    return false;
  const size_t paren = text.find('(');
  const size_t end = text.find_first_of(";=[");
  return end != std::string::npos && (paren == std::string::npos || end < paren);
}

constexpr size_t kMinSkeletonSectionsToSplit = 4;

// A section that includes a skeleton (CuTe) header: seconds of NVRTC, against well under one for the
// shared prelude and a plain kernel.
static bool heavy_section(const std::string& section) {
  return section.find("#include <solder/gemm/") != std::string::npos ||
         section.find("#include <solder/attention/") != std::string::npos;
}

std::vector<std::string> split_by_kernel(const std::string& source, int parts) {
  static const std::string kMarker = "// ---- kernel ";
  std::vector<size_t> starts;
  size_t line_start = 0;
  while (line_start < source.size()) {
    size_t line_end = source.find('\n', line_start);
    if (line_end == std::string::npos) line_end = source.size();
    const std::string line = source.substr(line_start, line_end - line_start);
    if (line.compare(0, kMarker.size(), kMarker) == 0) starts.push_back(line_start);
    if (defines_module_variable(line)) return {source};
    line_start = line_end + 1;
  }
  if (parts <= 1 || starts.size() < 2) return {source};
  const std::string prelude = source.substr(0, starts.front());
  std::vector<std::string> sections;
  size_t heavy = 0;
  for (size_t i = 0; i < starts.size(); ++i) {
    const size_t end = i + 1 < starts.size() ? starts[i + 1] : source.size();
    sections.push_back(source.substr(starts[i], end - starts[i]));
    heavy += heavy_section(sections.back()) ? 1 : 0;
  }
  // Each unit parses the CuTe headers again (seconds), so a split pays only for many skeleton kernels:
  // on the H100 host (16 threads) nerf_mlp's 7 took 10.7 s split against 14.7 s whole, while ffn's and
  // gated_ffn's 2 and linear_relu_backward's 3 took 0.5-1.5 s longer split.
  if (heavy < kMinSkeletonSectionsToSplit) return {source};
  // The heavy sections in contiguous runs of about equal count, one run a unit; a plain section joins
  // the unit of the heavy section before it (the first unit when none is), so that units keep the
  // kernels' order.
  const size_t groups = std::min<size_t>(static_cast<size_t>(parts), heavy);
  std::vector<std::string> units(groups, prelude);
  size_t seen = 0, unit = 0;
  for (const std::string& section : sections) {
    if (heavy_section(section)) unit = seen++ * groups / heavy;
    units[unit] += section;
  }
  return units;
}

}  // namespace detail

void set_default_compile_jobs(int jobs) { default_jobs = std::clamp(jobs, 1, 16); }

CompiledModule compile_cuda(const std::string& source, const std::string& given_name, const CompileFlags& flags) {
  const std::string name = given_name.empty() ? "solder_kernel.cu" : given_name;
  std::string why;
  const NvrtcApi* api = try_nvrtc(&why);
  if (!api) throw Error("cannot compile '" + name + "': " + why);
  if (flags.arch.rfind("sm_", 0) != 0)
    throw Error("cannot compile '" + name + "': the architecture must be a real one (sm_90a), not '" + flags.arch +
                "', for NVRTC to produce a CUBIN");

  const DeviceHeaderSet headers = device_headers();
  const std::vector<std::string> options = nvrtc_options(flags);
  const std::string cache_dir = flags.use_cache ? cache_directory(flags) : "";

  CompiledModule compiled;
  compiled.name = name;
  std::vector<std::string> units = detail::split_by_kernel(source, compile_jobs(flags));
  std::vector<Part> parts(units.size());
  const auto start = std::chrono::steady_clock::now();
  if (units.size() > 1) {
    // The children hand their CUBINs over through the cache: a private one when the cache is off.
    std::string transfer_dir = cache_dir;
    if (transfer_dir.empty()) {
      std::string pattern = (fs::temp_directory_path() / "solder-compile-XXXXXX").string();
      if (mkdtemp(pattern.data())) transfer_dir = pattern;
    }
    const bool done = !transfer_dir.empty() &&
                      compile_in_processes(*api, headers, units, name, flags, options, transfer_dir, parts);
    if (transfer_dir != cache_dir) {
      std::error_code ignored;
      fs::remove_all(transfer_dir, ignored);
      for (Part& part : parts) part.cache_path.clear();
    }
    // A split that does not compile (a kernel using another's definitions) is compiled whole, so that
    // the error, if any, is the program's own.
    if (!done) units.assign(1, source);
  }
  if (units.size() == 1) parts.assign(1, compile_part(*api, headers, source, name, flags, options, cache_dir));
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  compiled.from_cache = true;
  for (Part& part : parts) {
    compiled.cubins.push_back(std::move(part.cubin));
    if (!part.log.empty()) compiled.log += (compiled.log.empty() ? "" : "\n") + part.log;
    compiled.from_cache = compiled.from_cache && part.from_cache;
    if (compiled.cache_path.empty()) compiled.cache_path = part.cache_path;
  }
  compiled.compile_seconds = compiled.from_cache ? 0 : wall;
  return compiled;
}

}  // namespace solder::runtime
