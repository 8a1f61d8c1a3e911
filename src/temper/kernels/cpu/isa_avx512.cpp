// The per-ISA kernels compiled for avx512 (flags set in CMakeLists.txt).
#define TEMPER_ISA_NS isa_avx512
#include "temper/kernels/cpu/isa_kernels.inc"
