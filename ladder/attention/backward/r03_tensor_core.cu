// Rung 3 of the attention backward: dQ, dK, dV on the tensor cores, mma.sync + ldmatrix.
// Half Q, O, dO (B, H, N, D), K and V (B, HKV, N, D); float lse (B, H, N), natural log; the
// gradients G (B, H + 2 HKV, N, D), heads [dQ | dK | dV]. FP32 accumulation throughout. The
// launcher passes D in {64, 128} (other head dimensions zero-padded) and 16-byte aligned
// pointers; N is any length (edges are masked). After delta.cu's D_i = Σ_c dO_ic O_ic, two
// kernels, as rung 2:
//
//   dkdv:   a block owns 64 keys of one K/V head (warp w: keys 16w ... 16w + 15) and walks the
//           query tiles of every query head of its group. Per tile, all in the warp's registers:
//             Sᵀ  = K Qᵀ     A = K rows (ldmatrix),  B = Qᵀ "col": Q rows, plain ldmatrix
//             dPᵀ = V dOᵀ    A = V rows,             B = dO rows, plain ldmatrix
//             Pᵀ  = exp2(Sᵀ scale log2 e - lse_j log2 e);  dSᵀ = Pᵀ ∘ (dPᵀ - D_j)
//             dV += Pᵀ dO    A = Pᵀ from the accumulators, B = dO "row": ldmatrix.trans
//             dK += dSᵀ Q    A = dSᵀ from the accumulators, B = Q "row": ldmatrix.trans
//           Computing the transposes directly (keys as the M dimension) makes Pᵀ and dSᵀ the
//           A operands of the next products in the accumulator layout, as P is in the forward
//           (two adjacent n8 tiles of C are one k16 A fragment): nothing goes through shared
//           memory but the four operand tiles. The row statistics lse and D belong to the
//           columns (queries) here, so they are read from shared memory per element.
//   dq:     a block owns 64 query rows of one head (warp w: 16 rows) and walks the key tiles:
//             S = Q Kᵀ, dP = dO Vᵀ (plain ldmatrix of K and V rows), P and dS in registers
//             (lse and D per row, in registers), dQ += dS K (B = K "row": ldmatrix.trans).
//           S and dP are computed twice, once per kernel (7 products where 5 are counted): the
//           price of writing every gradient once, with no atomics (FlashAttention-2 instead
//           adds dQ with atomics from the dkdv loop).
//
// Fragments (mma.m16n8k16, g = lane / 4, t = lane % 4) and the swizzle are swizzled_rows.cuh's. No
// pipelining: each tile is copied by cp.async, waited for, and used (the next rung's lesson).
// Causal (key j seen by query i when j <= i): a dkdv block starts at the query tile holding
// its first key; a dq block stops at the key tile holding its last query and runs longest first.
// Keys past N need no mask in the key kernel: their K and V rows are zero-filled, and what
// they produce lands only in dK and dV rows past N, which are never stored.
#include <cuda_fp16.h>

#include "ladder/core/cuda/convert.cuh"      // pack2
#include "ladder/core/cuda/cp_async.cuh"     // cp_async16, commit, wait
#include "ladder/core/cuda/ldmatrix.cuh"     // ldmatrix_x4, ldmatrix_x4_trans
#include "ladder/core/cuda/mma_sync.cuh"     // mma_16816: its fragment layout is written there

#include "../swizzled_rows.cuh"  // the swizzle of forward rung 5

constexpr int WARPS = 4, THREADS = 32 * WARPS;
constexpr int BLOCK_ROWS = 16 * WARPS;  // keys of a dkdv block, queries of a dq block
constexpr float LOG2E_F = 1.4426950408889634f;

// Rows [row0, row0 + ROWS) of a (N, D) half matrix into a swizzled shared tile; rows past N are
// zero-filled. Thread tid copies chunk tid % CHUNKS of rows tid / CHUNKS + i * PASS.
template <int D, int ROWS>
__device__ __forceinline__ void load_tile(unsigned tile, const half* head, int row0, int N) {
  constexpr int CHUNKS = D / 8, PASS = THREADS / CHUNKS;
  static_assert(ROWS % PASS == 0, "copy mapping");
  const int r0 = threadIdx.x / CHUNKS, chunk = threadIdx.x % CHUNKS;
#pragma unroll
  for (int i = 0; i < ROWS / PASS; ++i) {
    const int r = r0 + i * PASS;
    const bool valid = row0 + r < N;
    const half* src = head + (size_t)(valid ? row0 + r : 0) * D + chunk * 8;
    cp_async16(tile + swizzle<D * 2>(r, chunk), src, valid);
  }
}

// acc[NT][4] += A Bᵀ for this warp: A = 16 rows at a_row of tile a, B = NT * 8 rows of tile b
// (both D wide). Plain ldmatrix: lane l addresses row 8 (l / 16) + l % 8 of a 16-row pair of n8
// tiles at chunk 2 ks + (l / 8) % 2, giving b0, b1 of the two tiles.
template <int D, int NT>
__device__ __forceinline__ void mma_abt(float (&acc)[NT][4], unsigned a, int a_row, unsigned b) {
  const int lane = threadIdx.x % 32;
  const int b_row = (lane / 16) * 8 + lane % 8, b_chunk = (lane / 8) % 2;
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks) {
    unsigned af[4];
    ldmatrix_x4(af, a + swizzle<D * 2>(a_row + lane % 16, 2 * ks + lane / 16));
#pragma unroll
    for (int p = 0; p < NT / 2; ++p) {
      unsigned bf[4];
      ldmatrix_x4(bf, b + swizzle<D * 2>(p * 16 + b_row, 2 * ks + b_chunk));
      mma_16816(acc[2 * p], af, {bf[0], bf[1]});
      mma_16816(acc[2 * p + 1], af, {bf[2], bf[3]});
    }
  }
}

// acc[D / 8][4] += X B for this warp: X = 16 x (NT * 8) in the accumulator layout (FP32,
// rounded to half here), B = NT * 8 rows of tile b, D wide ("row": ldmatrix.trans, lane l
// addresses row 16 kk + l % 16 at chunk 2 dp + l / 16).
template <int D, int NT>
__device__ __forceinline__ void mma_xb(float (&acc)[D / 8][4], const float (&x)[NT][4],
                                       unsigned b) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int kk = 0; kk < NT / 2; ++kk) {
    const unsigned xf[4] = {pack2<half>(x[2 * kk][0], x[2 * kk][1]),
                            pack2<half>(x[2 * kk][2], x[2 * kk][3]),
                            pack2<half>(x[2 * kk + 1][0], x[2 * kk + 1][1]),
                            pack2<half>(x[2 * kk + 1][2], x[2 * kk + 1][3])};
#pragma unroll
    for (int dp = 0; dp < D / 16; ++dp) {
      unsigned bf[4];
      ldmatrix_x4_trans(bf, b + swizzle<D * 2>(kk * 16 + lane % 16, 2 * dp + lane / 16));
      mma_16816(acc[2 * dp], xf, {bf[0], bf[1]});
      mma_16816(acc[2 * dp + 1], xf, {bf[2], bf[3]});
    }
  }
}

// Rows g and g + 8 of this warp's 16 x D accumulators, times `scale`, as half2 into rows
// first_row + (g, g + 8) of `dst` (row stride D) where they are below `rows`.
template <int D>
__device__ __forceinline__ void store_rows(half* dst, const float (&acc)[D / 8][4],
                                           int first_row, int rows, float scale) {
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const int row = first_row + g + 8 * hh;
    if (row < rows) {
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt)
        *reinterpret_cast<__half2*>(dst + (size_t)row * D + dt * 8 + 2 * t) =
            __floats2half2_rn(acc[dt][2 * hh] * scale, acc[dt][2 * hh + 1] * scale);
    }
  }
}

// BQ queries per tile: 64 at D = 64, 32 at D = 128 (dK and dV hold 2 x D / 2 floats per lane).
template <int D, int BQ>
__device__ __forceinline__ void dkdv(const half* __restrict__ Q, const half* __restrict__ K,
                                     const half* __restrict__ V, const half* __restrict__ dO,
                                     const float* __restrict__ lse,
                                     const float* __restrict__ delta, half* __restrict__ G, int N,
                                     int H, int HKV, float scale, int causal) {
  constexpr int ROW_BYTES = D * 2, NT = BQ / 8, DT = D / 8;
  extern __shared__ __align__(128) unsigned char smem[];
  const unsigned s_k = (unsigned)__cvta_generic_to_shared(smem);
  const unsigned s_v = s_k + BLOCK_ROWS * ROW_BYTES, s_q = s_v + BLOCK_ROWS * ROW_BYTES;
  const unsigned s_do = s_q + BQ * ROW_BYTES;
  float* s_lse = reinterpret_cast<float*>(smem + 2 * (BLOCK_ROWS + BQ) * ROW_BYTES);
  float* s_delta = s_lse + BQ;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int b = blockIdx.z, kv = blockIdx.y, key0 = blockIdx.x * BLOCK_ROWS;
  const int group = H / HKV;
  const float scale_log2 = scale * LOG2E_F;

  load_tile<D, BLOCK_ROWS>(s_k, K + ((size_t)b * HKV + kv) * N * D, key0, N);
  load_tile<D, BLOCK_ROWS>(s_v, V + ((size_t)b * HKV + kv) * N * D, key0, N);
  cp_async_commit();

  float dk[DT][4] = {}, dv[DT][4] = {};
  const int key_g = key0 + warp * 16 + g;  // this lane's keys: key_g and key_g + 8
  for (int h = kv * group; h < (kv + 1) * group; ++h) {
    const size_t head = ((size_t)b * H + h) * N;
    for (int q0 = causal ? key0 / BQ * BQ : 0; q0 < N; q0 += BQ) {
      __syncthreads();  // every warp is done with the previous tile
      load_tile<D, BQ>(s_q, Q + head * D, q0, N);
      load_tile<D, BQ>(s_do, dO + head * D, q0, N);
      cp_async_commit();
      for (int i = threadIdx.x; i < BQ; i += THREADS) {
        const bool valid = q0 + i < N;
        s_lse[i] = valid ? lse[head + q0 + i] * LOG2E_F : 0.f;
        s_delta[i] = valid ? delta[head + q0 + i] : 0.f;
      }
      cp_async_wait<0>();
      __syncthreads();

      float s[NT][4] = {}, dp[NT][4] = {};
      mma_abt<D, NT>(s, s_k, warp * 16, s_q);    // Sᵀ = K Qᵀ
      mma_abt<D, NT>(dp, s_v, warp * 16, s_do);  // dPᵀ = V dOᵀ
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int col = nt * 8 + 2 * t + (e & 1), query = q0 + col;
          const int key = key_g + 8 * (e / 2);
          float p = exp2f(fmaf(s[nt][e], scale_log2, -s_lse[col]));
          if (query >= N || (causal && key > query)) p = 0.f;  // keys past N need no mask (header)
          s[nt][e] = p;                             // Pᵀ
          dp[nt][e] = p * (dp[nt][e] - s_delta[col]);  // dSᵀ
        }
      mma_xb<D, NT>(dv, s, s_do);  // dV += Pᵀ dO
      mma_xb<D, NT>(dk, dp, s_q);  // dK += dSᵀ Q
    }
  }
  cp_async_wait<0>();  // a block whose loop ran no tile still has its K and V copies in flight
  const size_t grads = (size_t)b * (H + 2 * HKV);
  store_rows<D>(G + (grads + H + kv) * N * D, dk, key0 + warp * 16, N, scale);
  store_rows<D>(G + (grads + H + HKV + kv) * N * D, dv, key0 + warp * 16, N, 1.f);
}

// BK keys per tile (64).
template <int D, int BK>
__device__ __forceinline__ void dq(const half* __restrict__ Q, const half* __restrict__ K,
                                   const half* __restrict__ V, const half* __restrict__ dO,
                                   const float* __restrict__ lse, const float* __restrict__ delta,
                                   half* __restrict__ G, int N, int H, int HKV, float scale,
                                   int causal) {
  constexpr int ROW_BYTES = D * 2, NT = BK / 8, DT = D / 8;
  extern __shared__ __align__(128) unsigned char smem[];
  const unsigned s_q = (unsigned)__cvta_generic_to_shared(smem);
  const unsigned s_do = s_q + BLOCK_ROWS * ROW_BYTES, s_k = s_do + BLOCK_ROWS * ROW_BYTES;
  const unsigned s_v = s_k + BK * ROW_BYTES;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int b = blockIdx.z, h = blockIdx.y, kv = h / (H / HKV);
  const int tile = causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;  // causal: longest first
  const int q0 = tile * BLOCK_ROWS;
  const size_t head = ((size_t)b * H + h) * N;
  const half* k_head = K + ((size_t)b * HKV + kv) * N * D;
  const half* v_head = V + ((size_t)b * HKV + kv) * N * D;
  const float scale_log2 = scale * LOG2E_F;

  load_tile<D, BLOCK_ROWS>(s_q, Q + head * D, q0, N);
  load_tile<D, BLOCK_ROWS>(s_do, dO + head * D, q0, N);
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

  float acc[DT][4] = {};
  const int kv_len = causal ? min(N, q0 + BLOCK_ROWS) : N;
  for (int k0 = 0; k0 < kv_len; k0 += BK) {
    __syncthreads();  // every warp is done with the previous K and V tiles
    load_tile<D, BK>(s_k, k_head, k0, N);
    load_tile<D, BK>(s_v, v_head, k0, N);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();

    float s[NT][4] = {}, dp[NT][4] = {};
    mma_abt<D, NT>(s, s_q, warp * 16, s_k);    // S = Q Kᵀ
    mma_abt<D, NT>(dp, s_do, warp * 16, s_v);  // dP = dO Vᵀ
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = k0 + nt * 8 + 2 * t + (e & 1), hh = e / 2;
        float p = exp2f(fmaf(s[nt][e], scale_log2, -row_lse[hh]));
        if (key >= N || (causal && key > row[hh])) p = 0.f;
        dp[nt][e] = p * (dp[nt][e] - row_delta[hh]);  // dS
      }
    mma_xb<D, NT>(acc, dp, s_k);  // dQ += dS K
  }
  cp_async_wait<0>();
  store_rows<D>(G + ((size_t)b * (H + 2 * HKV) + h) * N * D, acc, q0 + warp * 16, N, scale);
}

#define BACKWARD_ENTRIES(D, BQ, BK)                                                             \
  extern "C" __global__ void __launch_bounds__(THREADS)                                        \
      backward_dkdv_d##D(const half* __restrict__ Q, const half* __restrict__ K,               \
                         const half* __restrict__ V, const half* __restrict__ dO,              \
                         const float* __restrict__ lse, const float* __restrict__ delta,       \
                         half* __restrict__ G, int N, int H, int HKV, float scale,             \
                         int causal) {                                                         \
    dkdv<D, BQ>(Q, K, V, dO, lse, delta, G, N, H, HKV, scale, causal);                         \
  }                                                                                            \
  extern "C" __global__ void __launch_bounds__(THREADS)                                        \
      backward_dq_d##D(const half* __restrict__ Q, const half* __restrict__ K,                 \
                       const half* __restrict__ V, const half* __restrict__ dO,                \
                       const float* __restrict__ lse, const float* __restrict__ delta,         \
                       half* __restrict__ G, int N, int H, int HKV, float scale, int causal) { \
    dq<D, BK>(Q, K, V, dO, lse, delta, G, N, H, HKV, scale, causal);                           \
  }

BACKWARD_ENTRIES(64, 64, 64)
BACKWARD_ENTRIES(128, 32, 64)
