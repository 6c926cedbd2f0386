// Fast division by a divisor known only at run time. Part of ladder/core/cuda (see memory.cuh).
#ifndef LADDER_CUDA_FASTDIV_CUH
#define LADDER_CUDA_FASTDIV_CUH

// n / d for 0 <= n < 2^31 with one multiply-high instead of a division: the GPU has no integer
// divider, and a run-time `n / d` compiles to about 25 instructions through a float reciprocal.
// The launcher computes (magic, shift) for each divisor (ladder/conv/tc/plan.py, fast_division):
// with l = ceil(log2 d), magic = ceil(2^(32 + l) / d) - 2^32 and shift = l, and
// n / d = (umulhi(n, magic) + n) >> l (Granlund and Montgomery's 33-bit multiplier, exact for
// every n < 2^32 because magic d + 2^32 d - 2^(32 + l) < d <= 2^l; the sum stays below 2^32 for
// n < 2^31). d = 1 needs no special case: magic = 0, shift = 0. As kernel parameters they stay
// in the constant bank: no registers.
__device__ __forceinline__ int fast_div(int n, unsigned magic, int shift) {
  return (int)((__umulhi((unsigned)n, magic) + (unsigned)n) >> shift);
}

#endif  // LADDER_CUDA_FASTDIV_CUH
