/* A whole program for OpenCL: the kernels printed into one OpenCL C source,
 * and the device program table (include/tbc/abi.h, device_code) the runtime
 * walks to run it: buffers, kernels, launches and control markers. */
#ifndef TBC_CODEGEN_OPENCL_PROGRAM_H
#define TBC_CODEGEN_OPENCL_PROGRAM_H

#include <stddef.h>

#include "codegen/host/program.h"

/* What tbc_ocl_program makes; free with tbc_ocl_program_free. */
typedef struct tbc_ocl_program {
	char *source;   /* a header comment naming the model, the preamble, one __kernel per kernel */
	void *table;    /* the device program table, holding source */
	size_t table_size;
} tbc_ocl_program;

/* Prints every kernel of p (each once, named after the lowering's kernel and
 * the ONNX node it came from: op_names[launch.op_pos], n_ops of them, may be
 * NULL) and lays out the table.  The same program gives the same bytes. */
bool tbc_ocl_program_make(const kir_program *p, const char *model_name, const char *const *op_names, int n_ops,
			  tbc_ocl_program *out, tbc_diags *d);
void tbc_ocl_program_free(tbc_ocl_program *o);

#endif
