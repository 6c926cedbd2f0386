// Rung 8: rung 7's kernel with the softmax of key tile j run while the tensor cores do the
// P V product of tile j - 1 (FlashAttention-3's pipelining within a warpgroup). Same operands,
// shared-memory layout, build (sm_90a) and launch as rung 7.
//
// Rung 7 waits for each product at once, so a warpgroup's tensor-core work and its softmax take
// turns. Here each key tile issues two products back to back and waits for one:
//   issue S_j = Q K_jᵀ, issue O += P_{j-1} V_{j-1}, wait for S_j (wait_group 1),
//   mask and softmax S_j (its exponentials and row sums) while P V still runs,
//   wait for P V (wait_group 0), then rescale O by tile j's alpha and pack P_j in pairs.
// The rescale must wait: O's registers belong to the product in flight, and so do P_{j-1}'s
// (wgmma reads its register operand while it runs), so S_j as floats and P_{j-1} as packed
// pairs are live together. The first tile's S is computed before the loop, the last tile's P V after it.
// The copies change with it: V_j is first read a tile later (by P V in tile j + 1), so one
// cp.async group per tile brings K_{j+1} and V_j, a tile ahead of their use, and the tile's one
// barrier finds K_{j-1}'s stage and V_{j-2}'s free.
// The compiler: ptxas moves a wgmma wait up past arithmetic that nothing ties to it, and so put
// wait_group 0 right after wait_group 1, before the exponentials (cuobjdump -sass). A store of
// the row sums to shared memory just before the wait (store_before_wait; they need every
// exponential) keeps all 34 between the two waits; the lab notes have the SASS.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "ladder/core/cuda/convert.cuh"      // pack2, store2
#include "ladder/core/cuda/cp_async.cuh"     // cp_async16, commit, wait
#include "ladder/core/cuda/memory.cuh"       // smem_addr, fence_proxy_async
#include "ladder/core/cuda/wgmma.cuh"        // wgmma_desc, wgmma_ss, wgmma_rs and their order

#include "swizzled_rows.cuh"  // neg_inf
#include "wgmma_tiles.cuh"  // the descriptor layout (tile_offset), store_before_wait

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
  const unsigned s_sums = s_v + 2 * KV_BYTES;  // one word a thread, written and never read
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
  // Tile j's barrier follows the group that brought K_j and V_{j-1}; afterwards every warpgroup
  // is done with K_{j-1} (its S was waited for) and V_{j-2} (its P V too): their stages refill.
  auto barrier_then_copy = [&](int j) {
    cp_async_wait<0>();
    fence_proxy_async();  // for the async proxy
    __syncthreads();
    if (j + 1 < tiles) load_kv(k_head, s_k + ((j + 1) & 1) * KV_BYTES, (j + 1) * BKV);
    load_kv(v_head, s_v + (j & 1) * KV_BYTES, j * BKV);
    cp_async_commit();
  };
  load_kv(k_head, s_k, 0);
  cp_async_commit();  // [Q, K0]

  const int first = row0 + wg * 64;  // this warpgroup's first row
  int pos[2];  // this lane's rows g and g + 8 of its warp's 16
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) pos[hh] = row0 + warp * 16 + g + 8 * hh;

  float o[DT * 4];
#pragma unroll
  for (int x = 0; x < DT * 4; ++x) o[x] = 0.f;
  float m_run[2] = {neg_inf(), neg_inf()}, l_run[2] = {0.f, 0.f}, alpha[2];
  const unsigned q_rows = s_q + wg * 64 * 128;  // this warpgroup's rows, in every column block

  float s[NT * 4];
  // S = Q K_jᵀ, issued, not waited for: D / 16 wgmma, column block ks / 4, 32 bytes a k16 step
  auto issue_scores = [&](int j) {
#pragma unroll
    for (int x = 0; x < NT * 4; ++x) s[x] = 0.f;
    const unsigned k_tile = s_k + (j & 1) * KV_BYTES;
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < KSTEPS; ++ks) {
      const unsigned col = (ks % 4) * 32;
      wgmma_ss<BKV, T, 0, 0>(s, wgmma_desc(q_rows + (ks / 4) * (BQ * 128) + col, 16, 1024),
                             wgmma_desc(k_tile + (ks / 4) * (BKV * 128) + col, 16, 1024));
    }
    wgmma_commit();
  };
  // rung 7's mask and online softmax on S_j, all but the rescale of O: alpha is kept for it
  auto softmax = [&](int j) {
    const int kv0 = j * BKV;
    if (kv0 + BKV > N || (causal && kv0 + BKV - 1 > first)) {
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = kv0 + nt * 8 + 2 * t + (e & 1);
          if (key >= N || (causal && key > pos[e / 2])) s[4 * nt + e] = neg_inf();
        }
    }
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
      alpha[hh] = exp2f(m_run[hh] - shift);
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
      l_run[hh] = l_run[hh] * alpha[hh] + sum;
    }
  };
  unsigned pf[BKV / 16][4];  // P_j as wgmma's register A fragments, 16 keys each
  auto rescale_and_pack = [&]() {
#pragma unroll
    for (int hh = 0; hh < 2; ++hh)
#pragma unroll
      for (int dt = 0; dt < DT; ++dt) {
        o[4 * dt + 2 * hh] *= alpha[hh];
        o[4 * dt + 2 * hh + 1] *= alpha[hh];
      }
#pragma unroll
    for (int kk = 0; kk < BKV / 16; ++kk) {
      pf[kk][0] = pack2<T>(s[8 * kk + 0], s[8 * kk + 1]);
      pf[kk][1] = pack2<T>(s[8 * kk + 2], s[8 * kk + 3]);
      pf[kk][2] = pack2<T>(s[8 * kk + 4], s[8 * kk + 5]);
      pf[kk][3] = pack2<T>(s[8 * kk + 6], s[8 * kk + 7]);
    }
  };
  // O += P_{j-1} V_{j-1}, issued: 4 wgmma, keys 16 kk .. 16 kk + 15 of the stage, column blocks
  // BKV x 128 bytes apart
  auto issue_pv = [&](int j) {
    const unsigned v_tile = s_v + (j & 1) * KV_BYTES;
    fence_operands(o);
#pragma unroll
    for (int kk = 0; kk < BKV / 16; ++kk)
      wgmma_rs<D, T, 1>(o, pf[kk], wgmma_desc(v_tile + kk * 16 * 128, BKV * 128, 1024));
    wgmma_commit();
    fence_operands(o);
  };

  // tile 0: its scores alone, nothing to overlap them with yet
  barrier_then_copy(0);
  issue_scores(0);
  wgmma_wait<0>();
  softmax(0);
  rescale_and_pack();

  for (int j = 1; j < tiles; ++j) {
    barrier_then_copy(j);
    issue_scores(j);  // S_j ...
    issue_pv(j - 1);  // ... and P_{j-1} V_{j-1}, back to back on the tensor cores
    wgmma_wait<1>();  // S_j is done; P V may still run
    fence_operands(s);
    softmax(j);       // the exponentials of tile j under tile j - 1's P V
    store_before_wait(s_sums + tid * 4, l_run[0] + l_run[1]);  // keeps them above the wait
    wgmma_wait<0>();  // P V is done: O and P_{j-1}'s registers are free again
    fence_operands(o);
    rescale_and_pack();
  }
  // the last tile's P V: its V came with the last tile's group
  cp_async_wait<0>();
  fence_proxy_async();
  __syncthreads();
  wgmma_fence();
  issue_pv(tiles - 1);
  wgmma_wait<0>();
  fence_operands(o);

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

FLASH_ENTRY(overlap_flash_d64, half, 64, 2)
FLASH_ENTRY(overlap_flash_d128, half, 128, 1)
FLASH_ENTRY(overlap_flash_d64_bf16, __nv_bfloat16, 64, 2)
FLASH_ENTRY(overlap_flash_d128_bf16, __nv_bfloat16, 128, 1)
