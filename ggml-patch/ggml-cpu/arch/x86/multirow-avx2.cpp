// The avx2 variant of the multi-row kernels: CMakeLists.txt gives this file its
// instruction-set flags; multirow.cpp calls it only on a CPU that has them.
#define MULTIROW_ISA avx2
#include "multirow-kernels.inc"
