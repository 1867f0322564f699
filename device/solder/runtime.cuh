// Scalar support for generated kernels: the element types, the rounding every write performs, and
// math functions with the semantics the CPU executor implements (src/ir/expr_eval.h). Included by
// every kernel the CUDA code generator emits; compiles with nvcc and NVRTC.
//
// Tiles live in shared memory as float (each value already rounded to its buffer's dtype); global
// tensors keep their dtype. Scope: every function here is per thread.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

namespace solder {

// +inf without <math.h> (NVRTC has no INFINITY macro).
__device__ __forceinline__ float infinity() { return __int_as_float(0x7f800000); }

// ---- Rounding to a dtype, staying in float (round to nearest even; fp8 e4m3 saturates) ----------
__device__ __forceinline__ float round_f32(float x) { return x; }
__device__ __forceinline__ float round_f16(float x) { return __half2float(__float2half_rn(x)); }
__device__ __forceinline__ float round_bf16(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }
__device__ __forceinline__ float round_f8e4m3(float x) {
  __nv_fp8_storage_t s = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(s, __NV_E4M3)));
}
__device__ __forceinline__ float round_f8e5m2(float x) {
  __nv_fp8_storage_t s = __nv_cvt_float_to_fp8(x, __NV_NOSAT, __NV_E5M2);
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(s, __NV_E5M2)));
}
__device__ __forceinline__ float round_i32(float x) {
  if (x != x) return 0.0f;
  float r = rintf(x);
  return fminf(fmaxf(r, -2147483648.0f), 2147483647.0f);
}
__device__ __forceinline__ float round_bool(float x) { return x != 0.0f ? 1.0f : 0.0f; }
// An integer into i32, exactly: saturated to [-2^31, 2^31 - 1] (the executor's and the reference's
// rounding to i32, src/ir/dtype.h).
__device__ __forceinline__ int saturate_i32(long long x) {
  return x > 2147483647LL ? 2147483647 : x < -2147483648LL ? static_cast<int>(-2147483647LL - 1) : static_cast<int>(x);
}

// ---- Loads of global elements, as float --------------------------------------------------------
__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(__nv_fp8_e4m3 x) { return float(x); }
__device__ __forceinline__ float to_float(__nv_fp8_e5m2 x) { return float(x); }
__device__ __forceinline__ float to_float(int x) { return static_cast<float>(x); }
__device__ __forceinline__ float to_float(unsigned char x) { return x ? 1.0f : 0.0f; }

// ---- Stores of global elements, rounding -----------------------------------------------------------
__device__ __forceinline__ void store(float* p, float x) { *p = x; }
__device__ __forceinline__ void store(__half* p, float x) { *p = __float2half_rn(x); }
__device__ __forceinline__ void store(__nv_bfloat16* p, float x) { *p = __float2bfloat16_rn(x); }
__device__ __forceinline__ void store(__nv_fp8_e4m3* p, float x) { p->__x = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3); }
__device__ __forceinline__ void store(__nv_fp8_e5m2* p, float x) { p->__x = __nv_cvt_float_to_fp8(x, __NV_NOSAT, __NV_E5M2); }
__device__ __forceinline__ void store(int* p, float x) { *p = static_cast<int>(round_i32(x)); }
__device__ __forceinline__ void store(unsigned char* p, float x) { *p = x != 0.0f ? 1 : 0; }

// ---- Math with the executor's semantics --------------------------------------------------------
// NaN in either operand gives NaN, and -0 orders below +0 (max(+0, -0) = +0, min(+0, -0) = -0, in either
// order): one max.NaN / min.NaN instruction on sm_80+ (PTX ISA: "+0.0 > -0.0"). The Kernel IR's max/min
// (docs/kernel-ir.md); the CPU executor (src/ir/expr_eval.h) and the cluster collectives follow it too.
__device__ __forceinline__ float max_nan(float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
#else
  if (a != a || b != b) return __int_as_float(0x7fffffff);
  if (a == b) return __float_as_int(a) < 0 ? b : a;  // of +0 and -0, +0
  return a > b ? a : b;
#endif
}
__device__ __forceinline__ float min_nan(float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  float r;
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
#else
  if (a != a || b != b) return __int_as_float(0x7fffffff);
  if (a == b) return __float_as_int(a) < 0 ? a : b;  // of +0 and -0, -0
  return a < b ? a : b;
#endif
}
__device__ __forceinline__ long long max_int(long long a, long long b) { return a > b ? a : b; }
__device__ __forceinline__ long long min_int(long long a, long long b) { return a < b ? a : b; }
__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ float silu(float x) { return x / (1.0f + expf(-x)); }
__device__ __forceinline__ float gelu(float x) {
  return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}
__device__ __forceinline__ float rsqrt_exact(float x) { return 1.0f / sqrtf(x); }
// round_tf32(x): 10 fraction bits, nearest even, on the bits (as gemm/tf32_split.cuh's split): add half
// of the dropped 13 bits' unit, minus one unless the kept last bit is odd, then clear them; infinity
// and NaN pass unchanged, a value rounding past the largest float becomes infinity.
__device__ __forceinline__ float round_tf32(float x) {
  unsigned bits = __float_as_uint(x);
  if ((bits & 0x7F800000u) != 0x7F800000u) bits = (bits + 0x0FFFu + ((bits >> 13) & 1u)) & ~0x1FFFu;
  return __uint_as_float(bits);
}
// Floor division and modulo of integers (Python semantics).
__device__ __forceinline__ long long floordiv(long long a, long long b) {
  long long q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
__device__ __forceinline__ long long floormod(long long a, long long b) { return a - b * floordiv(a, b); }

// ---- Atomic combination into global memory (inter_cluster_reduce) -------------------------------
// *p = max_nan(*p, v) / min_nan(*p, v) atomically: the order of the combines does not change the result.
__device__ __forceinline__ void atomic_max(float* p, float v) {
  int* ip = reinterpret_cast<int*>(p);
  int old = *ip;
  while (true) {
    float cur = __int_as_float(old);
    int want = __float_as_int(max_nan(cur, v));
    if (want == old) return;  // bits: +0 and -0 differ; a NaN there becomes the canonical NaN once
    int seen = atomicCAS(ip, old, want);
    if (seen == old) return;
    old = seen;
  }
}
__device__ __forceinline__ void atomic_min(float* p, float v) {
  int* ip = reinterpret_cast<int*>(p);
  int old = *ip;
  while (true) {
    float cur = __int_as_float(old);
    int want = __float_as_int(min_nan(cur, v));
    if (want == old) return;  // bits: +0 and -0 differ; a NaN there becomes the canonical NaN once
    int seen = atomicCAS(ip, old, want);
    if (seen == old) return;
    old = seen;
  }
}

}  // namespace solder
