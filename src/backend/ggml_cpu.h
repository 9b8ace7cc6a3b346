#pragma once
// What llama.cpp's CPU backend offers, asked through ggml's registry: its feature list
// (where graft's ggml-patch/ reports MULTIROW) and its repacking buffer type. Used by the
// backend, the multi-row kernel test and bench/multirow_bench.
#include <ggml-backend.h>

#include <cstring>
#include <string>

namespace graft {

// The value the CPU backend gives feature `name` ("" when it has none).
inline std::string CpuBackendFeature(const char* name) {
  ggml_backend_reg_t reg = ggml_backend_reg_by_name("CPU");
  auto get = reg == nullptr ? nullptr
                            : reinterpret_cast<ggml_backend_get_features_t>(
                                  ggml_backend_reg_get_proc_address(reg, "ggml_backend_get_features"));
  if (get == nullptr) return "";
  for (ggml_backend_feature* f = get(reg); f->name != nullptr; ++f) {
    if (std::strcmp(f->name, name) == 0) return f->value;
  }
  return "";
}

// The buffer type in which weights are repacked for the CPU kernels at load, as llama.cpp
// loads models (nullptr when the CPU backend has none).
inline ggml_backend_buffer_type_t CpuRepackBufferType() {
  ggml_backend_dev_t dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
  if (dev == nullptr) return nullptr;
  auto get = reinterpret_cast<ggml_backend_dev_get_extra_bufts_t>(
      ggml_backend_reg_get_proc_address(ggml_backend_dev_backend_reg(dev), "ggml_backend_dev_get_extra_bufts"));
  for (ggml_backend_buffer_type_t* b = get != nullptr ? get(dev) : nullptr; b != nullptr && *b != nullptr; ++b) {
    if (std::strcmp(ggml_backend_buft_name(*b), "CPU_REPACK") == 0) return *b;
  }
  return nullptr;
}

}  // namespace graft
