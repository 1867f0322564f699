// Host emulation of the gathered-GEMM kernels (emulate_host.py): just enough of CUDA and of Solder's
// device headers to compile a generated gathered kernel as C++ and run every CUDA thread of a block (or
// of a thread-block cluster) as a std::thread, with std::barrier for __syncthreads and the cluster
// barrier. BlockGemm is a scalar stand-in that reads the same swizzled shared-memory layout as the real
// one (ldmatrix + mma.sync are not emulated); cp.async is a synchronous copy. What it checks: the
// operands' index arithmetic, guards and zero-fill, the two-phase pipeline's buffer alternation, the
// split-K ranges and the cluster reduction, the cp.async chunk mapping, the epilogue's partition.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

struct ShimDim3 {
  unsigned x = 0, y = 0, z = 0;
};
inline thread_local ShimDim3 threadIdx, blockIdx;
inline thread_local unsigned char* shim_smem = nullptr;
inline thread_local std::barrier<>* shim_block_barrier = nullptr;
inline thread_local std::barrier<>* shim_cluster_barrier = nullptr;
inline thread_local std::vector<unsigned char*>* shim_cluster_smem = nullptr;

#undef __global__
#undef __launch_bounds__
#undef __device__
#undef __forceinline__
#define __global__
#define __launch_bounds__(x)
#define __device__
#define __forceinline__ inline
#define __syncthreads() shim_block_barrier->arrive_and_wait()

inline size_t __cvta_generic_to_shared(const void* p) { return static_cast<size_t>(static_cast<const unsigned char*>(p) - shim_smem); }
inline unsigned shim_mapa(unsigned local, unsigned rank) { return (rank << 24) | local; }
inline float shim_ld_cluster(unsigned remote) {
  float v;
  std::memcpy(&v, (*shim_cluster_smem)[remote >> 24] + (remote & 0xffffff), 4);
  return v;
}
inline void shim_st_cluster(unsigned remote, unsigned v) { std::memcpy((*shim_cluster_smem)[remote >> 24] + (remote & 0xffffff), &v, 4); }

namespace solder {
inline float to_float(float x) { return x; }
inline float to_float(__half x) { return __half2float(x); }
inline float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
inline float round_f16(float x) { return __half2float(__float2half_rn(x)); }
inline float round_bf16(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }
inline float round_f32(float x) { return x; }
inline void store(float* p, float v) { *p = v; }
inline void store(__half* p, float v) { *p = __float2half_rn(v); }
inline void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }
inline float max_nan(float a, float b) { return (std::isnan(a) || std::isnan(b)) ? NAN : std::fmax(a, b); }
inline float min_nan(float a, float b) { return (std::isnan(a) || std::isnan(b)) ? NAN : std::fmin(a, b); }
inline long long floordiv(long long a, long long b) {
  long long q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
inline long long floormod(long long a, long long b) { return a - b * floordiv(a, b); }

namespace tile {
template <int C>
struct Swizzle {
  static constexpr int chunks = C / 8;
  static constexpr int mask = (chunks % 8 == 0) ? 7 : (chunks % 4 == 0) ? 3 : (chunks % 2 == 0) ? 1 : 0;
  static int offset(int row, int col) { return row * C + ((((col >> 3) ^ (row & mask))) << 3) + (col & 7); }
};
template <class T, int BM, int BK>
struct SwizzledA {
  const T* p;
};
template <class T, int BK, int BN, bool KMajor>
struct SwizzledB {
  const T* p;
};
// A[m][k] at Swizzle<BK>(m, k); B k-major: B[n][k] at Swizzle<BK>(n, k). Thread t owns C elements
// t, t + threads, ...
template <class T, int BM, int BN, int BK, int Warps>
struct BlockGemm {
  static constexpr int kThreads = Warps * 32, kOwn = (BM * BN + kThreads - 1) / kThreads;
  float acc[kOwn] = {};
  void accumulate(SwizzledA<T, BM, BK> a, SwizzledB<T, BK, BN, true> b) {
    for (int j = 0; j < kOwn; ++j) {
      const int e = static_cast<int>(threadIdx.x) + j * kThreads;
      if (e >= BM * BN) break;
      const int m = e / BN, n = e % BN;
      float s = 0;
      for (int k = 0; k < BK; ++k) s += to_float(a.p[Swizzle<BK>::offset(m, k)]) * to_float(b.p[Swizzle<BK>::offset(n, k)]);
      acc[j] += s;
    }
  }
  void write(float* c, int stride, int, bool) {
    for (int j = 0; j < kOwn; ++j) {
      const int e = static_cast<int>(threadIdx.x) + j * kThreads;
      if (e >= BM * BN) break;
      c[(e / BN) * stride + e % BN] = acc[j];
    }
  }
};
inline void cp_async_16(void* dst, const void* src, bool valid = true) {
  if (valid)
    std::memcpy(dst, src, 16);
  else
    std::memset(dst, 0, 16);
}
inline void cp_async_commit() {}
template <int N>
inline void cp_async_wait() {}
}  // namespace tile
}  // namespace solder

// Runs kernel(args...) on `blocks` blocks of `threads` threads in clusters of `cluster` blocks.
template <class F>
void shim_launch(F kernel, int blocks, int threads, int cluster, size_t shared_bytes) {
  for (int c0 = 0; c0 < blocks; c0 += cluster) {
    std::vector<std::vector<unsigned char>> smem(cluster, std::vector<unsigned char>(shared_bytes, 0xA5));
    std::vector<unsigned char*> smem_ptrs;
    for (auto& s : smem) smem_ptrs.push_back(s.data());
    std::vector<std::barrier<>*> block_barriers;
    for (int b = 0; b < cluster; ++b) block_barriers.push_back(new std::barrier<>(threads));
    std::barrier<> cluster_barrier(threads * cluster);
    std::vector<std::thread> pool;
    for (int b = 0; b < cluster; ++b)
      for (int t = 0; t < threads; ++t)
        pool.emplace_back([&, b, t] {
          threadIdx.x = t;
          blockIdx.x = c0 + b;
          shim_smem = smem_ptrs[b];
          shim_block_barrier = block_barriers[b];
          shim_cluster_barrier = &cluster_barrier;
          shim_cluster_smem = &smem_ptrs;
          kernel();
        });
    for (auto& th : pool) th.join();
    for (auto* bb : block_barriers) delete bb;
  }
}
