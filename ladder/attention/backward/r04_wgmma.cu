// Rung 4 of the attention backward: rung 3's two kernels with every product on wgmma, Hopper's
// warpgroup multiply. Same operands, layout of the gradients, masking and loop structure as
// rung 3 (read it first); build for sm_90a. A block is one warpgroup (4 warps, 128 threads)
// over 64 rows (keys in the key kernel, queries in the query kernel), warp w owning rows
// 16w ... 16w + 15: wgmma's own row layout, so the accumulators of an m64nN wgmma are, warp by
// warp, rung 3's m16n8 fragments, and the elementwise P and dS code is rung 3's.
//
//   key kernel:   Sᵀ  = K Qᵀ, dPᵀ = V dOᵀ: 2 x D/16 wgmma m64n64k16, both operands K-major
//                 in shared memory (descriptors), no ldmatrix;
//                 dV += Pᵀ dO, dK += dSᵀ Q: 2 x 4 wgmma m64nDk16, A = Pᵀ or dSᵀ from
//                 registers, B = dO or Q transposed by the instruction.
//   query kernel: S = Q Kᵀ, dP = dO Vᵀ as above; dQ += dS K, A = dS from registers.
//
// What changes for shared memory: a warp of rung 3 read every B operand itself (ldmatrix), so
// each tile was read by all 4 warps; a wgmma reads its B operand once for the warpgroup's 64
// rows. Tiles are stored in the descriptor layout (wgmma_tiles.cuh: 64-half column blocks, 128-byte
// swizzle, 1 KB aligned), and cp.async's writes are fenced for the async proxy before the
// barrier. Query tiles are 64 at both head dimensions. No pipelining, as in rung 3: each batch
// of wgmma is committed and waited for. Built for half (T = half) and bfloat16 (the _bf16
// kernels: the same code with the .bf16 products and pack2<T>).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "ladder/core/cuda/convert.cuh"      // is_bf16, pack2
#include "ladder/core/cuda/cp_async.cuh"     // cp_async16, commit, wait
#include "ladder/core/cuda/memory.cuh"       // smem_addr, fence_proxy_async
#include "ladder/core/cuda/wgmma.cuh"        // wgmma_desc, wgmma_ss, wgmma_rs and their order

#include "../wgmma_tiles.cuh"  // the descriptor layout (tile_offset)

constexpr int THREADS = 128;  // one warpgroup
constexpr int ROWS = 64;      // keys of a key-kernel block, queries of a query-kernel block
constexpr int TILE = 64;      // queries (key kernel) or keys (query kernel) per tile
constexpr float LOG2E_F = 1.4426950408889634f;

// Rows [row0, row0 + 64) of a (N, D) matrix into a tile in the descriptor layout; rows
// past N are zero-filled.
template <typename T, int D>
__device__ __forceinline__ void load_tile(unsigned tile, const T* head, int row0, int N) {
  constexpr int CHUNKS = D / 8, PASS = THREADS / CHUNKS;
  const int r0 = threadIdx.x / CHUNKS, chunk = threadIdx.x % CHUNKS;
#pragma unroll
  for (int i = 0; i < 64 / PASS; ++i) {
    const int r = r0 + i * PASS;
    const bool valid = row0 + r < N;
    const T* src = head + (size_t)(valid ? row0 + r : 0) * D + chunk * 8;
    cp_async16(tile + tile_offset<64>(r, chunk), src, valid);
  }
}

// The copies have landed for this thread; make them visible to the async proxy (wgmma) and
// wait for every thread's.
__device__ __forceinline__ void tiles_ready() {
  cp_async_wait<0>();
  fence_proxy_async();
  __syncthreads();
}

// acc (64 x 64) = A Bᵀ: A and B 64 rows x D of two tiles in the descriptor layout.
template <typename T, int D>
__device__ __forceinline__ void wgmma_abt(float* acc, unsigned a, unsigned b) {
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks) {
    const unsigned step = (ks / 4) * (64 * 128) + (ks % 4) * 32;  // column block, k16 in it
    wgmma_ss<64, T, 0, 0>(acc, wgmma_desc(a + step, 16, 1024), wgmma_desc(b + step, 16, 1024));
  }
}

// The four k16 A fragments of a 64 x 64 accumulator (this warp's 16 rows), rounded to T.
template <typename T>
__device__ __forceinline__ void to_a_fragments(unsigned (&f)[4][4], const float* x) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    f[kk][0] = pack2<T>(x[8 * kk + 0], x[8 * kk + 1]);
    f[kk][1] = pack2<T>(x[8 * kk + 2], x[8 * kk + 3]);
    f[kk][2] = pack2<T>(x[8 * kk + 4], x[8 * kk + 5]);
    f[kk][3] = pack2<T>(x[8 * kk + 6], x[8 * kk + 7]);
  }
}

// acc (64 x D) += X B: X's fragments from to_a_fragments, B = 64 rows x D of a tile
// (N-major: transposed by the instruction).
template <typename T, int D>
__device__ __forceinline__ void wgmma_xb(float* acc, const unsigned (&x)[4][4], unsigned b) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)
    wgmma_rs<D, T, 1>(acc, x[kk], wgmma_desc(b + kk * 16 * 128, 64 * 128, 1024));
}

// Rows g and g + 8 of this warp's 16 x D accumulators, times `scale`, into rows
// first_row + (g, g + 8) of dst (row stride D) where they are below `rows`.
template <typename T, int D>
__device__ __forceinline__ void store_rows(T* dst, const float* acc, int first_row, int rows,
                                           float scale) {
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const int row = first_row + g + 8 * hh;
    if (row < rows) {
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt)
        if constexpr (is_bf16<T>) {  // written out, not convert.cuh's store2, which made nvcc
          // lay out the float16 kernels differently from the ones measured
          *reinterpret_cast<__nv_bfloat162*>(dst + (size_t)row * D + dt * 8 + 2 * t) =
              __floats2bfloat162_rn(acc[4 * dt + 2 * hh] * scale,
                                    acc[4 * dt + 2 * hh + 1] * scale);
        } else {
          *reinterpret_cast<__half2*>(dst + (size_t)row * D + dt * 8 + 2 * t) =
              __floats2half2_rn(acc[4 * dt + 2 * hh] * scale, acc[4 * dt + 2 * hh + 1] * scale);
        }
    }
  }
}

template <typename T, int D>
__device__ __forceinline__ void dkdv(const T* __restrict__ Q, const T* __restrict__ K,
                                     const T* __restrict__ V, const T* __restrict__ dO,
                                     const float* __restrict__ lse,
                                     const float* __restrict__ delta, T* __restrict__ G, int N,
                                     int H, int HKV, float scale, int causal) {
  constexpr int TILE_BYTES = 64 * D * 2, NT = TILE / 8;
  extern __shared__ unsigned char smem_raw[];
  const unsigned s_k = (smem_addr(smem_raw) + 1023) & ~1023u;  // descriptors need 1 KB
  const unsigned s_v = s_k + TILE_BYTES, s_q = s_v + TILE_BYTES, s_do = s_q + TILE_BYTES;
  float* s_lse = reinterpret_cast<float*>(smem_raw + (s_do + TILE_BYTES - smem_addr(smem_raw)));
  float* s_delta = s_lse + TILE;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int b = blockIdx.z, kv = blockIdx.y, key0 = blockIdx.x * ROWS;
  const int group = H / HKV;
  const float scale_log2 = scale * LOG2E_F;

  load_tile<T, D>(s_k, K + ((size_t)b * HKV + kv) * N * D, key0, N);
  load_tile<T, D>(s_v, V + ((size_t)b * HKV + kv) * N * D, key0, N);
  cp_async_commit();

  float dk[D / 2], dv[D / 2];  // 64 x D each over the warpgroup: D / 2 floats a thread
#pragma unroll
  for (int x = 0; x < D / 2; ++x) dk[x] = dv[x] = 0.f;
  const int key_g = key0 + warp * 16 + g;  // this lane's keys: key_g and key_g + 8
  for (int h = kv * group; h < (kv + 1) * group; ++h) {
    const size_t head = ((size_t)b * H + h) * N;
    for (int q0 = causal ? key0 / TILE * TILE : 0; q0 < N; q0 += TILE) {
      __syncthreads();  // every warp is done with the previous tile
      load_tile<T, D>(s_q, Q + head * D, q0, N);
      load_tile<T, D>(s_do, dO + head * D, q0, N);
      cp_async_commit();
      {  // threads 0-63 stage lse (log2 units), 64-127 D: no branch (a divergent path
         // would make ptxas serialize the wgmma of the loop)
        const int i = threadIdx.x % TILE, row = min(q0 + i, N - 1);
        const bool first = threadIdx.x < TILE;
        const float value = (first ? lse : delta)[head + row] * (first ? LOG2E_F : 1.f);
        s_lse[threadIdx.x] = q0 + i < N ? value : 0.f;  // s_delta is s_lse + TILE
      }
      tiles_ready();

      float s[NT * 4], dp[NT * 4];
#pragma unroll
      for (int x = 0; x < NT * 4; ++x) s[x] = dp[x] = 0.f;
      wgmma_fence();
      wgmma_abt<T, D>(s, s_k, s_q);    // Sᵀ = K Qᵀ
      wgmma_abt<T, D>(dp, s_v, s_do);  // dPᵀ = V dOᵀ
      wgmma_commit();
      wgmma_wait<0>();
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int col = nt * 8 + 2 * t + (e & 1), query = q0 + col;
          const int key = key_g + 8 * (e / 2);
          float p = exp2f(fmaf(s[4 * nt + e], scale_log2, -s_lse[col]));
          if (query >= N || (causal && key > query)) p = 0.f;  // keys past N need no mask (header)
          s[4 * nt + e] = p;                                   // Pᵀ
          dp[4 * nt + e] = p * (dp[4 * nt + e] - s_delta[col]);  // dSᵀ
        }
      unsigned pf[4][4], dsf[4][4];
      to_a_fragments<T>(pf, s);
      to_a_fragments<T>(dsf, dp);
      wgmma_fence();
      wgmma_xb<T, D>(dv, pf, s_do);  // dV += Pᵀ dO
      wgmma_xb<T, D>(dk, dsf, s_q);  // dK += dSᵀ Q
      wgmma_commit();
      wgmma_wait<0>();
    }
  }
  cp_async_wait<0>();  // a block whose loop ran no tile still has its K and V copies in flight
  const size_t grads = (size_t)b * (H + 2 * HKV);
  store_rows<T, D>(G + (grads + H + kv) * N * D, dk, key0 + warp * 16, N, scale);
  store_rows<T, D>(G + (grads + H + HKV + kv) * N * D, dv, key0 + warp * 16, N, 1.f);
}

template <typename T, int D>
__device__ __forceinline__ void dq(const T* __restrict__ Q, const T* __restrict__ K,
                                   const T* __restrict__ V, const T* __restrict__ dO,
                                   const float* __restrict__ lse, const float* __restrict__ delta,
                                   T* __restrict__ G, int N, int H, int HKV, float scale,
                                   int causal) {
  constexpr int TILE_BYTES = 64 * D * 2, NT = TILE / 8;
  extern __shared__ unsigned char smem_raw[];
  const unsigned s_q = (smem_addr(smem_raw) + 1023) & ~1023u;
  const unsigned s_do = s_q + TILE_BYTES, s_k = s_do + TILE_BYTES, s_v = s_k + TILE_BYTES;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int b = blockIdx.z, h = blockIdx.y, kv = h / (H / HKV);
  const int tile = causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;  // causal: longest first
  const int q0 = tile * ROWS;
  const size_t head = ((size_t)b * H + h) * N;
  const T* k_head = K + ((size_t)b * HKV + kv) * N * D;
  const T* v_head = V + ((size_t)b * HKV + kv) * N * D;
  const float scale_log2 = scale * LOG2E_F;

  load_tile<T, D>(s_q, Q + head * D, q0, N);
  load_tile<T, D>(s_do, dO + head * D, q0, N);
  cp_async_commit();
  float row_lse[2], row_delta[2];  // of rows g and g + 8 of this warp's 16
  int row[2];
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    row[hh] = q0 + warp * 16 + g + 8 * hh;
    const bool valid = row[hh] < N;
    row_lse[hh] = valid ? lse[head + row[hh]] * LOG2E_F : 0.f;
    row_delta[hh] = valid ? delta[head + row[hh]] : 0.f;
  }

  float acc[D / 2];
#pragma unroll
  for (int x = 0; x < D / 2; ++x) acc[x] = 0.f;
  const int kv_len = causal ? min(N, q0 + ROWS) : N;
  for (int k0 = 0; k0 < kv_len; k0 += TILE) {
    __syncthreads();  // every warp is done with the previous K and V tiles
    load_tile<T, D>(s_k, k_head, k0, N);
    load_tile<T, D>(s_v, v_head, k0, N);
    cp_async_commit();
    tiles_ready();

    float s[NT * 4], dp[NT * 4];
#pragma unroll
    for (int x = 0; x < NT * 4; ++x) s[x] = dp[x] = 0.f;
    wgmma_fence();
    wgmma_abt<T, D>(s, s_q, s_k);    // S = Q Kᵀ
    wgmma_abt<T, D>(dp, s_do, s_v);  // dP = dO Vᵀ
    wgmma_commit();
    wgmma_wait<0>();
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = k0 + nt * 8 + 2 * t + (e & 1), hh = e / 2;
        float p = exp2f(fmaf(s[4 * nt + e], scale_log2, -row_lse[hh]));
        if (key >= N || (causal && key > row[hh])) p = 0.f;
        dp[4 * nt + e] = p * (dp[4 * nt + e] - row_delta[hh]);  // dS
      }
    unsigned dsf[4][4];
    to_a_fragments<T>(dsf, dp);
    wgmma_fence();
    wgmma_xb<T, D>(acc, dsf, s_k);  // dQ += dS K
    wgmma_commit();
    wgmma_wait<0>();
  }
  cp_async_wait<0>();
  store_rows<T, D>(G + ((size_t)b * (H + 2 * HKV) + h) * N * D, acc, q0 + warp * 16, N, scale);
}

#define BACKWARD_ENTRIES(NAME, T, D)                                                           \
  extern "C" __global__ void __launch_bounds__(THREADS)                                        \
      wgmma_dkdv_##NAME(const T* __restrict__ Q, const T* __restrict__ K,                      \
                        const T* __restrict__ V, const T* __restrict__ dO,                     \
                        const float* __restrict__ lse, const float* __restrict__ delta,        \
                        T* __restrict__ G, int N, int H, int HKV, float scale, int causal) {   \
    dkdv<T, D>(Q, K, V, dO, lse, delta, G, N, H, HKV, scale, causal);                          \
  }                                                                                            \
  extern "C" __global__ void __launch_bounds__(THREADS)                                        \
      wgmma_dq_##NAME(const T* __restrict__ Q, const T* __restrict__ K,                        \
                      const T* __restrict__ V, const T* __restrict__ dO,                       \
                      const float* __restrict__ lse, const float* __restrict__ delta,          \
                      T* __restrict__ G, int N, int H, int HKV, float scale, int causal) {     \
    dq<T, D>(Q, K, V, dO, lse, delta, G, N, H, HKV, scale, causal);                            \
  }

BACKWARD_ENTRIES(d64, half, 64)
BACKWARD_ENTRIES(d128, half, 128)
BACKWARD_ENTRIES(d64_bf16, __nv_bfloat16, 64)
BACKWARD_ENTRIES(d128_bf16, __nv_bfloat16, 128)
