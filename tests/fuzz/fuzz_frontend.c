/* libFuzzer harnesses for the ONNX frontend: every input is a candidate model.
 * fuzz_frontend hands it to tbc_module_load_onnx_memory (decoding, import,
 * canonicalisation and the shape rules of every op); fuzz_import, built with
 * TBC_FUZZ_IMPORT_ONLY, stops before shape inference, so it exercises the
 * frontend's own code (wire pre-scan, protobuf decoding, tensors, external
 * data, import, functions, canonicalisation) alone.  External data resolves inside a
 * scratch folder holding one data file, a subfolder and a symbolic link, so
 * the path checks and offset/length arithmetic are fuzzed too.  The loader
 * must never crash, leak or leave a module behind on failure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "frontend/frontend.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char base_dir[64];

static void remove_scratch(void) {
	static const char *const names[] = {"link.bin", "weights.bin", "sub"};
	char path[128];
	for (int i = 0; i < 3; i++) {
		snprintf(path, sizeof path, "%s/%s", base_dir, names[i]);
		i == 2 ? rmdir(path) : unlink(path);
	}
	rmdir(base_dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
	(void)argc;
	(void)argv;
	snprintf(base_dir, sizeof base_dir, "/tmp/tbc-fuzz-XXXXXX");
	if (!mkdtemp(base_dir)) abort();
	atexit(remove_scratch);
	char path[128];
	snprintf(path, sizeof path, "%s/weights.bin", base_dir);
	FILE *f = fopen(path, "wb");
	if (!f) abort();
	for (int i = 0; i < 4096; i++) fputc(i & 0xFF, f);
	fclose(f);
	snprintf(path, sizeof path, "%s/sub", base_dir);
	mkdir(path, 0700);
	snprintf(path, sizeof path, "%s/link.bin", base_dir);
	if (symlink("weights.bin", path) != 0) abort();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	tbc_diags *d = tbc_diags_create();
	tbc_module *m = NULL;
#ifdef TBC_FUZZ_IMPORT_ONLY
	tbc_fe_options opt = {.skip_infer = true};
	tbc_code rc = tbc_fe_load(data, size, base_dir, "fuzz.onnx", &opt, d, &m);
#else
	tbc_code rc = tbc_module_load_onnx_memory(data, size, base_dir, "fuzz.onnx", d, &m);
#endif
	if ((rc == TBC_OK) != (m != NULL)) abort();
	if (rc != TBC_OK && tbc_diags_count(d) == 0) abort(); /* every failure says why */
	tbc_module_destroy(m);
	tbc_diags_destroy(d);
	return 0;
}
