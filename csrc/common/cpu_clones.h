#pragma once

// Hot CPU loops are compiled twice, for AVX2 and for the baseline ISA, and the right one is picked
// when the library loads (GCC / clang target_clones: an ifunc), so a wheel built anywhere runs
// everywhere and still uses 256-bit vectors where they exist. Only "avx2": adding "fma" would let
// the compiler contract a * b + c, and results would then differ between machines.

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDACC__)
#define TORCH_RAGGED_CPU_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define TORCH_RAGGED_CPU_CLONES
#endif
