// The held-weight decode kernels compiled for scalar (flags set in CMakeLists.txt).
#define TEMPER_HELD_NS held_scalar
#include "temper/kernels/cpu/held_gemv.inc"
