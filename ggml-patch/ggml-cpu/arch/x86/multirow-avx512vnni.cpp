// The avx512vnni variant of the multi-row kernels: CMakeLists.txt gives this file its
// instruction-set flags; multirow.cpp calls it only on a CPU that has them.
#define MULTIROW_ISA avx512vnni
#include "multirow-kernels.inc"
