// CHECK(call): a CUDA runtime call whose failure ends the microbenchmark with the call and the error's text.
#pragma once
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CHECK(x)                                                        \
  do {                                                                  \
    cudaError_t err_ = (x);                                             \
    if (err_ != cudaSuccess) {                                          \
      std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(err_));  \
      std::exit(1);                                                     \
    }                                                                   \
  } while (0)
