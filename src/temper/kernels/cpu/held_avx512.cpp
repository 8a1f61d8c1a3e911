// The held-weight decode kernels compiled for avx512 (flags set in CMakeLists.txt).
#define TEMPER_HELD_NS held_avx512
#include "temper/kernels/cpu/held_gemv.inc"
