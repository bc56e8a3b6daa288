/* Embedding a compiled model: a C program built with plain cc against the
 * object `tbc compile MODEL -o model.o --prefix model` wrote, its header, and
 * the runtime (libtbcrt).  No LLVM, no compiler library.
 *
 *   tbc compile examples/models/tiny_cnn.onnx -o model.o --prefix model
 *   cc -I include -I . examples/embed/main.c model.o libtbcrt.a -lm -lpthread -ldl -o embed
 *   ./embed
 *
 * It feeds a batch of two deterministic images and prints each image's most
 * likely class and the sum of its probabilities (1 for a softmax). */
#include <stdio.h>
#include <stdlib.h>

#include "model.h"
#include "tbc/runtime.h"

static int check(tbcrt_status st, const char *what) {
	if (tbcrt_status_is_ok(&st)) return 0;
	fprintf(stderr, "embed: %s: %s (%s)\n", what, st.message, tbcrt_code_name(st.code));
	return 1;
}

int main(void) {
	enum { BATCH = 2, C = 3, H = 32, W = 32, CLASSES = 10 };
	static float image[BATCH * C * H * W];
	for (int i = 0; i < BATCH * C * H * W; i++) image[i] = (float)((i * 7919) % 1000) / 1000.0f;
	int64_t dims[4] = {BATCH, C, H, W};

	tbcrt_context *ctx = NULL;
	tbcrt_model *model = NULL;
	tbcrt_session *session = NULL;
	tbcrt_context_options options;
	tbcrt_context_options_init(&options);
	int rc = check(tbcrt_context_create(&options, &ctx), "context");
	if (!rc) rc = check(tbcrt_model_from_descriptor(ctx, model_descriptor(), ".", &model), "model");
	if (!rc) rc = check(tbcrt_session_create(model, &session), "session");
	if (!rc)
		rc = check(tbcrt_session_bind_input(session, 0, MODEL_INPUT0_DTYPE, MODEL_INPUT0_RANK, dims, image,
						    sizeof image),
			   "input " MODEL_INPUT0_NAME);
	if (!rc) rc = check(tbcrt_session_run(session), "run");
	tbcrt_tensor out;
	if (!rc) rc = check(tbcrt_session_output(session, 0, &out), "output " MODEL_OUTPUT0_NAME);
	if (!rc) {
		const float *p = out.data;
		for (int b = 0; b < BATCH; b++) {
			int best = 0;
			float sum = 0;
			for (int k = 0; k < CLASSES; k++) {
				sum += p[b * CLASSES + k];
				if (p[b * CLASSES + k] > p[b * CLASSES + best]) best = k;
			}
			printf("image %d: class %d (p=%.4f), probabilities sum to %.4f\n", b, best, p[b * CLASSES + best],
			       sum);
			if (sum < 0.999f || sum > 1.001f) rc = 1;
		}
	}
	tbcrt_session_destroy(session);
	tbcrt_model_destroy(model);
	tbcrt_context_destroy(ctx);
	return rc;
}
