// Compiling generated CUDA with NVRTC (through the on-disk cache), and finding the CUDA toolkit's
// headers at run time.
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <utility>
#include <vector>

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
  const std::string key_text = compile_key_text(source, name, options, nvrtc_version(), headers.digest);
  const std::string cache_dir = flags.use_cache ? cache_directory(flags) : "";

  CompiledModule compiled;
  compiled.name = name;
  if (std::optional<std::vector<char>> cubin = cache_load(cache_dir, key_text)) {
    compiled.cubin = std::move(*cubin);
    compiled.from_cache = true;
    compiled.cache_path = (fs::path(cache_dir) / (cache_key(key_text) + ".cubin")).string();
    return compiled;
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

  ProgramGuard guard{*api};
  nvrtcResult result = api->create_program(&guard.program, source.c_str(), name.c_str(),
                                           static_cast<int>(header_pointers.size()), header_pointers.data(),
                                           include_names.data());
  if (result != NVRTC_SUCCESS) throw Error("nvrtcCreateProgram failed for '" + name + "': " + nvrtc_error(*api, result));
  auto start = std::chrono::steady_clock::now();
  result = api->compile_program(guard.program, static_cast<int>(option_pointers.size()), option_pointers.data());
  compiled.compile_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  size_t log_size = 0;
  std::string log;
  if (api->get_program_log_size(guard.program, &log_size) == NVRTC_SUCCESS && log_size > 1) {
    log.resize(log_size);
    api->get_program_log(guard.program, log.data());
    log.resize(log_size - 1);  // the terminating '\0'
  }
  if (result != NVRTC_SUCCESS) throw Error(compile_error_message(name, flags, result, *api, log, source, headers));

  size_t cubin_size = 0;
  result = api->get_cubin_size(guard.program, &cubin_size);
  if (result != NVRTC_SUCCESS || cubin_size == 0)
    throw Error("NVRTC compiled '" + name + "' but returned no CUBIN (" + nvrtc_error(*api, result) + ")");
  compiled.cubin.resize(cubin_size);
  result = api->get_cubin(guard.program, compiled.cubin.data());
  if (result != NVRTC_SUCCESS) throw Error("nvrtcGetCUBIN failed for '" + name + "': " + nvrtc_error(*api, result));
  compiled.log = log;
  compiled.cache_path = cache_store(cache_dir, key_text, compiled.cubin);
  return compiled;
}

}  // namespace solder::runtime
