// The training attention's tile products compiled for scalar (flags set in CMakeLists.txt).
#define TEMPER_ATTN_NS attn_scalar
#define TEMPER_ATTN_ISA "scalar"  // IsaTable::attn_kernel
#define TEMPER_ATTN_SUM double  // no FMA here: f32 products summed in double (attention_tiles.inc)
#include "temper/kernels/cpu/attention_tiles.inc"
