// The training attention's tile products compiled for avx512 (flags set in CMakeLists.txt).
#define TEMPER_ATTN_NS attn_avx512
#define TEMPER_ATTN_ISA "avx512"  // IsaTable::attn_kernel
#include "temper/kernels/cpu/attention_tiles.inc"
