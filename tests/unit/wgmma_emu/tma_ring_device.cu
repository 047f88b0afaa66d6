/* tma_ring_device.cu — tma_ring.cu for the device: the sm_90a compile check of cuda_tma.h
 * (ctest compile_tma_ring_sm_90a, nvcc -cubin, no GPU needed), with the CUDA preamble
 * (templates/common/cuda.h) given by -include. */
#include "templates/common/cuda_async.h"
#include "templates/common/cuda_f16.h"
#include "templates/common/cuda_wgmma.h"
#include "templates/common/cuda_tma.h"
#include "tests/unit/wgmma_emu/tma_ring.cu"
