// Rung 7: rung 5's flash attention forward with both products on wgmma, Hopper's warpgroup
// multiply: S = Q Kᵀ reads Q and K from shared memory through descriptors, O += P V reads P
// from registers and V through a descriptor. Half (or bfloat16) Q (B, H, N, D), K and V
// (B, HKV, N, D), O like Q; FP32 scores, statistics and accumulators. Build for sm_90a. The launcher passes D
// in {64, 128} (other head dimensions zero-padded) and 16-byte aligned pointers; N is any
// length (edges masked), causal or not, H a multiple of HKV.
//
// Against rung 5 in its 8-warp configuration (flash_d64_w8_m1: one m16 tile a warp, 128 query
// rows a block; not the tuned one its launcher picks):
// (1) the 8 warps are 2 warpgroups; warpgroup c owns rows 64c .. 64c + 63, and warp w of it
//     rows 16w .. 16w + 15 of those, which is wgmma's own row layout, so the accumulator of a
//     m64nN wgmma is, warp by warp, rung 5's m16n8 fragments: the masking, the softmax and the
//     epilogue stay rung 5's, line for line;
// (2) no ldmatrix: S = Q Kᵀ is D / 16 wgmma m64n64k16 with both operands K-major in shared
//     memory, O += P V is 4 wgmma m64nDk16 with P in registers (the register A fragment of
//     wgmma is mma.sync's) and V N-major (transposed by the instruction);
// (3) shared memory in the layout a descriptor reads: 128-byte rows of 64 halves (a D = 128
//     tile is two such column blocks, one after the other), 16-byte chunk c of row r at
//     c ^ (r & 7), 1 KB aligned; for D = 64 that is rung 5's swizzle;
// (4) cp.async writes through the generic proxy and wgmma reads through the async proxy, so
//     every thread fences (fence.proxy.async) between its copies landing and the barrier.
// The products are waited for at once (wait_group 0): nothing overlaps yet but the copies.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "ladder/core/cuda/convert.cuh"      // pack2, store2
#include "ladder/core/cuda/cp_async.cuh"     // cp_async16, commit, wait
#include "ladder/core/cuda/memory.cuh"       // smem_addr, fence_proxy_async
#include "ladder/core/cuda/wgmma.cuh"        // wgmma_desc, wgmma_ss, wgmma_rs and their order

#include "swizzled_rows.cuh"  // neg_inf
#include "wgmma_tiles.cuh"  // the descriptor layout (tile_offset)

constexpr int BKV = 64;     // keys per tile
constexpr int BQ = 128;     // query rows per block: 2 warpgroups of 64
constexpr int THREADS = 256;

template <typename T, int D>
__device__ __forceinline__ void flash_forward(const T* __restrict__ Q, const T* __restrict__ K,
                                              const T* __restrict__ V, T* __restrict__ O,
                                              int N, int H, int HKV, float scale_log2,
                                              int causal) {
  constexpr int CHUNKS = D / 8;                 // 16-byte chunks per row
  constexpr int KV_BYTES = BKV * D * 2;         // one stage of K or V
  constexpr int PASS_ROWS = THREADS / CHUNKS;   // rows one cp.async pass of the block covers
  constexpr int KSTEPS = D / 16, NT = BKV / 8, DT = D / 8;
  static_assert(D % 64 == 0 && BQ % PASS_ROWS == 0 && BKV % PASS_ROWS == 0, "copy mapping");

  extern __shared__ unsigned char smem_raw[];
  const unsigned s_q = (smem_addr(smem_raw) + 1023) & ~1023u;  // descriptors need 1 KB
  const unsigned s_k = s_q + BQ * D * 2, s_v = s_k + 2 * KV_BYTES;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, t = lane % 4;
  const int wg = warp / 4;  // this warpgroup's 64 rows of the block's 128

  const int group = H / HKV;
  const int b = blockIdx.z;
  const int kv = blockIdx.y / group;
  const int tile = causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const int row0 = tile * BQ;
  const T* k_head = K + ((size_t)b * HKV + kv) * N * D;
  const T* v_head = V + ((size_t)b * HKV + kv) * N * D;
  const T* q_head = Q + ((size_t)b * H + blockIdx.y) * N * D;
  T* o_head = O + ((size_t)b * H + blockIdx.y) * N * D;

  const int last = min(row0 + BQ, N) - 1;
  const int kv_len = causal ? min(N, last + 1) : N;
  const int tiles = (kv_len + BKV - 1) / BKV;

  const int c_row = tid / CHUNKS, c_chunk = tid % CHUNKS;
#pragma unroll
  for (int i = 0; i < BQ / PASS_ROWS; ++i) {
    const int r = c_row + i * PASS_ROWS;
    const bool valid = row0 + r < N;
    const T* src = q_head + (size_t)(valid ? row0 + r : 0) * D + c_chunk * 8;
    cp_async16(s_q + tile_offset<BQ>(r, c_chunk), src, valid);
  }
  auto load_kv = [&](const T* head, unsigned stage, int kv0) {
#pragma unroll
    for (int i = 0; i < BKV / PASS_ROWS; ++i) {
      const int r = c_row + i * PASS_ROWS;
      const bool valid = kv0 + r < N;
      const T* src = head + (size_t)(valid ? kv0 + r : 0) * D + c_chunk * 8;
      cp_async16(stage + tile_offset<BKV>(r, c_chunk), src, valid);
    }
  };
  load_kv(k_head, s_k, 0);
  cp_async_commit();  // [Q, K0]
  load_kv(v_head, s_v, 0);
  cp_async_commit();  // [V0]

  const int first = row0 + wg * 64;  // this warpgroup's first row
  int pos[2];  // this lane's rows g and g + 8 of its warp's 16
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) pos[hh] = row0 + warp * 16 + g + 8 * hh;

  float o[DT * 4];
#pragma unroll
  for (int x = 0; x < DT * 4; ++x) o[x] = 0.f;
  float m_run[2] = {neg_inf(), neg_inf()}, l_run[2] = {0.f, 0.f};
  const unsigned q_rows = s_q + wg * 64 * 128;  // this warpgroup's rows, in every column block

  for (int j = 0; j < tiles; ++j) {
    const int stage = j & 1, kv0 = j * BKV;
    cp_async_wait<1>();  // K_j has landed (and, at j = 0, Q) ...
    fence_proxy_async();  // ... for the async proxy
    __syncthreads();     // ... for every thread; every warpgroup is done with tile j - 1
    if (j + 1 < tiles) load_kv(k_head, s_k + (stage ^ 1) * KV_BYTES, kv0 + BKV);
    cp_async_commit();

    // S = Q K_jᵀ: D / 16 wgmma, column block ks / 4, 32 bytes a k16 step within it
    float s[NT * 4];
#pragma unroll
    for (int x = 0; x < NT * 4; ++x) s[x] = 0.f;
    const unsigned k_tile = s_k + stage * KV_BYTES;
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < KSTEPS; ++ks) {
      const unsigned col = (ks % 4) * 32;
      wgmma_ss<BKV, T, 0, 0>(s, wgmma_desc(q_rows + (ks / 4) * (BQ * 128) + col, 16, 1024),
                             wgmma_desc(k_tile + (ks / 4) * (BKV * 128) + col, 16, 1024));
    }
    wgmma_commit();
    wgmma_wait<0>();

    if (kv0 + BKV > N || (causal && kv0 + BKV - 1 > first)) {
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = kv0 + nt * 8 + 2 * t + (e & 1);
          if (key >= N || (causal && key > pos[e / 2])) s[4 * nt + e] = neg_inf();
        }
    }

    // rung 5's online softmax on the fragments; P to half (bfloat16) A fragments
    unsigned pf[BKV / 16][4];
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      float top = neg_inf();
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
        top = fmaxf(top, fmaxf(s[4 * nt + 2 * hh], s[4 * nt + 2 * hh + 1]));
      top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, 1));
      top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, 2));
      const float m_new = fmaxf(m_run[hh], top * scale_log2);
      const float shift = m_new == neg_inf() ? 0.f : m_new;  // no visible key yet
      const float alpha = exp2f(m_run[hh] - shift);
      m_run[hh] = m_new;
      float sum = 0.f;
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 2 * hh; e < 2 * hh + 2; ++e) {
          const float p = exp2f(fmaf(s[4 * nt + e], scale_log2, -shift));
          s[4 * nt + e] = p;
          sum += p;
        }
      l_run[hh] = l_run[hh] * alpha + sum;
#pragma unroll
      for (int dt = 0; dt < DT; ++dt) {
        o[4 * dt + 2 * hh] *= alpha;
        o[4 * dt + 2 * hh + 1] *= alpha;
      }
    }
#pragma unroll
    for (int kk = 0; kk < BKV / 16; ++kk) {
      pf[kk][0] = pack2<T>(s[8 * kk + 0], s[8 * kk + 1]);
      pf[kk][1] = pack2<T>(s[8 * kk + 2], s[8 * kk + 3]);
      pf[kk][2] = pack2<T>(s[8 * kk + 4], s[8 * kk + 5]);
      pf[kk][3] = pack2<T>(s[8 * kk + 6], s[8 * kk + 7]);
    }

    cp_async_wait<1>();  // V_j has landed (K_{j+1} may still be in flight) ...
    fence_proxy_async();
    __syncthreads();     // ... for every thread
    if (j + 1 < tiles) load_kv(v_head, s_v + (stage ^ 1) * KV_BYTES, kv0 + BKV);
    cp_async_commit();

    // O += P V_j: 4 wgmma, keys 16 kk .. 16 kk + 15 (16 rows of 128 bytes), column blocks
    // BKV x 128 bytes apart
    const unsigned v_tile = s_v + stage * KV_BYTES;
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BKV / 16; ++kk)
      wgmma_rs<D, T, 1>(o, pf[kk], wgmma_desc(v_tile + kk * 16 * 128, BKV * 128, 1024));
    wgmma_commit();
    wgmma_wait<0>();
  }
  cp_async_wait<0>();  // only empty groups remain; nothing may be in flight at exit

  // rung 5's epilogue: O / l from the fragments
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    float l = l_run[hh];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const float inv = l > 0.f ? 1.f / l : 0.f;
    const int row = pos[hh];
    if (row < N) {
      T* dst = o_head + (size_t)row * D + 2 * t;
#pragma unroll
      for (int dt = 0; dt < DT; ++dt)
        store2(dst + dt * 8, o[4 * dt + 2 * hh] * inv, o[4 * dt + 2 * hh + 1] * inv);
    }
  }
}

// MIN_BLOCKS: blocks per SM the register budget is set for (2 at d = 64: 128 registers)
#define FLASH_ENTRY(NAME, T, D, MIN_BLOCKS)                                                  \
  extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)                         \
      NAME(const T* __restrict__ Q, const T* __restrict__ K, const T* __restrict__ V,        \
           T* __restrict__ O, int N, int H, int HKV, float scale_log2, int causal) {         \
    flash_forward<T, D>(Q, K, V, O, N, H, HKV, scale_log2, causal);                         \
  }

FLASH_ENTRY(wgmma_flash_d64, half, 64, 2)
FLASH_ENTRY(wgmma_flash_d128, half, 128, 1)
FLASH_ENTRY(wgmma_flash_d64_bf16, __nv_bfloat16, 64, 2)
FLASH_ENTRY(wgmma_flash_d128_bf16, __nv_bfloat16, 128, 1)
