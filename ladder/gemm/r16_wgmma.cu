// Rung 16: Hopper. wgmma (warpgroup MMA) fed by the bulk tensor copy engine (TMA).
// C = A @ B, A (M x K) and B (K x N) row-major half (or bfloat16), FP32 accumulation, C in
// the inputs' type. Two entry points, wgmma_tma (half) and wgmma_tma_bf16, share one template.
// Build for sm_90a: wgmma and setmaxnreg exist only there. The launcher pads M to a multiple
// of 128, N of 256 and K of 64, and passes two tensor maps made on the host. Two more entry
// points per type read an operand transposed where it lies (wgmma reads 16-bit operands in
// either major order): *_tn, C = A^T B with A given K x M; *_nt, C = A B^T with B given N x K
// (ladder.ops' GEMM backward, dB = A^T dC and dA = dC B^T, with no transposing copy).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

constexpr int BM = 128, BN = 256, BK = 64;  // block tile of C and the K tile of a stage
constexpr int STAGES = 4;                   // 4 x 48 KB of shared memory in flight
constexpr int CONSUMERS = 2;                // math warpgroups, 64 rows of C each
constexpr int THREADS = 128 * (CONSUMERS + 1);  // + one producer warpgroup
constexpr int A_BYTES = BM * BK * 2;        // 16 KB: 128 rows of 128 bytes
constexpr int B_CHUNK = 64;                 // columns of B per copy: 64 halves = 128 bytes
constexpr int B_CHUNK_BYTES = BK * B_CHUNK * 2;  // 8 KB: 64 rows (k) of 128 bytes
constexpr int B_BYTES = BK * BN * 2;        // 32 KB: BN / 64 = 4 chunks
constexpr int STAGE_BYTES = A_BYTES + B_BYTES;  // 48 KB
constexpr int GROUP_M = 8;                  // block-row groups for L2 reuse (see below)
constexpr int A_CHUNK = 64;                 // _tn: rows of A^T (columns of the given A) per copy
constexpr int A_CHUNK_BYTES = BK * A_CHUNK * 2;  // 8 KB: 64 rows (k) of 128 bytes
#ifndef B_LBO
#define B_LBO B_CHUNK_BYTES  // B descriptor: bytes between 64-column chunks
#endif
#ifndef B_SBO
#define B_SBO 1024  // B descriptor: bytes between groups of 8 k-rows
#endif

// The driver's CUtensorMap: 128 opaque bytes, made by cuTensorMapEncodeTiled on the host.
struct alignas(64) TensorMap {
  unsigned long long opaque[16];
};

__device__ static inline unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// ---- mbarriers: a 64-bit word in shared memory that counts arrivals and bytes ----
__device__ static inline void mbar_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count));
}
__device__ static inline void mbar_expect_tx(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
               : "memory");
}
__device__ static inline void mbar_arrive(unsigned bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
__device__ static inline void mbar_wait(unsigned bar, unsigned parity) {
  unsigned done = 0;
  while (!done) {
    asm volatile(
        "{\n .reg .pred p;\n"
        " mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        " selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  }
}

// ---- the bulk tensor copy: one instruction moves a whole 2-D box into shared memory ----
__device__ static inline void tma_load(unsigned dst, const TensorMap* map, unsigned bar, int c0,
                                       int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4}], [%2];" ::"r"(dst),
      "l"(reinterpret_cast<unsigned long long>(map)), "r"(bar), "r"(c0), "r"(c1)
      : "memory");
}

// ---- wgmma ----
// Shared-memory matrix descriptor: start address, leading and stride byte offsets (all >> 4)
// and the swizzle mode (1 = 128-byte swizzle), as the PTX ISA lays them out.
__device__ static inline unsigned long long desc(unsigned addr, unsigned lbo, unsigned sbo) {
  return (unsigned long long)((addr & 0x3FFFF) >> 4) |
         ((unsigned long long)((lbo & 0x3FFFF) >> 4) << 16) |
         ((unsigned long long)((sbo & 0x3FFFF) >> 4) << 32) | (1ull << 62);
}

// D (64 x 256, FP32, 128 registers per thread) += A (64 x 16) * B (16 x 256). The last two
// immediates say each operand's major order: imm-trans-a = TA (0: K-major, as row-major A
// lies; 1: M-major, as A^T lies), imm-trans-b = TB (1: N-major, as row-major B lies; 0:
// K-major, as B^T lies).
template <typename T> struct IsHalf { static constexpr bool value = false; };
template <> struct IsHalf<half> { static constexpr bool value = true; };

template <typename T, int TA, int TB>
__device__ static inline void wgmma_m64n256k16(float* d, unsigned long long da,
                                               unsigned long long db) {
  if constexpr (IsHalf<T>::value) {
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16\n"
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127},\n"
        " %128, %129, 1, 1, 1, %130, %131;\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]),
          "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
          "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]),
          "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
          "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),
          "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]),
          "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]),
          "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]),
          "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
          "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]),
          "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
          "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]),
          "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
          "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]),
          "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
          "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]),
          "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
          "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]),
          "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
          "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]),
          "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
          "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]),
          "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
          "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]),
          "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "l"(da), "l"(db), "n"(TA), "n"(TB));
  } else {
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16\n"
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127},\n"
        " %128, %129, 1, 1, 1, %130, %131;\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]),
          "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
          "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]),
          "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
          "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),
          "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]),
          "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]),
          "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]),
          "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
          "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]),
          "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
          "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]),
          "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
          "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]),
          "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
          "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]),
          "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
          "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]),
          "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
          "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]),
          "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
          "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]),
          "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
          "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]),
          "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "l"(da), "l"(db), "n"(TA), "n"(TB));
  }
}

// two FP32 accumulators -> two adjacent outputs of C (4 bytes)
__device__ static inline void store2(half* p, float a, float b) {
  *reinterpret_cast<__half2*>(p) = __floats2half2_rn(a, b);
}
__device__ static inline void store2(__nv_bfloat16* p, float a, float b) {
  *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(a, b);
}

__device__ static inline void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ static inline void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int N>
__device__ static inline void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

// A_T: A given transposed (K x M, so M-major tiles); B_T: B given transposed (N x K, K-major)
template <typename T, bool A_T, bool B_T>
__device__ __forceinline__ void wgmma_gemm(const TensorMap& tmA, const TensorMap& tmB,
                                           T* __restrict__ C, int M, int N, int K) {
  extern __shared__ unsigned char smem_raw[];
  __shared__ alignas(8) unsigned long long full[STAGES], empty[STAGES];
  // 128-byte swizzled tiles must start on a 1024-byte boundary
  unsigned char* smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  const unsigned smem0 = smem_addr(smem);

  // Grouped order of blocks: GROUP_M block rows are walked column by column, so the blocks
  // resident at one time share a few panels of A and of B in L2.
  const int tiles_m = M / BM, tiles_n = N / BN;
  const int per_group = GROUP_M * tiles_n;
  const int group = blockIdx.x / per_group;
  const int first_m = group * GROUP_M;
  const int rows_in_group = min(tiles_m - first_m, GROUP_M);
  const int in_group = blockIdx.x % per_group;
  const int m0 = (first_m + in_group % rows_in_group) * BM;
  const int n0 = (in_group / rows_in_group) * BN;
  const int k_tiles = K / BK;

  const int wg = threadIdx.x / 128;  // warpgroup 0 produces, 1 .. CONSUMERS compute
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(smem_addr(&full[s]), 1);                // the producer's expect_tx arrival
      mbar_init(smem_addr(&empty[s]), CONSUMERS * 128);  // every consumer thread
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  if (wg == 0) {
    // Producer: one thread issues every copy; the warpgroup gives its registers away.
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
    if (threadIdx.x == 0) {
      for (int kt = 0; kt < k_tiles; ++kt) {
        const int s = kt % STAGES;
        if (kt >= STAGES) mbar_wait(smem_addr(&empty[s]), ((kt / STAGES) + 1) & 1);
        const unsigned bar = smem_addr(&full[s]);
        const unsigned sa = smem0 + s * STAGE_BYTES, sb = sa + A_BYTES;
        mbar_expect_tx(bar, STAGE_BYTES);
        if constexpr (A_T) {  // A^T's tile as 64-column chunks of the given K x M matrix
#pragma unroll
          for (int j = 0; j < BM / A_CHUNK; ++j)
            tma_load(sa + j * A_CHUNK_BYTES, &tmA, bar, m0 + j * A_CHUNK, kt * BK);  // (m, k)
        } else {
          tma_load(sa, &tmA, bar, kt * BK, m0);  // coordinates innermost first: (k, m)
        }
        if constexpr (B_T) {  // B^T's tile: 256 rows (n) of 64 k, as A's tile lies
          tma_load(sb, &tmB, bar, kt * BK, n0);  // (k, n)
        } else {
#pragma unroll
          for (int j = 0; j < BN / B_CHUNK; ++j)
            tma_load(sb + j * B_CHUNK_BYTES, &tmB, bar, n0 + j * B_CHUNK, kt * BK);  // (n, k)
        }
      }
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
    const int c = wg - 1;  // this warpgroup's 64 rows of the block tile
    float d[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) d[i] = 0.0f;
    for (int kt = 0; kt < k_tiles; ++kt) {
      const int s = kt % STAGES;
      mbar_wait(smem_addr(&full[s]), (kt / STAGES) & 1);
      // this warpgroup's 64 rows of A: 64 rows of 128 bytes, or (A_T) one 8 KB chunk
      static_assert(64 * 128 == A_CHUNK_BYTES, "a consumer's part of A is 8 KB either way");
      const unsigned sa = smem0 + s * STAGE_BYTES + c * 64 * 128, sb = smem0 + s * STAGE_BYTES + A_BYTES;
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < BK / 16; ++kk) {
        // A: K-major, 128-byte rows, 8-row swizzle atoms 1024 bytes apart (SBO); a k16 step
        // is 32 bytes along the row. B: N-major chunks of 64 columns, BK * 128 bytes apart
        // (LBO), 8 k-rows per atom, atoms 1024 bytes apart (SBO); a k16 step is 16 rows.
        // Transposed operands swap the two layouts: A^T's chunk is laid out as B's chunks
        // are (a k16 step is 16 rows), B^T's tile as A's (a k16 step is 32 bytes).
        const unsigned long long da = A_T ? desc(sa + kk * 16 * 128, A_CHUNK_BYTES, 1024)
                                          : desc(sa + kk * 32, 16, 1024);
        const unsigned long long db = B_T ? desc(sb + kk * 32, 16, 1024)
                                          : desc(sb + kk * 16 * 128, B_LBO, B_SBO);
        wgmma_m64n256k16<T, A_T ? 1 : 0, B_T ? 0 : 1>(d, da, db);
      }
      wgmma_commit();
      wgmma_wait<1>();  // the previous tile's MMAs are done: release its stage
      if (kt > 0) mbar_arrive(smem_addr(&empty[(kt - 1) % STAGES]));
    }
    wgmma_wait<0>();
#pragma unroll
    for (int i = 0; i < 128; ++i) asm volatile("" : "+f"(d[i])::"memory");

    // Accumulator layout of m64nNk16: warp w of the warpgroup holds rows 16w .. 16w + 15;
    // d[4j .. 4j + 3] are columns 8j + 2(lane % 4) + {0, 1} of rows lane / 4 and lane / 4 + 8.
    const int warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32;
    const int row = m0 + c * 64 + warp * 16 + lane / 4;
    T* c0 = C + (size_t)row * N + n0 + (lane % 4) * 2;
    T* c8 = c0 + (size_t)8 * N;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
      store2(c0 + j * 8, d[4 * j], d[4 * j + 1]);
      store2(c8 + j * 8, d[4 * j + 2], d[4 * j + 3]);
    }
  }
}

#define ENTRY(name, T, A_T, B_T)                                                            \
  extern "C" __global__ void __launch_bounds__(THREADS, 1)                                  \
  name(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,        \
       T* __restrict__ C, int M, int N, int K) {                                            \
    wgmma_gemm<T, A_T, B_T>(tmA, tmB, C, M, N, K);                                          \
  }

ENTRY(wgmma_tma, half, false, false)
ENTRY(wgmma_tma_bf16, __nv_bfloat16, false, false)
ENTRY(wgmma_tma_tn, half, true, false)
ENTRY(wgmma_tma_tn_bf16, __nv_bfloat16, true, false)
ENTRY(wgmma_tma_nt, half, false, true)
ENTRY(wgmma_tma_nt_bf16, __nv_bfloat16, false, true)
