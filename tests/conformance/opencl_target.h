/* The conformance harness's `opencl` target (opencl_target.c). */
#ifndef TBC_TESTS_OPENCL_TARGET_H
#define TBC_TESTS_OPENCL_TARGET_H
#include <stdbool.h>

#include "codegen/kir/kir.h"
#include "tbc/tbc.h"

/* Lowers m, prints its kernels as OpenCL C, runs the program on the first
 * OpenCL device (the signature of tbc_interpret). */
tbc_code tbc_run_opencl(const tbc_module *m, tbc_tensor *const *in, size_t n_in, tbc_tensor **out, size_t n_out,
			tbc_diags *d);

/* Lowers m for tbc_target_desc_opencl_default() (the device's parallel form)
 * and runs the program with the kernel IR evaluator, independent loops
 * backwards: the device's kernels checked without a device, in seconds for
 * the whole suite. */
tbc_code tbc_run_device_eval(const tbc_module *m, tbc_tensor *const *in, size_t n_in, tbc_tensor **out, size_t n_out,
			     tbc_diags *d);

/* Whether an OpenCL platform is installed. */
bool tbc_ocl_available(void);
/* Prints k alone, builds it for the first OpenCL device (with
 * build_options after -cl-std=CL1.2 when not NULL: -DTBC_NO_FP64 takes the
 * preamble's path for devices without fp64) and runs it over host buffers
 * as kir_eval does (buffers copied in, stored ones back). */
bool tbc_ocl_eval_kernel(const kir_kernel *k, void *const *buffers, const int64_t *sizes, const char *build_options,
			 tbc_diags *d);
#endif
