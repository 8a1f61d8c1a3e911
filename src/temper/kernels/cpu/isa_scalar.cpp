// The per-ISA kernels compiled for scalar (flags set in CMakeLists.txt).
#define TEMPER_ISA_NS isa_scalar
#include "temper/kernels/cpu/isa_kernels.inc"
