// A try, not a rung (docs/notes/attention.md, "Tries after rung 8: wider tiles"): attention
// rung 8's kernel with its tiles sized to the register file, 128 keys a tile, and at d = 64
// three warpgroups (192 query rows) a block. Same operands, layout, build (sm_90a) and loop as
// rung 8; only the tile shape changes, and with it the products' width and the copies. It ran
// slower than rung 8 at every shape (attention_tries.py beside this file).
//
// Rung 8's 64-key tile makes S = Q K_jᵀ m64n64 products, each reading 2 KB of Q and 2 KB of K
// from shared memory for 131 k FLOP; with 128 keys a m64n128 product reads 2 KB of Q and 4 KB
// of K for twice the FLOP. P V keeps its width (d) and takes twice the k16 steps.
// A warpgroup then holds S_j as 64 floats a thread and P_{j-1} as 32 packed pairs, beside O:
// 200-odd registers at d = 128 (one block of two warpgroups an SM, as in rung 8), 168 at d = 64,
// where two blocks an SM no longer fit, so the block grows to three warpgroups instead.
// Copies: each thread copies 16-byte chunks i = tid, tid + THREADS, ... of a tile
// (load_tile), as the passes of 3 warpgroups of threads do not divide a tile's rows evenly.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "../../../ladder/attention/mma_sync.cuh"  // cp.async
#include "../../../ladder/attention/wgmma.cuh"     // the descriptor layout, the two wgmma shapes, pack2; desc, fences

// Rows [first_row, first_row + ROWS) of a (N, D) head into a tile in the descriptor layout,
// rows past N as zeros: THREADS threads copy its 16-byte chunks i = tid, tid + THREADS, ...
template <typename T, int D, int ROWS, int THREADS>
__device__ __forceinline__ void load_tile(unsigned tile, const T* head, int first_row, int N,
                                          int tid) {
  constexpr int CHUNKS = D / 8;  // 16-byte chunks per row
#pragma unroll
  for (int i = tid; i < ROWS * CHUNKS; i += THREADS) {
    const int r = i / CHUNKS, c = i % CHUNKS;
    const bool valid = first_row + r < N;
    const T* src = head + (size_t)(valid ? first_row + r : 0) * D + c * 8;
    cp_async16(tile + tile_offset<ROWS>(r, c), src, valid);
  }
}

// BQ query rows a block (BQ / 64 warpgroups), BKV keys a tile
template <typename T, int D, int BQ, int BKV>
__device__ __forceinline__ void flash_forward(const T* __restrict__ Q, const T* __restrict__ K,
                                              const T* __restrict__ V, T* __restrict__ O,
                                              int N, int H, int HKV, float scale_log2,
                                              int causal) {
  constexpr int THREADS = BQ / 64 * 128;
  constexpr int KV_BYTES = BKV * D * 2;         // one stage of K or V
  constexpr int KSTEPS = D / 16, NT = BKV / 8, DT = D / 8;
  static_assert(D % 64 == 0 && BQ % 64 == 0 && BKV % 64 == 0, "tile shape");

  extern __shared__ unsigned char smem_raw[];
  const unsigned s_q = (smem_addr(smem_raw) + 1023) & ~1023u;  // descriptors need 1 KB
  const unsigned s_k = s_q + BQ * D * 2, s_v = s_k + 2 * KV_BYTES;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, t = lane % 4;
  const int wg = warp / 4;  // this warpgroup's 64 rows of the block's BQ

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

  load_tile<T, D, BQ, THREADS>(s_q, q_head, row0, N, tid);
  auto load_kv = [&](const T* head, unsigned stage, int kv0) {
    load_tile<T, D, BKV, THREADS>(stage, head, kv0, N, tid);
  };
  // Tile j's barrier follows the group that brought K_j and V_{j-1}; afterwards every warpgroup
  // is done with K_{j-1} (its S was waited for) and V_{j-2} (its P V too): their stages refill.
  auto barrier_then_copy = [&](int j) {
    cp_async_wait<0>();
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // for the async proxy
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
      wgmma_ss<BKV, T>(s, desc(q_rows + (ks / 4) * (BQ * 128) + col, 16, 1024),
                   desc(k_tile + (ks / 4) * (BKV * 128) + col, 16, 1024));
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
      wgmma_rs<D, T>(o, pf[kk], desc(v_tile + kk * 16 * 128, BKV * 128, 1024));
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
    wgmma_wait<0>();  // P V is done: O and P_{j-1}'s registers are free again
    fence_operands(o);
    rescale_and_pack();
  }
  // the last tile's P V: its V came with the last tile's group
  cp_async_wait<0>();
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
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
        *reinterpret_cast<unsigned*>(dst + dt * 8) =
            pack2<T>(o[4 * dt + 2 * hh] * inv, o[4 * dt + 2 * hh + 1] * inv);
    }
  }
}

// An entry point of one tile shape; one block an SM
#define FLASH_ENTRY(NAME, T, D, BQ, BKV)                                                     \
  extern "C" __global__ void __launch_bounds__(BQ / 64 * 128, 1)                            \
      NAME(const T* __restrict__ Q, const T* __restrict__ K, const T* __restrict__ V,        \
           T* __restrict__ O, int N, int H, int HKV, float scale_log2, int causal) {         \
    flash_forward<T, D, BQ, BKV>(Q, K, V, O, N, H, HKV, scale_log2, causal);                \
  }

// attention_tries.py appends one FLASH_ENTRY(name, type, D, BQ, BKV) per variant
