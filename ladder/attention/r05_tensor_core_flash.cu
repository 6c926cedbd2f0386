// Rungs 5 and 6: flash attention forward on the tensor cores, mma.sync + ldmatrix (FA2 layout).
// O = softmax(Q Kᵀ / √d) V for half Q (B, H, N, D), K and V (B, HKV, N, D), half O like Q; FP32
// scores, softmax statistics and accumulators. The launcher passes D in {64, 128} (other head
// dimensions are zero-padded) and 16-byte aligned pointers; N is any length (edges are masked).
//
// A block owns a tile of BQ = 16 * MI * WARPS query rows of one head and walks the keys in tiles
// of BKV = 64; warp w owns MI m16 tiles, rows w * 16 * MI ... + 16 * MI - 1 of the block's tile.
//
//   Q tile:  cp.async into shared memory once, then ldmatrix.x4 into registers (A fragments),
//            kept there for the whole loop: MI x D/16 x 4 registers.
//   K tile:  S = Q Kᵀ with mma.m16n8k16.row.col: B = Kᵀ is "col" (K's rows, the keys, are B's
//            columns, D contiguous), so plain ldmatrix.x4 delivers the B fragments of two
//            n8 tiles (16 keys) per instruction.
//   softmax: on the accumulator fragments. Lane (g = lane / 4, t = lane % 4) holds rows g and
//            g + 8 of each m16 tile, keys 2t and 2t + 1 of each n8 tile, so a row's max is the
//            lane's own max then two xor shuffles (1, 2) across the quad. Scores are in log2
//            units: p = exp2(s * log2(e)/√d - m), one FFMA and one MUFU.EX2 each. Each lane keeps
//            its partial row sum and rescales it and its O fragments by α = exp2(m_old - m_new).
//   P V:     the C fragments of two adjacent n8 tiles of S are exactly the A fragment of one
//            k16 step of P V (rows g, g + 8; columns 2t, 2t + 1 and 2t + 8, 2t + 9), so P is
//            converted to half2 in registers and never touches shared memory. B = V is "row"
//            (keys x D, D contiguous), so ldmatrix.x4.trans delivers its fragments.
//
// Shared memory: Q (BQ rows), then K and V in two stages each (BKV rows), every row D halves in
// 16-byte chunks placed by an XOR swizzle, chunk' = chunk ^ (row & 7). A bank group is 16 bytes
// ((address / 16) % 8), an ldmatrix matrix reads 8 consecutive rows at one chunk, and a
// cp.async phase writes 8 chunks of one row: both land in 8 distinct groups. No padding.
//
// Pipeline (cp.async groups; tile j's K and V in stage j % 2):
//   prologue: [Q, K0] [V0]; wait for [Q, K0]
//   tile j:   wait K_j, barrier; issue K_{j+1}; S = Q K_jᵀ; softmax
//             wait V_j, barrier; issue V_{j+1}; O += P V_j
// Each barrier also retires every warp's reads of the stage that the next copy overwrites (read
// by tile j - 1, before the barrier). K_{j+1} lands during the softmax and P V_j, V_{j+1} during
// P V_j and S_{j+1}. Past the last tile the groups are committed empty, so "all but the newest
// group" (wait_group 1) is always the group needed.
//
// Causal (key j visible to query i when j <= i): a block stops at the tile that holds its last
// row's diagonal, and masks (s = -inf) only in the tiles that cross its first row's diagonal or
// the end of N. Causal blocks are launched longest first.
//
// Grouped-query attention: query head h reads key/value head h / (H / HKV). PACKED (rung 6)
// instead gives a block the query rows of all G = H / HKV heads that share one K/V head: block
// row r is position r / G of head kv * G + r % G, so every K/V tile a block stages serves G heads.
#include <cuda_fp16.h>

#include "ladder/core/cuda/convert.cuh"      // pack2
#include "ladder/core/cuda/cp_async.cuh"     // cp_async16, commit, wait
#include "ladder/core/cuda/ldmatrix.cuh"     // ldmatrix_x4, ldmatrix_x4_trans
#include "ladder/core/cuda/mma_sync.cuh"     // mma_16816: its fragment layout is written there

#include "swizzled_rows.cuh"  // the swizzle, neg_inf

constexpr int BKV = 64;  // keys per tile

template <int D, int WARPS, int MI, bool PACKED>
__device__ __forceinline__ void flash_forward(const half* __restrict__ Q,
                                              const half* __restrict__ K,
                                              const half* __restrict__ V, half* __restrict__ O,
                                              int N, int H, int HKV, float scale_log2,
                                              int causal) {
  constexpr int THREADS = 32 * WARPS;
  constexpr int BQ = 16 * MI * WARPS;             // query rows per block
  constexpr int ROW_BYTES = D * 2;                // one row of Q, K or V in shared memory
  constexpr int CHUNKS = D / 8;                   // 16-byte chunks per row
  constexpr int KV_BYTES = BKV * ROW_BYTES;       // one stage of K or V
  constexpr int PASS_ROWS = THREADS / CHUNKS;     // rows one cp.async pass of the block covers
  constexpr int KSTEPS = D / 16, NT = BKV / 8, DT = D / 8;
  static_assert(D % 64 == 0 && BQ % PASS_ROWS == 0 && BKV % PASS_ROWS == 0, "copy mapping");

  extern __shared__ __align__(128) unsigned char smem[];
  const unsigned s_q = (unsigned)__cvta_generic_to_shared(smem);
  const unsigned s_k = s_q + BQ * ROW_BYTES, s_v = s_k + 2 * KV_BYTES;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, t = lane % 4;

  const int group = H / HKV;
  const int b = blockIdx.z;
  const int kv = PACKED ? blockIdx.y : blockIdx.y / group;
  const int rows = PACKED ? N * group : N;  // packed: row r is position r / G of head r % G
  const int tile = causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const int row0 = tile * BQ;
  const half* k_head = K + ((size_t)b * HKV + kv) * N * D;
  const half* v_head = V + ((size_t)b * HKV + kv) * N * D;
  auto position = [&](int row) { return PACKED ? row / group : row; };
  auto row_offset = [&](int row) -> size_t {  // element offset of a query row in Q and O
    const int head = PACKED ? kv * group + row % group : (int)blockIdx.y;
    return (((size_t)b * H + head) * N + position(row)) * D;
  };

  const int first = position(row0);
  const int last = position(min(row0 + BQ, rows) - 1);
  const int kv_len = causal ? min(N, last + 1) : N;
  const int tiles = (kv_len + BKV - 1) / BKV;

  // Global -> shared: thread tid copies chunk tid % CHUNKS of rows tid / CHUNKS + i * PASS_ROWS
  // (8 or 16 consecutive threads read one row's 128 or 256 contiguous bytes).
  const int c_row = tid / CHUNKS, c_chunk = tid % CHUNKS;
#pragma unroll
  for (int i = 0; i < BQ / PASS_ROWS; ++i) {
    const int r = c_row + i * PASS_ROWS;
    const bool valid = row0 + r < rows;
    const half* src = Q + (valid ? row_offset(row0 + r) : 0) + c_chunk * 8;
    cp_async16(s_q + swizzle<ROW_BYTES>(r, c_chunk), src, valid);
  }
  auto load_kv = [&](const half* head, unsigned stage, int kv0) {
#pragma unroll
    for (int i = 0; i < BKV / PASS_ROWS; ++i) {
      const int r = c_row + i * PASS_ROWS;
      const bool valid = kv0 + r < N;
      const half* src = head + (size_t)(valid ? kv0 + r : 0) * D + c_chunk * 8;
      cp_async16(stage + swizzle<ROW_BYTES>(r, c_chunk), src, valid);
    }
  };
  load_kv(k_head, s_k, 0);
  cp_async_commit();  // [Q, K0]
  load_kv(v_head, s_v, 0);
  cp_async_commit();  // [V0]
  cp_async_wait<1>();
  __syncthreads();

  // Q fragments: lane l addresses row l % 16 of an m16 tile at chunk 2 ks + l / 16 (matrices:
  // rows 0-7 and 8-15 at k 0-7, then at k 8-15: a[0..3] of mma).
  const int warp_row = warp * 16 * MI;
  unsigned qf[MI][KSTEPS][4];
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int ks = 0; ks < KSTEPS; ++ks)
      ldmatrix_x4(qf[mi][ks],
                  s_q + swizzle<ROW_BYTES>(warp_row + mi * 16 + lane % 16, 2 * ks + lane / 16));

  // K (plain ldmatrix): lane l addresses key 8 (l / 16) + l % 8 of a 16-key pair of n8 tiles at
  // chunk 2 ks + (l / 8) % 2 (matrices: tile 2p at k 0-7 and 8-15, then tile 2p + 1): b0, b1 of
  // the two tiles. V (.trans): key 16 kk + l % 16 at chunk 2 dp + l / 16 (matrices: keys 0-7 and
  // 8-15 of d tile 2 dp, then of d tile 2 dp + 1).
  const int k_key = (lane / 16) * 8 + lane % 8, k_chunk = (lane / 8) % 2;
  const int v_key = lane % 16, v_chunk = lane / 16;

  int pos[MI][2];  // the positions of this lane's rows g and g + 8 of each m16 tile
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) pos[mi][hh] = position(row0 + warp_row + mi * 16 + g + 8 * hh);

  float o[MI][DT][4] = {};
  float m_run[MI][2], l_run[MI][2];
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      m_run[mi][hh] = neg_inf();
      l_run[mi][hh] = 0.f;
    }

  for (int j = 0; j < tiles; ++j) {
    const int stage = j & 1, kv0 = j * BKV;
    if (j > 0) {
      cp_async_wait<1>();  // K_j has landed (V_j may still be in flight) ...
      __syncthreads();     // ... for every thread, and every warp is done with tile j - 1
    }
    if (j + 1 < tiles) load_kv(k_head, s_k + (stage ^ 1) * KV_BYTES, kv0 + BKV);
    cp_async_commit();

    // S = Q K_jᵀ
    float s[MI][NT][4] = {};
    const unsigned k_tile = s_k + stage * KV_BYTES;
#pragma unroll
    for (int ks = 0; ks < KSTEPS; ++ks) {
#pragma unroll
      for (int p = 0; p < NT / 2; ++p) {
        unsigned kb[4];
        ldmatrix_x4(kb, k_tile + swizzle<ROW_BYTES>(p * 16 + k_key, 2 * ks + k_chunk));
#pragma unroll
        for (int mi = 0; mi < MI; ++mi) {
          mma_16816(s[mi][2 * p], qf[mi][ks], {kb[0], kb[1]});
          mma_16816(s[mi][2 * p + 1], qf[mi][ks], {kb[2], kb[3]});
        }
      }
    }

    if (kv0 + BKV > N || (causal && kv0 + BKV - 1 > first)) {
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int key = kv0 + nt * 8 + 2 * t + (e & 1);
            if (key >= N || (causal && key > pos[mi][e / 2])) s[mi][nt][e] = neg_inf();
          }
    }

    // online softmax on the fragments; P to half A fragments: two n8 tiles of S per k16 step
    unsigned pf[MI][BKV / 16][4];
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        float top = neg_inf();
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
          top = fmaxf(top, fmaxf(s[mi][nt][2 * hh], s[mi][nt][2 * hh + 1]));
        top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, 1));
        top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, 2));
        const float m_new = fmaxf(m_run[mi][hh], top * scale_log2);
        const float shift = m_new == neg_inf() ? 0.f : m_new;  // no visible key yet
        const float alpha = exp2f(m_run[mi][hh] - shift);
        m_run[mi][hh] = m_new;
        float sum = 0.f;
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
          for (int e = 2 * hh; e < 2 * hh + 2; ++e) {
            const float p = exp2f(fmaf(s[mi][nt][e], scale_log2, -shift));
            s[mi][nt][e] = p;
            sum += p;
          }
        l_run[mi][hh] = l_run[mi][hh] * alpha + sum;
#pragma unroll
        for (int dt = 0; dt < DT; ++dt) {
          o[mi][dt][2 * hh] *= alpha;
          o[mi][dt][2 * hh + 1] *= alpha;
        }
      }
#pragma unroll
      for (int kk = 0; kk < BKV / 16; ++kk) {
        pf[mi][kk][0] = pack2<half>(s[mi][2 * kk][0], s[mi][2 * kk][1]);
        pf[mi][kk][1] = pack2<half>(s[mi][2 * kk][2], s[mi][2 * kk][3]);
        pf[mi][kk][2] = pack2<half>(s[mi][2 * kk + 1][0], s[mi][2 * kk + 1][1]);
        pf[mi][kk][3] = pack2<half>(s[mi][2 * kk + 1][2], s[mi][2 * kk + 1][3]);
      }
    }

    cp_async_wait<1>();  // V_j has landed (K_{j+1} may still be in flight) ...
    __syncthreads();     // ... for every thread
    if (j + 1 < tiles) load_kv(v_head, s_v + (stage ^ 1) * KV_BYTES, kv0 + BKV);
    cp_async_commit();

    // O += P V_j
    const unsigned v_tile = s_v + stage * KV_BYTES;
#pragma unroll
    for (int kk = 0; kk < BKV / 16; ++kk) {
#pragma unroll
      for (int dp = 0; dp < DT / 2; ++dp) {
        unsigned vb[4];
        ldmatrix_x4_trans(vb, v_tile + swizzle<ROW_BYTES>(kk * 16 + v_key, 2 * dp + v_chunk));
#pragma unroll
        for (int mi = 0; mi < MI; ++mi) {
          mma_16816(o[mi][2 * dp], pf[mi][kk], {vb[0], vb[1]});
          mma_16816(o[mi][2 * dp + 1], pf[mi][kk], {vb[2], vb[3]});
        }
      }
    }
  }
  cp_async_wait<0>();  // only empty groups remain; nothing may be in flight at exit

  // O / l straight from the fragments: lane (g, t) writes columns 2t, 2t + 1 of each n8 tile
  // of rows g and g + 8 as half2 (the quad's four lanes fill 16 contiguous bytes).
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      float l = l_run[mi][hh];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      const float inv = l > 0.f ? 1.f / l : 0.f;
      const int row = row0 + warp_row + mi * 16 + g + 8 * hh;
      if (row < rows) {
        half* dst = O + row_offset(row) + 2 * t;
#pragma unroll
        for (int dt = 0; dt < DT; ++dt)
          *reinterpret_cast<__half2*>(dst + dt * 8) =
              __floats2half2_rn(o[mi][dt][2 * hh] * inv, o[mi][dt][2 * hh + 1] * inv);
      }
    }
}

// One entry point per configuration: flash[_packed]_d<D>_w<WARPS>_m<MI>. MIN_BLOCKS is how many
// blocks per SM the register budget is set for.
#define FLASH_ENTRY(NAME, D, WARPS, MI, PACKED, MIN_BLOCKS)                                      \
  extern "C" __global__ void __launch_bounds__(32 * WARPS, MIN_BLOCKS)                           \
      NAME(const half* __restrict__ Q, const half* __restrict__ K, const half* __restrict__ V,   \
           half* __restrict__ O, int N, int H, int HKV, float scale_log2, int causal) {          \
    flash_forward<D, WARPS, MI, PACKED>(Q, K, V, O, N, H, HKV, scale_log2, causal);             \
  }

FLASH_ENTRY(flash_d64_w4_m2, 64, 4, 2, false, 2)
FLASH_ENTRY(flash_d64_w4_m1, 64, 4, 1, false, 4)
FLASH_ENTRY(flash_d64_w8_m1, 64, 8, 1, false, 2)
FLASH_ENTRY(flash_d128_w4_m1, 128, 4, 1, false, 2)
FLASH_ENTRY(flash_d128_w8_m1, 128, 8, 1, false, 1)
FLASH_ENTRY(flash_packed_d64_w4_m2, 64, 4, 2, true, 2)
FLASH_ENTRY(flash_packed_d64_w4_m1, 64, 4, 1, true, 3)
FLASH_ENTRY(flash_packed_d64_w8_m1, 64, 8, 1, true, 1)
FLASH_ENTRY(flash_packed_d128_w4_m1, 128, 4, 1, true, 2)
FLASH_ENTRY(flash_packed_d128_w8_m1, 128, 8, 1, true, 1)
