/* ONNX import (placeholder). */
#include "ir/ir.h"

tbc_code tbc_module_load_onnx(const char *path, tbc_diags *diags, tbc_module **out_module) {
	*out_module = NULL;
	tbc_diags_add(diags, TBC_ERR_UNSUPPORTED, path, NULL, NULL, NULL, "the ONNX frontend is not written yet");
	return TBC_ERR_UNSUPPORTED;
}
