// 16-byte vector accesses for the code generator's staging copies (global <-> tile) and the warp
// combine of its cooperative reductions. Tiles hold float (each value already rounded to its buffer's
// dtype); globals keep their dtype. Every function here is per thread; the combines are called by
// all 32 lanes of a warp.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <solder/runtime.cuh>
#include <solder/reduce/row_divide.h>

namespace solder::reduce {

// ---- Programmatic dependent launch (PTX griddepcontrol.launch_dependents, sm_90) -----------------
// Lets the next kernel of the stream, if it is launched with the programmatic stream serialization
// attribute (runtime::LaunchConfig::programmatic: the GEMM skeleton's short kernels), be scheduled once
// every block of this grid has executed it or exited; that kernel waits (griddepcontrol.wait) for this
// grid's completion and its memory before it reads anything, so what this one computes is unaffected.
// Any thread may call it (a block counts once one thread has); without the attribute it does nothing.
__device__ __forceinline__ void launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// ---- Global loads: one 16-byte access, converted to float (p 16-byte aligned) ------------------
__device__ __forceinline__ void load_vector(const float* p, float (&v)[4]) {
  float4 x = *reinterpret_cast<const float4*>(p);
  v[0] = x.x; v[1] = x.y; v[2] = x.z; v[3] = x.w;
}
__device__ __forceinline__ void load_vector(const __half* p, float (&v)[8]) {
  uint4 raw = *reinterpret_cast<const uint4*>(p);
  const __half2* h = reinterpret_cast<const __half2*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) { float2 f = __half22float2(h[i]); v[2 * i] = f.x; v[2 * i + 1] = f.y; }
}
__device__ __forceinline__ void load_vector(const __nv_bfloat16* p, float (&v)[8]) {
  uint4 raw = *reinterpret_cast<const uint4*>(p);
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) { float2 f = __bfloat1622float2(h[i]); v[2 * i] = f.x; v[2 * i + 1] = f.y; }
}

// Packed: a 16-bit tile equal to its global keeps the loaded pairs (8 elements in 4 registers); its
// elements read back as float exactly (unpack, with i a compile-time index after unrolling).
__device__ __forceinline__ void load_packed(const __nv_bfloat16* p, __nv_bfloat162 (&v)[4]) {
  uint4 raw = *reinterpret_cast<const uint4*>(p);
  v[0] = *reinterpret_cast<const __nv_bfloat162*>(&raw.x);
  v[1] = *reinterpret_cast<const __nv_bfloat162*>(&raw.y);
  v[2] = *reinterpret_cast<const __nv_bfloat162*>(&raw.z);
  v[3] = *reinterpret_cast<const __nv_bfloat162*>(&raw.w);
}
__device__ __forceinline__ void load_packed(const __half* p, __half2 (&v)[4]) {
  uint4 raw = *reinterpret_cast<const uint4*>(p);
  v[0] = *reinterpret_cast<const __half2*>(&raw.x);
  v[1] = *reinterpret_cast<const __half2*>(&raw.y);
  v[2] = *reinterpret_cast<const __half2*>(&raw.z);
  v[3] = *reinterpret_cast<const __half2*>(&raw.w);
}
__device__ __forceinline__ void zero_packed(__nv_bfloat162 (&v)[4]) {
#pragma unroll
  for (int i = 0; i < 4; ++i) v[i] = __floats2bfloat162_rn(0.0f, 0.0f);
}
__device__ __forceinline__ void zero_packed(__half2 (&v)[4]) {
#pragma unroll
  for (int i = 0; i < 4; ++i) v[i] = __floats2half2_rn(0.0f, 0.0f);
}
__device__ __forceinline__ float unpack(const __nv_bfloat162 (&v)[4], int i) {
  return (i & 1) ? __high2float(v[i >> 1]) : __low2float(v[i >> 1]);
}
__device__ __forceinline__ float unpack(const __half2 (&v)[4], int i) {
  return (i & 1) ? __high2float(v[i >> 1]) : __low2float(v[i >> 1]);
}

// ---- Global stores: round to nearest even into the dtype, one 16-byte access ---------------------
__device__ __forceinline__ void store_vector(float* p, const float (&v)[4]) {
  *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
}
__device__ __forceinline__ void store_vector(__half* p, const float (&v)[8]) {
  uint4 raw;
  __half2* h = reinterpret_cast<__half2*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) h[i] = __floats2half2_rn(v[2 * i], v[2 * i + 1]);
  *reinterpret_cast<uint4*>(p) = raw;
}
__device__ __forceinline__ void store_vector(__nv_bfloat16* p, const float (&v)[8]) {
  uint4 raw;
  __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) h[i] = __floats2bfloat162_rn(v[2 * i], v[2 * i + 1]);
  *reinterpret_cast<uint4*>(p) = raw;
}
// The same values and rounding as store_vector, always one st.global.v4.b32 (p 16-byte aligned, in global
// memory): NVVM splits store_vector's uint4 store into four 4-byte stores where it does not infer p's
// alignment from 64-bit index arithmetic (the generic writer's row copies, kernel_writer_row_copy.cpp).
__device__ __forceinline__ void store_global_v4(void* p, uint4 raw) {
  asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(raw.x), "r"(raw.y), "r"(raw.z), "r"(raw.w) : "memory");
}
__device__ __forceinline__ void store_vector_v4(float* p, const float (&v)[4]) {
  store_global_v4(p, make_uint4(__float_as_uint(v[0]), __float_as_uint(v[1]), __float_as_uint(v[2]), __float_as_uint(v[3])));
}
__device__ __forceinline__ void store_vector_v4(__half* p, const float (&v)[8]) {
  uint4 raw;
  __half2* h = reinterpret_cast<__half2*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) h[i] = __floats2half2_rn(v[2 * i], v[2 * i + 1]);
  store_global_v4(p, raw);
}
__device__ __forceinline__ void store_vector_v4(__nv_bfloat16* p, const float (&v)[8]) {
  uint4 raw;
  __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) h[i] = __floats2bfloat162_rn(v[2 * i], v[2 * i + 1]);
  store_global_v4(p, raw);
}
// 8-bit floats: N elements (4, 8 or 16) as one N-byte access (p N-byte aligned), each rounded exactly as
// solder::store rounds it: e4m3 round to nearest even, saturating to ±448 (cvt.rn.satfinite.e4m3x2.f32,
// two elements per conversion, the first in the low byte); e5m2 round to nearest even, unsaturated.
// N floats converted to 8-bit floats, 4 per word (element i in byte i % 4 of word i / 4): the bytes an
// N-element store writes. The register pass keeps an 8-bit tile that only such stores read in this
// form (kernel_writer_registers.cpp): a quarter of the f32 tile's registers.
template <int N>
__device__ __forceinline__ void pack_fp8(const float (&v)[N], unsigned int (&words)[N / 4], __nv_saturation_t saturate,
                                         __nv_fp8_interpretation_t kind) {
  static_assert(N == 4 || N == 8 || N == 16, "8-bit vectors hold 4, 8 or 16 elements");
#pragma unroll
  for (int k = 0; k < N / 4; ++k) {
    const unsigned int lo = __nv_cvt_float2_to_fp8x2(make_float2(v[4 * k], v[4 * k + 1]), saturate, kind);
    const unsigned int hi = __nv_cvt_float2_to_fp8x2(make_float2(v[4 * k + 2], v[4 * k + 3]), saturate, kind);
    words[k] = (lo & 0xffffu) | ((hi & 0xffffu) << 16);
  }
}
// W packed words (4 * W bytes, p 4 * W-byte aligned) as one access.
template <int W>
__device__ __forceinline__ void store_packed_fp8(unsigned char* p, const unsigned int (&words)[W]) {
  static_assert(W == 1 || W == 2 || W == 4, "8-bit vectors hold 4, 8 or 16 elements");
  if constexpr (W == 1) *reinterpret_cast<unsigned int*>(p) = words[0];
  else if constexpr (W == 2) *reinterpret_cast<uint2*>(p) = make_uint2(words[0], words[1]);
  else *reinterpret_cast<uint4*>(p) = make_uint4(words[0], words[1], words[2], words[3]);
}
// Element i of packed words, for a store element by element (a ragged edge).
template <int W>
__device__ __forceinline__ void store_packed_fp8_element(unsigned char* p, const unsigned int (&words)[W], int i) {
  *p = static_cast<unsigned char>(words[i >> 2] >> (8 * (i & 3)));
}
template <int N>
__device__ __forceinline__ void store_vector_fp8(unsigned char* p, const float (&v)[N], __nv_saturation_t saturate,
                                                 __nv_fp8_interpretation_t kind) {
  unsigned int words[N / 4];
  pack_fp8<N>(v, words, saturate, kind);
  store_packed_fp8<N / 4>(p, words);
}
template <int N>
__device__ __forceinline__ void store_vector(__nv_fp8_e4m3* p, const float (&v)[N]) {
  store_vector_fp8<N>(reinterpret_cast<unsigned char*>(p), v, __NV_SATFINITE, __NV_E4M3);
}
template <int N>
__device__ __forceinline__ void store_vector(__nv_fp8_e5m2* p, const float (&v)[N]) {
  store_vector_fp8<N>(reinterpret_cast<unsigned char*>(p), v, __NV_NOSAT, __NV_E5M2);
}

// ---- Float tiles in shared memory: N floats (a multiple of 4) as float4 accesses ----------------
template <int N>
__device__ __forceinline__ void load_tile(const float* p, float (&v)[N]) {
#pragma unroll
  for (int i = 0; i < N; i += 4) {
    float4 x = *reinterpret_cast<const float4*>(p + i);
    v[i] = x.x; v[i + 1] = x.y; v[i + 2] = x.z; v[i + 3] = x.w;
  }
}
template <int N>
__device__ __forceinline__ void store_tile(float* p, const float (&v)[N]) {
#pragma unroll
  for (int i = 0; i < N; i += 4) *reinterpret_cast<float4*>(p + i) = make_float4(v[i], v[i + 1], v[i + 2], v[i + 3]);
}

// ---- Combining operators of cooperative reduces (f32 at each step) ------------------------------
// Max and Min are the Kernel IR's max/min (docs/kernel-ir.md): NaN in either operand gives NaN, and
// -0 orders below +0 in either operand order. They call solder::max_nan / min_nan, the one
// implementation the rest of the generated code and the cluster collectives use.
struct Sum { __device__ __forceinline__ float operator()(float a, float b) const { return a + b; } };
struct Prod { __device__ __forceinline__ float operator()(float a, float b) const { return a * b; } };
struct Max { __device__ __forceinline__ float operator()(float a, float b) const { return solder::max_nan(a, b); } };
struct Min { __device__ __forceinline__ float operator()(float a, float b) const { return solder::min_nan(a, b); } };

// Recursive doubling over the xor offsets first, 2 * first, ... below `last` (powers of two, last
// <= 32): afterwards every lane holds the combination over the lanes that differ from it only in
// those offset bits. All 32 lanes of the warp must call it.
template <class Op>
__device__ __forceinline__ float warp_combine(float value, int first, int last, Op op) {
  for (int offset = first; offset < last; offset *= 2) value = op(value, __shfl_xor_sync(0xffffffffu, value, offset));
  return value;
}

}  // namespace solder::reduce

namespace solder::reduce {

// ---- Asynchronous staging (cp.async, sm_80+): 16 bytes global -> shared without registers -------
// Per thread: each thread waits for its own groups; a block barrier after the wait makes every
// thread's copies visible to the block. Out of bounds: 0 bytes read, the 16 bytes zero-filled.
__device__ __forceinline__ void cp_async16(float* shared_dst, const float* global_src, bool in_bounds) {
  unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(shared_dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(global_src), "r"(in_bounds ? 16 : 0) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits until at most `Pending` of this thread's committed groups are still in flight.
template <int Pending>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending) : "memory"); }

}  // namespace solder::reduce
