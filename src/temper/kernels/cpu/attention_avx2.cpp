// The training attention's tile products compiled for avx2 (flags set in CMakeLists.txt).
#define TEMPER_ATTN_NS attn_avx2
#define TEMPER_ATTN_ISA "avx2"  // IsaTable::attn_kernel
#include "temper/kernels/cpu/attention_tiles.inc"
