/* JIT embedding: an application compiles an ONNX model in process with the
 * compiler library (LLVM ORC underneath, no files written) and runs it with
 * the runtime.
 *
 *   usage: jit MODEL.onnx INPUT.npy
 *
 * Prints each output's name, shape and first values, and the largest
 * difference from the reference interpreter. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tbc/runtime.h"
#include "tbc/tbc.h"

static void print_diags(tbc_diags *d) {
	for (size_t i = 0; i < tbc_diags_count(d); i++) {
		char buf[1024];
		tbc_diag_format(tbc_diags_get(d, i), buf, sizeof buf);
		fprintf(stderr, "jit: %s\n", buf);
	}
}

int main(int argc, char **argv) {
	if (argc != 3) {
		fprintf(stderr, "usage: jit MODEL.onnx INPUT.npy\n");
		return 2;
	}
	tbc_diags *d = tbc_diags_create();
	tbc_module *m = NULL;
	tbc_jit *jit = NULL;
	tbc_tensor *input = NULL, *reference = NULL;
	tbcrt_context *ctx = NULL;
	tbcrt_model *model = NULL;
	tbcrt_session *session = NULL;
	int rc = 1;
	tbc_compile_options o;
	tbc_compile_options_init(&o);
	if (tbc_module_load_onnx(argv[1], d, &m) != TBC_OK || tbc_tensor_read_file(argv[2], d, &input, NULL) != TBC_OK ||
	    tbc_module_input_count(m) != 1 || tbc_jit_compile(m, &o, d, &jit) != TBC_OK) {
		print_diags(d);
		goto done;
	}
	tbcrt_context_options co;
	tbcrt_context_options_init(&co);
	tbcrt_status st = tbcrt_context_create(&co, &ctx);
	if (tbcrt_status_is_ok(&st)) st = tbcrt_model_from_descriptor(ctx, tbc_jit_descriptor(jit), NULL, &model);
	if (tbcrt_status_is_ok(&st)) st = tbcrt_session_create(model, &session);
	if (tbcrt_status_is_ok(&st))
		st = tbcrt_session_bind_input(session, 0, (int32_t)input->dtype, (uint32_t)input->rank, input->dims,
					      input->data, (size_t)input->numel * tbc_dtype_size(input->dtype));
	if (tbcrt_status_is_ok(&st)) st = tbcrt_session_run(session);
	tbcrt_tensor out;
	if (tbcrt_status_is_ok(&st)) st = tbcrt_session_output(session, 0, &out);
	if (!tbcrt_status_is_ok(&st)) {
		fprintf(stderr, "jit: %s (%s)\n", st.message, tbcrt_code_name(st.code));
		goto done;
	}
	if (out.dtype != TBC_DT_F32 || tbc_module_output_count(m) < 1 ||
	    tbc_interpret(m, &input, 1, &reference, 1, d) != TBC_OK) {
		print_diags(d);
		goto done;
	}
	const float *got = out.data, *want = reference->data;
	double worst = 0;
	for (int64_t i = 0; i < reference->numel; i++) worst = fmax(worst, fabs((double)got[i] - want[i]));
	printf("%s: [", tbc_module_output_name(m, 0));
	for (uint32_t i = 0; i < out.rank; i++) printf("%s%lld", i ? ", " : "", (long long)out.dims[i]);
	printf("], first values");
	for (int64_t i = 0; i < reference->numel && i < 4; i++) printf(" %.5f", got[i]);
	printf("; max |jit - interpreter| = %.3g\n", worst);
	rc = worst <= 1e-4 ? 0 : 1;
done:
	tbcrt_session_destroy(session);
	tbcrt_model_destroy(model);
	tbcrt_context_destroy(ctx);
	tbc_jit_destroy(jit);
	tbc_tensor_destroy(input);
	tbc_tensor_destroy(reference);
	tbc_module_destroy(m);
	tbc_diags_destroy(d);
	return rc;
}
