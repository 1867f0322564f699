#include "plan/gemm_problem.h"

namespace solder {

int mma_type_bytes(MmaType type) {
  switch (type) {
    case MmaType::bf16:
    case MmaType::f16: return 2;
    case MmaType::f8e4m3:
    case MmaType::f8e5m2: return 1;
    case MmaType::tf32:
    case MmaType::tf32x3:
    case MmaType::f32: return 4;
  }
  return 0;
}

std::optional<MmaType> mma_type_for(DType dtype) {
  switch (dtype) {
    case DType::bf16: return MmaType::bf16;
    case DType::f16: return MmaType::f16;
    case DType::f8e4m3: return MmaType::f8e4m3;
    case DType::f8e5m2: return MmaType::f8e5m2;
    case DType::f32: return MmaType::tf32;
    default: return std::nullopt;
  }
}

double GemmProblem::unique_bytes() const {
  const double b = static_cast<double>(batch), bytes = mma_type_bytes(type);
  return (a_shared ? 1 : b) * static_cast<double>(m) * k * bytes + (b_shared ? 1 : b) * static_cast<double>(k) * n * bytes +
         b * static_cast<double>(m) * n * (dtype_bytes(output) + epilogue_bytes_per_output);
}

std::string describe(const GemmProblem& p) {
  std::string text = "M=" + std::to_string(p.m) + " N=" + std::to_string(p.n) + " K=" + std::to_string(p.k);
  if (p.batch != 1)
    text = "batch=" + std::to_string(p.batch) + (p.a_shared ? " (A shared)" : "") + (p.b_shared ? " (B shared)" : "") + " " + text;
  text += " " + std::string(mma_type_name(p.type)) + " -> " + std::string(dtype_name(p.output));
  if (!p.a_k_major || !p.b_k_major)
    text += std::string(" (A ") + (p.a_k_major ? "K" : "M") + "-major, B " + (p.b_k_major ? "K" : "N") + "-major)";
  return text;
}

}  // namespace solder
