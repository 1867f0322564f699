// solder._solder: the nanobind module under the Python package `solder` (python/solder). It binds the
// public C++ API (include/solder/solder.h) and nothing else; the Python layer (python/solder/*.py) picks
// devices and streams, allocates outputs and keeps the compile cache.
//
// Tensors cross as nb::ndarray<> (DLPack or the buffer protocol): no copy. Every solder::Error becomes
// one of the Python exceptions of solder.errors, carrying file, line, column and the formatted message.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <solder/solder.h>

namespace nb = nanobind;
using namespace nb::literals;

namespace {

solder::DType dtype_of(const std::string& name) {
  static const std::pair<const char*, solder::DType> table[] = {
      {"f32", solder::DType::f32}, {"f16", solder::DType::f16}, {"bf16", solder::DType::bf16}, {"f8e4m3", solder::DType::f8e4m3},
      {"f8e5m2", solder::DType::f8e5m2}, {"i32", solder::DType::i32}, {"bool", solder::DType::boolean}};
  for (auto& [n, d] : table)
    if (name == n) return d;
  throw solder::Error("device: unknown dtype '" + name + "'");
}

// The Solder dtype of a DLPack dtype, or "" when Solder has none.
std::string dtype_of(nb::dlpack::dtype d) {
  if (d.lanes != 1) return "";
  switch (static_cast<nb::dlpack::dtype_code>(d.code)) {
    case nb::dlpack::dtype_code::Float:
      return d.bits == 32 ? "f32" : d.bits == 16 ? "f16" : "";
    case nb::dlpack::dtype_code::Bfloat:
      return d.bits == 16 ? "bf16" : "";
    case nb::dlpack::dtype_code::Int:
      return d.bits == 32 ? "i32" : "";
    case nb::dlpack::dtype_code::Bool:
      return d.bits == 8 ? "bool" : "";
    default:
      return "";
  }
}

std::string dlpack_dtype_text(nb::dlpack::dtype d) {
  static const char* codes[] = {"int", "uint", "float", "opaque", "bfloat", "complex", "bool"};
  std::string code = d.code < 7 ? codes[d.code] : "code " + std::to_string(d.code);
  return code + std::to_string(d.bits) + (d.lanes != 1 ? "x" + std::to_string(d.lanes) : "");
}

nb::tuple spec_tuple(const solder::TensorSpec& s) {
  return nb::make_tuple(s.name, s.shape, std::string(solder::dtype_name(s.dtype)));
}

// One ndarray → a TensorArg, after checking that it lives where the kernel runs.
solder::TensorArg tensor_arg(const solder::Kernel& kernel, const char* what, size_t i, const nb::ndarray<>& a) {
  std::string who = "call of kernel '" + kernel.name() + "': " + what + " " + std::to_string(i);
  std::string dt = dtype_of(a.dtype());
  if (dt.empty()) throw solder::Error(who + ": the tensor's dtype " + dlpack_dtype_text(a.dtype()) + " has no Solder dtype (f32, f16, bf16, i32, bool)");
  int device = a.device_type();
  bool on_cuda = device == nb::device::cuda::value;
  bool on_host = device == nb::device::cpu::value || device == nb::device::cuda_host::value;
  if (kernel.device() == solder::Device::cuda && !on_cuda)
    throw solder::Error(who + ": the kernel runs on the GPU (cuda) but the tensor is in host memory: move it to the GPU first");
  if (kernel.device() == solder::Device::cpu && !on_host)
    throw solder::Error(who + ": the kernel runs on the CPU executor but the tensor is in device memory (DLPack device type " +
                        std::to_string(device) + "): pass host tensors, or compile with device='cuda'");
  if (a.ndim() > static_cast<size_t>(solder::TensorArg::kMaxRank))
    throw solder::Error(who + ": rank " + std::to_string(a.ndim()) + " is over the limit of " + std::to_string(solder::TensorArg::kMaxRank));
  int64_t shape[solder::TensorArg::kMaxRank], strides[solder::TensorArg::kMaxRank];
  for (size_t d = 0; d < a.ndim(); ++d) {
    shape[d] = static_cast<int64_t>(a.shape(d));
    strides[d] = static_cast<int64_t>(a.stride(d));
  }
  return solder::TensorArg(a.data(), dtype_of(dt), std::span<const int64_t>(shape, a.ndim()), std::span<const int64_t>(strides, a.ndim()));
}

}  // namespace

NB_MODULE(_solder, m) {
  m.doc() = "Solder's native module (the public C++ API); use the package `solder`.";
  // Kernels kept in solder.compile's cache live until the interpreter exits: not leaks.
  nb::set_leak_warnings(false);

  nb::module_ errors = nb::module_::import_("solder.errors");
  static nb::object program_error = errors.attr("ProgramError");
  static nb::object argument_error = errors.attr("ArgumentError");
  static nb::object solder_error = errors.attr("SolderError");
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const solder::Error& e) {
      const std::string& msg = e.message();
      nb::object type = solder_error;
      if (!e.file().empty() || e.loc().known()) type = program_error;
      if (msg.rfind("call of kernel", 0) == 0 || msg.rfind("TensorArg", 0) == 0 || msg.rfind("compile option", 0) == 0)
        type = argument_error;
      nb::object exc = type(e.formatted(), e.file(), e.loc().line, e.loc().column, msg);
      PyErr_SetObject(type.ptr(), exc.ptr());
    }
  });

  m.def("cuda_available", [] {
    std::string why;
    bool ok = solder::cuda_available(&why);
    return nb::make_tuple(ok, why);
  }, "(available, why not)");

  nb::class_<solder::Kernel>(m, "NativeKernel")
      .def_prop_ro("device", [](const solder::Kernel& k) { return std::string(solder::device_name(k.device())); })
      .def_prop_ro("name", &solder::Kernel::name)
      .def_prop_ro("dims", &solder::Kernel::dims)
      .def_prop_ro("inputs", [](const solder::Kernel& k) { nb::list l; for (auto& s : k.inputs()) l.append(spec_tuple(s)); return l; })
      .def_prop_ro("outputs", [](const solder::Kernel& k) { nb::list l; for (auto& s : k.outputs()) l.append(spec_tuple(s)); return l; })
      .def_prop_ro("workspace_tensors", [](const solder::Kernel& k) { nb::list l; for (auto& s : k.workspace_tensors()) l.append(spec_tuple(s)); return l; })
      .def_prop_ro("workspace_bytes", &solder::Kernel::workspace_bytes)
      .def_prop_ro("kernel_count", &solder::Kernel::kernel_count)
      .def("report_text", &solder::Kernel::report_text)
      .def("report_json", &solder::Kernel::report_json)
      .def("kernel_ir", &solder::Kernel::kernel_ir)
      .def("schedule_text", &solder::Kernel::schedule_text)
      .def("cuda_source", &solder::Kernel::cuda_source)
      .def("call", [](const solder::Kernel& k, const std::vector<nb::ndarray<>>& inputs, const std::vector<nb::ndarray<>>& outputs,
                      uintptr_t workspace, uintptr_t stream) {
        std::vector<solder::TensorArg> in, out;
        for (size_t i = 0; i < inputs.size(); ++i) in.push_back(tensor_arg(k, "input", i, inputs[i]));
        for (size_t i = 0; i < outputs.size(); ++i) out.push_back(tensor_arg(k, "output", i, outputs[i]));
        if (k.device() == solder::Device::cpu) {
          nb::gil_scoped_release release;  // the CPU executor runs on its own threads
          k(in, out, reinterpret_cast<void*>(workspace), reinterpret_cast<void*>(stream));
        } else {
          k(in, out, reinterpret_cast<void*>(workspace), reinterpret_cast<void*>(stream));
        }
      }, "inputs"_a, "outputs"_a, "workspace"_a = 0, "stream"_a = 0);

  nb::class_<solder::Program>(m, "NativeProgram")
      .def_static("from_text", &solder::Program::from_text, "text"_a, "file"_a = "<program>")
      .def_static("from_file", &solder::Program::from_file, "path"_a)
      .def_prop_ro("name", &solder::Program::name)
      .def("text", &solder::Program::text)
      .def("dims", [](const solder::Program& p, const std::map<std::string, int64_t>& dims, bool small) {
        solder::CompileOptions o;
        o.dims = dims;
        o.small = small;
        return p.dims(o);
      }, "dims"_a, "small"_a = false)
      .def("compile", [](const solder::Program& p, const std::map<std::string, int64_t>& dims, bool small, bool fuse, const std::string& device,
                         bool gemm_skeleton) {
        solder::CompileOptions o;
        o.dims = dims;
        o.small = small;
        o.fuse = fuse;
        o.gemm_skeleton = gemm_skeleton;
        if (device == "cpu") o.device = solder::Device::cpu;
        else if (device == "cuda") o.device = solder::Device::cuda;
        else if (device == "auto") o.device = solder::Device::automatic;
        else throw solder::Error("compile option device: expected 'auto', 'cpu' or 'cuda', found '" + device + "'");
        nb::gil_scoped_release release;
        return p.compile(o);
      }, "dims"_a, "small"_a = false, "fuse"_a = true, "device"_a = "auto", "gemm_skeleton"_a = true);
}
