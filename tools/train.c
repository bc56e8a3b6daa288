/* `tbc train STEP.so --input NAME=FILE ... [--steps N] [--save DIR]
 * [--export OUT.onnx --model MODEL.onnx] [--device DEVICE]`: runs training
 * steps compiled with `tbc compile --train` on one batch, with the runtime,
 * on the CPU or the device named.  The session holds the weights and the
 * optimizer's state from one step to the next; each step's loss is printed,
 * --save writes every trained weight as DIR/<sanitized name>.npy, and
 * --export writes MODEL.onnx (the model the step was compiled from) with the
 * trained weights as OUT.onnx (docs/training.md). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tbc/runtime.h"
#include "tbc/tbc.h"
#include "train.h"

static int rt_error(const char *what, const tbcrt_status *st) {
	fprintf(stderr, "error: %s: %s (%s)\n", what, st->message, tbcrt_code_name(st->code));
	return 1;
}

static void sanitized(const char *name, char *out, size_t size) {
	size_t i = 0;
	for (; name[i] && i + 1 < size; i++) {
		char c = name[i];
		bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
			  c == '-';
		out[i] = ok ? c : '_';
	}
	out[i] = 0;
}

static void print_diags(const tbc_diags *d) {
	for (size_t i = 0; i < tbc_diags_count(d); i++) {
		char buf[2048];
		tbc_diag_format(tbc_diags_get(d, i), buf, sizeof buf);
		fprintf(stderr, "error: %s\n", buf);
	}
}

/* Writes every trained weight of the session to dir. */
static int save_weights(tbcrt_model *art, tbcrt_session *s, uint32_t n_state, const char *dir, tbc_diags *d) {
	if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
		fprintf(stderr, "error: %s: cannot create directory: %s\n", dir, strerror(errno));
		return 1;
	}
	for (uint32_t k = 0; k < n_state; k++) {
		tbcrt_state_info si;
		tbcrt_tensor t;
		tbcrt_status st = tbcrt_model_state_info(art, k, &si);
		if (st.code == TBCRT_OK) st = tbcrt_session_state(s, k, &t);
		if (st.code != TBCRT_OK) return rt_error(dir, &st);
		if (!si.weight) continue;
		tbc_tensor view = {.dtype = (tbc_dtype)t.dtype, .rank = (int)t.rank, .data = t.data, .numel = 1};
		for (uint32_t i = 0; i < t.rank; i++) {
			view.dims[i] = t.dims[i];
			view.numel *= t.dims[i];
		}
		char name[512], path[4096];
		sanitized(si.name, name, sizeof name);
		snprintf(path, sizeof path, "%s/%s.npy", dir, name);
		if (tbc_tensor_write_npy(path, &view, d) != TBC_OK) return 1;
	}
	return 0;
}

/* Writes the model the step was compiled from with its trained weights. */
static int export_model(tbcrt_model *art, tbcrt_session *s, uint32_t n_state, const char *model_path,
			const char *out, tbc_diags *d) {
	tbc_named_tensor *w = calloc(n_state + 1, sizeof *w);
	tbc_tensor *views = calloc(n_state + 1, sizeof *views);
	size_t n = 0;
	int rc = 1;
	if (!w || !views) goto done;
	for (uint32_t k = 0; k < n_state; k++) {
		tbcrt_state_info si;
		tbcrt_tensor t;
		tbcrt_status st = tbcrt_model_state_info(art, k, &si);
		if (st.code == TBCRT_OK && si.weight) st = tbcrt_session_state(s, k, &t);
		if (st.code != TBCRT_OK) {
			rt_error(out, &st);
			goto done;
		}
		if (!si.weight) continue;
		tbc_tensor *v = &views[n];
		*v = (tbc_tensor){.dtype = (tbc_dtype)t.dtype, .rank = (int)t.rank, .data = t.data, .numel = 1};
		for (uint32_t i = 0; i < t.rank; i++) {
			v->dims[i] = t.dims[i];
			v->numel *= t.dims[i];
		}
		w[n++] = (tbc_named_tensor){si.name, v};
	}
	rc = tbc_onnx_write_with_initializers(model_path, w, n, out, d) == TBC_OK ? 0 : 1;
	if (rc) print_diags(d);
done:
	free(w);
	free(views);
	return rc;
}

int tbc_cmd_train(int argc, char **argv) {
	const char *step = NULL, *save = NULL, *export_to = NULL, *from = NULL, *device = NULL;
	long steps = 1, threads = 0;
	int n_in = 0, rc = 2;
	const char **in_names = calloc((size_t)argc + 1, sizeof *in_names);
	const char **in_files = calloc((size_t)argc + 1, sizeof *in_files);
	tbc_diags *d = tbc_diags_create();
	tbcrt_context *ctx = NULL;
	tbcrt_model *art = NULL;
	tbcrt_session *s = NULL;
	tbc_tensor **inputs = NULL;
	uint32_t n_inputs = 0;
	if (!in_names || !in_files || !d) goto done;
	for (int i = 0; i < argc; i++) {
		bool has = i + 1 < argc;
		char *end;
		if (!strcmp(argv[i], "--input") && has) {
			char *spec = argv[++i], *eq = strchr(spec, '=');
			if (!eq || eq == spec || !eq[1]) {
				fprintf(stderr, "tbc train: --input wants NAME=FILE, got '%s'\n", spec);
				goto done;
			}
			*eq = 0;
			in_names[n_in] = spec;
			in_files[n_in++] = eq + 1;
		} else if (!strcmp(argv[i], "--steps") && has) {
			steps = strtol(argv[++i], &end, 10);
			if (*end || steps < 1 || steps > 100000000) {
				fprintf(stderr, "tbc train: --steps wants a count from 1, got '%s'\n", argv[i]);
				goto done;
			}
		} else if (!strcmp(argv[i], "--threads") && has) {
			threads = strtol(argv[++i], &end, 10);
			if (*end || threads < 1 || threads > 4096) {
				fprintf(stderr, "tbc train: --threads wants a count from 1, got '%s'\n", argv[i]);
				goto done;
			}
		} else if (!strcmp(argv[i], "--save") && has) {
			save = argv[++i];
		} else if (!strcmp(argv[i], "--export") && has) {
			export_to = argv[++i];
		} else if (!strcmp(argv[i], "--model") && has) {
			from = argv[++i];
		} else if (!strcmp(argv[i], "--device") && has) {
			device = argv[++i];
		} else if (argv[i][0] == '-' || step) {
			fprintf(stderr, "tbc train: unexpected '%s' (see tbc --help)\n", argv[i]);
			goto done;
		} else {
			step = argv[i];
		}
	}
	if (!step) {
		fprintf(stderr, "tbc train: need STEP.so, compiled with tbc compile --train (see tbc --help)\n");
		goto done;
	}
	if (!export_to != !from) {
		fprintf(stderr, "tbc train: --export OUT.onnx needs --model MODEL.onnx, the model the step was compiled "
				"from (and --model is for --export)\n");
		goto done;
	}
	rc = 1;
	tbcrt_context_options co;
	tbcrt_context_options_init(&co);
	if (threads) co.thread_count = (uint32_t)threads;
	tbcrt_status st = tbcrt_context_create(&co, &ctx);
	if (st.code == TBCRT_OK) st = tbcrt_model_load(ctx, step, &art);
	tbcrt_model_info info;
	if (st.code == TBCRT_OK) st = tbcrt_model_get_info(art, &info);
	if (st.code != TBCRT_OK) {
		rt_error(step, &st);
		goto done;
	}
	if (!info.n_state) {
		fprintf(stderr, "error: %s: not a training step (compile it with tbc compile --train)\n", step);
		goto done;
	}
	n_inputs = info.n_inputs;
	inputs = calloc(n_inputs + 1, sizeof *inputs);
	bool *is_state = calloc(n_inputs + 1, sizeof *is_state);
	if (!inputs || !is_state) {
		free(is_state);
		goto done;
	}
	for (uint32_t k = 0; k < info.n_state; k++) {
		tbcrt_state_info si;
		if ((st = tbcrt_model_state_info(art, k, &si)).code != TBCRT_OK) break;
		is_state[si.input] = true;
	}
	bool ok = st.code == TBCRT_OK;
	for (int k = 0; ok && k < n_in; k++) {
		uint32_t i;
		st = tbcrt_model_find_input(art, in_names[k], &i);
		if (st.code != TBCRT_OK || is_state[i]) {
			fprintf(stderr, "error: %s: the step has no input named '%s'%s\n", step, in_names[k],
				st.code == TBCRT_OK ? " (it is a weight the step holds)" : "");
			ok = false;
		} else if (inputs[i]) {
			fprintf(stderr, "error: input '%s' given twice\n", in_names[k]);
			ok = false;
		} else if (tbc_tensor_read_file(in_files[k], d, &inputs[i], NULL) != TBC_OK) {
			print_diags(d);
			ok = false;
		}
	}
	for (uint32_t i = 0; ok && i < n_inputs; i++) {
		tbcrt_tensor_info ti;
		if (is_state[i]) continue;
		if ((st = tbcrt_model_input_info(art, i, &ti)).code != TBCRT_OK) {
			rt_error(step, &st);
			ok = false;
		} else if (!inputs[i]) {
			fprintf(stderr, "error: %s: input '%s' was not given (--input %s=FILE)\n", step, ti.name, ti.name);
			ok = false;
		}
	}
	free(is_state);
	if (!ok) goto done;
	tbcrt_session_options so;
	tbcrt_session_options_init(&so);
	if (device && (st = tbcrt_device_find(ctx, device, &so.device)).code != TBCRT_OK) {
		rt_error(device, &st);
		goto done;
	}
	if ((st = tbcrt_session_create_with(art, &so, &s)).code != TBCRT_OK) {
		rt_error(step, &st);
		goto done;
	}
	for (uint32_t i = 0; i < n_inputs; i++) {
		const tbc_tensor *t = inputs[i];
		if (!t) continue;
		size_t bytes = (size_t)t->numel * tbc_dtype_size(t->dtype);
		if ((st = tbcrt_session_bind_input(s, i, t->dtype, (uint32_t)t->rank, t->dims, t->data, bytes)).code != TBCRT_OK) {
			rt_error(step, &st);
			goto done;
		}
	}
	uint32_t loss_index;
	if ((st = tbcrt_model_find_output(art, "loss", &loss_index)).code != TBCRT_OK) {
		rt_error(step, &st);
		goto done;
	}
	for (long k = 0; k < steps; k++) {
		tbcrt_tensor loss;
		if ((st = tbcrt_session_run(s)).code != TBCRT_OK || (st = tbcrt_session_output(s, loss_index, &loss)).code != TBCRT_OK) {
			rt_error(step, &st);
			goto done;
		}
		double v = loss.dtype == TBC_DT_F64 ? *(const double *)loss.data : (double)*(const float *)loss.data;
		printf("step %ld loss %.9g\n", k + 1, v);
	}
	if (save && save_weights(art, s, info.n_state, save, d) != 0) {
		print_diags(d);
		goto done;
	}
	if (export_to && export_model(art, s, info.n_state, from, export_to, d) != 0) goto done;
	rc = 0;
done:
	for (uint32_t i = 0; inputs && i < n_inputs; i++) tbc_tensor_destroy(inputs[i]);
	free(inputs);
	free(in_names);
	free(in_files);
	tbcrt_session_destroy(s);
	tbcrt_model_destroy(art);
	tbcrt_context_destroy(ctx);
	tbc_diags_destroy(d);
	return rc;
}
