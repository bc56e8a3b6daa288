/* libtbcrt's cuda device (runtime/cuda/) against the fake libcuda.so.1 of
 * tests/gpu_mock/: what the tests check is in tests/runtime/rt_gpu_mock.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tbc/abi.h"

/* What this device and its mock are called, and what they say. */
#define RT_GPU_CONFIG \
	{ \
		.kind = "cuda", \
		.library = "libcuda.so.1", \
		.mock = "mock_cuda_", \
		.device_name = "Mock H100 0", \
		.features = "sm_90", \
		.version = "CUDA driver 12.4", \
		.extension = "ptx", \
		.target = "sm_80", \
		.table_kind = TBC_ABI_DEVICE_PTX, \
		.alloc_call = "cuMemAlloc_v2", \
		.launch_call = "cuLaunchKernel", \
		.sync_call = "cuStreamSynchronize", \
		.init_call = "cuInit", \
		.oom_name = "CUDA_ERROR_OUT_OF_MEMORY (out of memory)", \
		.not_found_name = "cuModuleGetFunction failed: CUDA_ERROR_NOT_FOUND", \
		.resources_name = "cuLaunchKernel failed: CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", \
		.launch_failed_name = "CUDA_ERROR_LAUNCH_FAILED (unspecified launch failure)", \
		.load_error = "failed to build (cuModuleLoadDataEx failed: CUDA_ERROR_INVALID_PTX (a PTX JIT compilation failed)): " \
		      "ptxas application ptx input, line 3; error   : MOCK_JIT_ERROR is not a PTX instruction", \
		.max_block_z = 64, \
	}
#include "tests/runtime/rt_gpu_mock.h"
