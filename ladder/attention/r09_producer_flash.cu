// Rung 9: rung 8's kernel, warp-specialized: a producer warpgroup brings K and V by TMA, and the
// consumer warpgroups only compute. Same products, softmax, overlap and epilogue as rung 8;
// Q, K, V, O and the masks as there. Build for sm_90a (wgmma and setmaxnreg).
//
// Against rung 8:
// (1) one more warpgroup, the producer: its thread 0 issues one bulk tensor copy
//     (TMA, cp.async.bulk.tensor) per 64-column block of each K and V tile, into the same
//     swizzled stages rung 8's cp.async filled (the 128-byte swizzle writes rung 8's layout);
//     the other 127 threads exit, and setmaxnreg gives the warpgroup's registers away;
// (2) the block's barrier per key tile becomes four mbarriers per stage pair: "full" (the
//     copy's bytes arrived; TMA counts them) that the consumers wait for, and "empty" (every
//     consumer thread is done with the stage) that the producer waits for before it refills;
//     a warpgroup waits for its data, and for the others only through the stages (a stage
//     is refilled once every consumer has read it, so none runs more than about a tile ahead);
// (3) the host makes two tensor maps, K and V as (B HKV) x N x D: a box of 64 keys never
//     crosses into the next head, and keys past N arrive as zeros;
// (4) Q is copied once, by each consumer warpgroup for its own 64 rows (cp.async), with a
//     barrier of that warpgroup's 128 threads (bar.sync 1 + wg, 128);
// (5) one block an SM, its query rows set per head dimension: 4 consumer warpgroups (256 rows,
//     112 registers each) at D = 64, where rung 8 ran two blocks of 2, and 2 (128 rows, 240
//     registers) at D = 128.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "ladder/core/cuda/convert.cuh"      // pack2, store2
#include "ladder/core/cuda/cp_async.cuh"     // cp_async16, for Q
#include "ladder/core/cuda/mbarrier.cuh"     // the full and empty barriers
#include "ladder/core/cuda/memory.cuh"       // smem_addr, fence_proxy_async
#include "ladder/core/cuda/tma.cuh"          // the tensor maps, the bulk tensor copy
#include "ladder/core/cuda/warpgroup.cuh"    // setmaxnreg, named barriers
#include "ladder/core/cuda/wgmma.cuh"        // wgmma_desc, wgmma_ss, wgmma_rs and their order

#include "swizzled_rows.cuh"  // neg_inf
#include "wgmma_tiles.cuh"  // the descriptor layout (tile_offset), store_before_wait

constexpr int BKV = 64;  // keys per tile
constexpr int STAGES = 2;

template <typename T, int D, int CONSUMERS, int CONSUMER_REGS>
__device__ __forceinline__ void flash_forward(const TensorMap& tmK, const TensorMap& tmV,
                                              const T* __restrict__ Q, T* __restrict__ O,
                                              int N, int H, int HKV, float scale_log2,
                                              int causal) {
  constexpr int BQ = 64 * CONSUMERS;            // query rows per block
  constexpr int CHUNKS = D / 8;                 // 16-byte chunks per row
  constexpr int KV_BYTES = BKV * D * 2;         // one stage of K or V
  constexpr int PASS_ROWS = 128 / CHUNKS;       // rows one cp.async pass of a warpgroup covers
  constexpr int KSTEPS = D / 16, NT = BKV / 8, DT = D / 8;
  static_assert(D % 64 == 0 && 64 % PASS_ROWS == 0, "copy mapping");

  extern __shared__ unsigned char smem_raw[];
  __shared__ alignas(8) unsigned long long full_k[STAGES], full_v[STAGES];
  __shared__ alignas(8) unsigned long long empty_k[STAGES], empty_v[STAGES];
  const unsigned s_q = (smem_addr(smem_raw) + 1023) & ~1023u;  // descriptors need 1 KB
  const unsigned s_k = s_q + BQ * D * 2, s_v = s_k + STAGES * KV_BYTES;
  const unsigned s_sums = s_v + STAGES * KV_BYTES;  // one word a consumer thread, never read

  const int group = H / HKV;
  const int b = blockIdx.z;
  const int kv = blockIdx.y / group;
  const int tile = causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const int row0 = tile * BQ;
  const int last = min(row0 + BQ, N) - 1;
  const int kv_len = causal ? min(N, last + 1) : N;
  const int tiles = (kv_len + BKV - 1) / BKV;

  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(smem_addr(&full_k[s]), 1);  // the producer's expect_tx arrival, then the bytes
      mbar_init(smem_addr(&full_v[s]), 1);
      mbar_init(smem_addr(&empty_k[s]), CONSUMERS * 128);  // every consumer thread
      mbar_init(smem_addr(&empty_v[s]), CONSUMERS * 128);
    }
    mbar_fence_init();
  }
  __syncthreads();  // the block's only barrier

  if (threadIdx.x < 128) {  // the producer warpgroup
    setmaxnreg_dec<24>();
    if (threadIdx.x == 0) {
      const int layer = b * HKV + kv;  // K and V's maps: (B HKV) x N x D
      auto copy = [&](const TensorMap& map, unsigned long long* full, unsigned long long* empty,
                      unsigned stages, int j) {
        const int s = j % STAGES;
        // an mbarrier counts phases; try_wait.parity waits for the phase of the given parity
        // to complete. Stage s's "empty" completes phase p when the consumers release its
        // (p + 1)-th use, so before use j / STAGES (tile j) wait for phase j / STAGES - 1:
        // the consumers' release of tile j - STAGES ((j / STAGES + 1) & 1, the same bit)
        if (j >= STAGES) mbar_wait(smem_addr(&empty[s]), ((j / STAGES) + 1) & 1);
        const unsigned bar = smem_addr(&full[s]);
        mbar_arrive_expect_tx(bar, KV_BYTES);
#pragma unroll
        for (int cb = 0; cb < D / 64; ++cb)  // coordinates innermost first: (column, key, layer)
          tma_load_3d(stages + s * KV_BYTES + cb * BKV * 128, &map, bar, cb * 64, j * BKV, layer);
      };
      for (int j = 0; j < tiles; ++j) {  // K_j first: the consumers need it a tile before V_j
        copy(tmK, full_k, empty_k, s_k, j);
        copy(tmV, full_v, empty_v, s_v, j);
      }
    }
    return;
  }
  setmaxnreg_inc<CONSUMER_REGS>();

  const int tid = threadIdx.x - 128, warp = tid / 32, lane = tid % 32;  // among the consumers
  const int g = lane / 4, t = lane % 4;
  const int wg = warp / 4;  // this warpgroup's 64 rows of the block's BQ
  const T* q_head = Q + ((size_t)b * H + blockIdx.y) * N * D;
  T* o_head = O + ((size_t)b * H + blockIdx.y) * N * D;

  {  // this warpgroup's 64 rows of Q, once
    const int c_row = (tid % 128) / CHUNKS, c_chunk = tid % CHUNKS;
#pragma unroll
    for (int i = 0; i < 64 / PASS_ROWS; ++i) {
      const int r = wg * 64 + c_row + i * PASS_ROWS;
      const bool valid = row0 + r < N;
      const T* src = q_head + (size_t)(valid ? row0 + r : 0) * D + c_chunk * 8;
      cp_async16(s_q + tile_offset<BQ>(r, c_chunk), src, valid);
    }
    cp_async_commit();
    cp_async_wait<0>();
    fence_proxy_async();  // for the async proxy
    bar_sync(1 + wg, 128);  // this warpgroup only
  }
  auto wait_full = [&](unsigned long long* full, int j) {
    mbar_wait(smem_addr(&full[j % STAGES]), (j / STAGES) & 1);
  };
  auto release = [&](unsigned long long* empty, int j) { mbar_arrive(smem_addr(&empty[j % STAGES])); };

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
    const unsigned k_tile = s_k + (j % STAGES) * KV_BYTES;
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
  // O += P_{j-1} V_{j-1}, issued: BKV / 16 wgmma, keys 16 kk .. 16 kk + 15 of the stage,
  // column blocks BKV x 128 bytes apart
  auto issue_pv = [&](int j) {
    const unsigned v_tile = s_v + (j % STAGES) * KV_BYTES;
    fence_operands(o);
#pragma unroll
    for (int kk = 0; kk < BKV / 16; ++kk)
      wgmma_rs<D, T, 1>(o, pf[kk], wgmma_desc(v_tile + kk * 16 * 128, BKV * 128, 1024));
    wgmma_commit();
    fence_operands(o);
  };

  // tile 0: its scores alone, nothing to overlap them with yet
  wait_full(full_k, 0);
  issue_scores(0);
  wgmma_wait<0>();
  release(empty_k, 0);
  softmax(0);
  rescale_and_pack();

  for (int j = 1; j < tiles; ++j) {
    wait_full(full_k, j);
    wait_full(full_v, j - 1);  // both waits first: nothing may come between the two products
    issue_scores(j);  // S_j ...
    issue_pv(j - 1);  // ... and P_{j-1} V_{j-1}, back to back on the tensor cores
    wgmma_wait<1>();  // S_j is done; P V may still run
    release(empty_k, j);
    fence_operands(s);
    softmax(j);       // the exponentials of tile j under tile j - 1's P V
    store_before_wait(s_sums + tid * 4, l_run[0] + l_run[1]);  // keeps them above the wait
    wgmma_wait<0>();  // P V is done: O and P_{j-1}'s registers are free again
    release(empty_v, j - 1);
    fence_operands(o);
    rescale_and_pack();
  }
  // the last tile's P V
  wait_full(full_v, tiles - 1);
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

// CONSUMERS warpgroups of 64 query rows and one producer, MIN_BLOCKS blocks an SM; setmaxnreg
// moves the producer's registers to the consumers (24 a thread left to it)
#define FLASH_ENTRY(NAME, T, D, CONSUMERS, CONSUMER_REGS, MIN_BLOCKS)                         \
  extern "C" __global__ void __launch_bounds__(128 * (CONSUMERS + 1), MIN_BLOCKS)            \
      NAME(const __grid_constant__ TensorMap tmK, const __grid_constant__ TensorMap tmV,      \
           const T* __restrict__ Q, T* __restrict__ O, int N, int H, int HKV,                 \
           float scale_log2, int causal) {                                                    \
    flash_forward<T, D, CONSUMERS, CONSUMER_REGS>(tmK, tmV, Q, O, N, H, HKV, scale_log2,      \
                                                  causal);                                    \
  }

FLASH_ENTRY(producer_flash_d64, half, 64, 4, 112, 1)
FLASH_ENTRY(producer_flash_d128, half, 128, 2, 240, 1)
FLASH_ENTRY(producer_flash_d64_bf16, __nv_bfloat16, 64, 4, 112, 1)
FLASH_ENTRY(producer_flash_d128_bf16, __nv_bfloat16, 128, 2, 240, 1)
