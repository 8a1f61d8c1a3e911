// How the DiT's row kernels (layer norm, adaLN, gated residuals, bias sums) vectorise: each range function is
// compiled for AVX-512 (x86-64-v4) and for baseline x86-64 (GCC's target_clones; the loader picks by CPUID) and
// its loops are `omp simd` (sums kept in SIMD lanes: other bits than a serial sum, the same for any thread count,
// since a row's sums never leave one call).
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TEMPER_DIT_CLONES __attribute__((target_clones("arch=x86-64-v4", "default")))
#else
#define TEMPER_DIT_CLONES
#endif
