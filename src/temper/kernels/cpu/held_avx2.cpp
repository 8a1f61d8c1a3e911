// The held-weight decode kernels compiled for avx2 (flags set in CMakeLists.txt).
#define TEMPER_HELD_NS held_avx2
#include "temper/kernels/cpu/held_gemv.inc"
