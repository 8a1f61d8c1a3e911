// The training attention's tile products compiled for avx512 (flags set in CMakeLists.txt).
#define TEMPER_ATTN_NS attn_avx512
#include "temper/kernels/cpu/attention_tiles.inc"
