/* The OpenCL C printer: kernel IR -> OpenCL C 1.2 source, one __kernel per
 * kernel.  docs/opencl.md says how loops map to work-items and how values
 * are represented. */
#ifndef TBC_CODEGEN_OPENCL_C_H
#define TBC_CODEGEN_OPENCL_C_H

#include <stdbool.h>

#include "codegen/device/device_program.h"
#include "codegen/kir/kir.h"

typedef struct tbc_ocl_kernel {
	char *source; /* malloc'd: the __kernel function (the preamble apart) */
	/* How it is launched (codegen/device/device_program.h).  Arguments: the
	 * kernel's buffers in order, then its sizes (long), then `status`
	 * (__global int *) when the kernel can fail: status[0] becomes the
	 * 1-based number of the first failed check. */
	tbc_dev_plan plan;
} tbc_ocl_kernel;

/* The definitions every printed kernel needs (codegen/opencl/preamble.cl). */
const char *tbc_ocl_preamble(void);

/* Prints k, launched as plan says, as a __kernel named fn_name (a C
 * identifier) into *out_source (malloc'd).  False, with a message in d, for
 * a construct OpenCL C 1.2 cannot express. */
bool tbc_ocl_print_planned(const kir_kernel *k, const char *fn_name, const tbc_dev_plan *plan, char **out_source,
			   tbc_diags *d);
/* Plans and prints k as a __kernel named fn_name (a C identifier).  False, with a
 * message in d, for a construct OpenCL C 1.2 cannot express. */
bool tbc_ocl_print_kernel(const kir_kernel *k, const char *fn_name, tbc_ocl_kernel *out, tbc_diags *d);
void tbc_ocl_kernel_free(tbc_ocl_kernel *k);

#endif
