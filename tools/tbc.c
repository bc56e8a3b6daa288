/* The tbc command: a thin client of the compiler library (include/tbc/tbc.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tbc/tbc.h"

static const char usage_text[] =
	"usage: tbc <command> [options]\n"
	"\n"
	"commands:\n"
	"  inspect MODEL              print the IR and a summary (ops by kind, parameters,\n"
	"                             inputs and outputs with shapes)\n"
	"  run MODEL --input NAME=FILE ... --output-dir DIR\n"
	"                             run the model with the reference interpreter; inputs are\n"
	"                             .npy or ONNX TensorProto .pb files; each output is written\n"
	"                             as DIR/NAME.npy (characters outside A-Z a-z 0-9 . _ - in\n"
	"                             NAME become _)\n"
	"\n"
	"options:\n"
	"  -h, --help                 show this help\n"
	"  --version                  show the version\n";

static void print_diags(const tbc_diags *d) {
	for (size_t i = 0; i < tbc_diags_count(d); i++) {
		char buf[2048];
		tbc_diag_format(tbc_diags_get(d, i), buf, sizeof buf);
		fprintf(stderr, "error: %s\n", buf);
	}
}

static int fail(const tbc_diags *d, int code) {
	print_diags(d);
	return code;
}

static tbc_module *load(const char *path, tbc_diags *d) {
	tbc_module *m = NULL;
	if (tbc_module_load_onnx(path, d, &m) != TBC_OK) return NULL;
	return m;
}

static int cmd_inspect(int argc, char **argv) {
	if (argc != 1) {
		fprintf(stderr, "tbc inspect: expected one MODEL argument\n");
		return 2;
	}
	tbc_diags *d = tbc_diags_create();
	tbc_module *m = load(argv[0], d);
	if (!m) {
		int rc = fail(d, 1);
		tbc_diags_destroy(d);
		return rc;
	}
	char *ir = tbc_module_print(m);
	char *summary = tbc_module_summary(m);
	if (ir) fputs(ir, stdout);
	if (summary) printf("\n%s", summary);
	free(ir);
	free(summary);
	tbc_module_destroy(m);
	tbc_diags_destroy(d);
	return 0;
}

/* Output file names: every character outside [A-Za-z0-9._-] becomes '_'; with
 * the .npy suffix even "." or ".." name a plain file inside DIR. */
static void sanitize(const char *name, char *out, size_t size) {
	size_t i = 0;
	for (; name[i] && i + 1 < size; i++) {
		char c = name[i];
		bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
			  c == '_' || c == '-';
		out[i] = ok ? c : '_';
	}
	out[i] = 0;
}

static int cmd_run(int argc, char **argv) {
	const char *model = NULL, *outdir = NULL;
	const char **in_names = calloc((size_t)argc + 1, sizeof *in_names);
	const char **in_files = calloc((size_t)argc + 1, sizeof *in_files);
	int n_in = 0, rc = 2;
	tbc_diags *d = tbc_diags_create();
	tbc_module *m = NULL;
	tbc_tensor **inputs = NULL, **outputs = NULL;
	size_t n_model_in = 0, n_model_out = 0;
	if (!in_names || !in_files || !d) goto done;
	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--input") && i + 1 < argc) {
			char *spec = argv[++i], *eq = strchr(spec, '=');
			if (!eq) {
				fprintf(stderr, "tbc run: --input wants NAME=FILE, got '%s'\n", spec);
				goto done;
			}
			*eq = 0;
			in_names[n_in] = spec;
			in_files[n_in++] = eq + 1;
		} else if (!strcmp(argv[i], "--output-dir") && i + 1 < argc) {
			outdir = argv[++i];
		} else if (argv[i][0] == '-') {
			fprintf(stderr, "tbc run: unknown option '%s'\n", argv[i]);
			goto done;
		} else if (!model) {
			model = argv[i];
		} else {
			fprintf(stderr, "tbc run: more than one MODEL ('%s' and '%s')\n", model, argv[i]);
			goto done;
		}
	}
	if (!model || !outdir) {
		fprintf(stderr, "tbc run: need MODEL and --output-dir DIR (see tbc --help)\n");
		goto done;
	}
	rc = 1;
	m = load(model, d);
	if (!m) goto done;
	n_model_in = tbc_module_input_count(m);
	n_model_out = tbc_module_output_count(m);
	inputs = calloc(n_model_in + 1, sizeof *inputs);
	outputs = calloc(n_model_out + 1, sizeof *outputs);
	if (!inputs || !outputs) goto done;
	for (int k = 0; k < n_in; k++) {
		size_t i = 0;
		while (i < n_model_in && strcmp(tbc_module_input_name(m, i), in_names[k])) i++;
		if (i == n_model_in) {
			fprintf(stderr, "error: %s: the model has no input named '%s'\n", model, in_names[k]);
			goto done;
		}
		if (inputs[i]) {
			fprintf(stderr, "error: input '%s' given twice\n", in_names[k]);
			goto done;
		}
		if (tbc_tensor_read_file(in_files[k], d, &inputs[i], NULL) != TBC_OK) goto done;
	}
	for (size_t i = 0; i < n_model_in; i++)
		if (!inputs[i]) {
			fprintf(stderr, "error: %s: input '%s' was not given (--input %s=FILE)\n", model,
				tbc_module_input_name(m, i), tbc_module_input_name(m, i));
			goto done;
		}
	if (tbc_interpret(m, inputs, n_model_in, outputs, n_model_out, d) != TBC_OK) goto done;
	if (mkdir(outdir, 0777) != 0 && errno != EEXIST) {
		fprintf(stderr, "error: %s: cannot create directory: %s\n", outdir, strerror(errno));
		goto done;
	}
	for (size_t i = 0; i < n_model_out; i++) {
		char name[512], path[4096];
		sanitize(tbc_module_output_name(m, i), name, sizeof name);
		snprintf(path, sizeof path, "%s/%s.npy", outdir, name);
		if (tbc_tensor_write_npy(path, outputs[i], d) != TBC_OK) goto done;
		printf("%s\n", path);
	}
	rc = 0;
done:
	if (rc == 1) print_diags(d);
	for (size_t i = 0; inputs && i < n_model_in; i++) tbc_tensor_destroy(inputs[i]);
	for (size_t i = 0; outputs && i < n_model_out; i++) tbc_tensor_destroy(outputs[i]);
	free(inputs);
	free(outputs);
	free(in_names);
	free(in_files);
	tbc_module_destroy(m);
	tbc_diags_destroy(d);
	return rc;
}

int main(int argc, char **argv) {
	if (argc < 2) {
		fputs(usage_text, stderr);
		return 2;
	}
	const char *cmd = argv[1];
	if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
		fputs(usage_text, stdout);
		return 0;
	}
	if (!strcmp(cmd, "--version")) {
		printf("tbc %s\n", TBC_VERSION_STRING);
		return 0;
	}
	if (!strcmp(cmd, "inspect")) return cmd_inspect(argc - 2, argv + 2);
	if (!strcmp(cmd, "run")) return cmd_run(argc - 2, argv + 2);
	fprintf(stderr, "tbc: unknown command '%s' (see tbc --help)\n", cmd);
	return 2;
}
