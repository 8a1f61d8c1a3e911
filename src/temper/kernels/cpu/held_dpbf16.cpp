// The held-weight decode product on AVX512-BF16 dot products (VDPBF16PS; flags set in CMakeLists.txt): IsaTable::
// held_gemm_nt_bf16 on the AVX-512 table where the CPU has AVX512-BF16 (isa_table.cpp).
#define TEMPER_HELD_NS held_dpbf16
#include "temper/kernels/cpu/held_gemv.inc"
