/* libFuzzer harness for the tensor file readers (.npy and TensorProto .pb,
 * the inputs of `tbc run`): any bytes parse or fail cleanly. */
#include <stdlib.h>

#include "frontend/frontend.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
	(void)argc;
	(void)argv;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	tbc_diags *d = tbc_diags_create();
	tbc_tensor *t = NULL;
	char *name = NULL;
	tbc_code rc = tbc_fe_tensor_parse("fuzz.npy", data, size, d, &t, &name);
	if ((rc == TBC_OK) != (t != NULL)) abort();
	if (rc != TBC_OK && tbc_diags_count(d) == 0) abort();
	tbc_tensor_destroy(t);
	free(name);
	tbc_diags_destroy(d);
	return 0;
}
