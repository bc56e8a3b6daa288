/* libtbcrt's hip device (runtime/hip/) against the fake libamdhip64.so of
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
		.kind = "hip", \
		.library = "libamdhip64.so", \
		.mock = "mock_hip_", \
		.device_name = "Mock MI300X 0", \
		.features = "cc 9.4", \
		.version = "HIP driver 60241 (libamdhip64.so)", \
		.extension = "hsaco", \
		.target = "gfx942", \
		.table_kind = TBC_ABI_DEVICE_AMDGPU_ELF, \
		.alloc_call = "hipMalloc", \
		.launch_call = "hipModuleLaunchKernel", \
		.sync_call = "hipStreamSynchronize", \
		.init_call = "hipInit", \
		.oom_name = "hipErrorOutOfMemory (out of memory)", \
		.not_found_name = "hipModuleGetFunction failed: hipErrorNotFound", \
		.resources_name = "hipModuleLaunchKernel failed: hipErrorLaunchOutOfResources", \
		.launch_failed_name = "hipErrorLaunchFailure (unspecified launch failure)", \
		.load_error = "(for gfx942) failed to load: hipModuleLoadData failed: hipErrorInvalidKernelFile", \
		.max_block_z = 1024, \
	}
#include "tests/runtime/rt_gpu_mock.h"
