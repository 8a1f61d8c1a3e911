// The per-ISA kernels compiled for avx2 (flags set in CMakeLists.txt).
#define TEMPER_ISA_NS isa_avx2
#include "temper/kernels/cpu/isa_kernels.inc"
