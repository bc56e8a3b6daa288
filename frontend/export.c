/* Writing an ONNX model back with new values for some of its initializers
 * (tbc_onnx_write_with_initializers; `tbc train --export`, docs/training.md).
 *
 * The model is decoded as the loader decodes it (the wire pre-scan first),
 * and written again as it was -- graph, opsets, metadata, functions -- with
 * each named initializer's data replaced by the given tensor, whose dtype and
 * dims must be the initializer's.  The replaced data is raw_data
 * (little-endian, the format's own) and every other initializer stored
 * outside the model is read in and written inline too, so the file stands
 * alone wherever it is written.  The file is written beside its final name
 * and renamed over it: a failure leaves no half-written model. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "frontend/frontend.h"

/* What the replacement changes in a TensorProto, kept to put back before
 * protobuf-c frees the message it unpacked. */
typedef struct saved_data {
	Onnx__TensorProto *tp;
	Onnx__TensorProto was;
	tbc_fe_external ext;
} saved_data;

static void set_raw(Onnx__TensorProto *tp, const void *data, size_t bytes) {
	tp->n_float_data = tp->n_int32_data = tp->n_string_data = tp->n_int64_data = 0;
	tp->n_double_data = tp->n_uint64_data = tp->n_external_data = 0;
	tp->has_data_location = false;
	tp->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__DEFAULT;
	tp->has_raw_data = true;
	tp->raw_data.data = (uint8_t *)data;
	tp->raw_data.len = bytes;
}

static const tbc_tensor *value_of(const tbc_named_tensor *values, size_t n, const char *name, size_t *out_index) {
	for (size_t i = 0; i < n; i++)
		if (values[i].name && !strcmp(values[i].name, name)) {
			*out_index = i;
			return values[i].tensor;
		}
	return NULL;
}

static tbc_code write_atomically(const char *path, const uint8_t *buf, size_t size, tbc_diags *d) {
	size_t n = strlen(path) + 16;
	char *tmp = malloc(n);
	if (!tmp) {
		tbc_diags_add(d, TBC_ERR_NO_MEMORY, path, NULL, NULL, NULL, "out of memory");
		return TBC_ERR_NO_MEMORY;
	}
	snprintf(tmp, n, "%s.tmp%d", path, (int)getpid());
	FILE *f = fopen(tmp, "wb");
	bool ok = f && fwrite(buf, 1, size, f) == size;
	if (f && fclose(f) != 0) ok = false;
	if (ok && rename(tmp, path) != 0) ok = false;
	if (!ok) {
		tbc_diags_add(d, TBC_ERR_IO, path, NULL, NULL, NULL, "cannot write: %s", strerror(errno));
		remove(tmp);
	}
	free(tmp);
	return ok ? TBC_OK : TBC_ERR_IO;
}

tbc_code tbc_onnx_write_with_initializers(const char *model_path, const tbc_named_tensor *values, size_t n_values,
					  const char *out_path, tbc_diags *d) {
	if (!model_path || !out_path || (n_values && !values)) {
		tbc_diags_add(d, TBC_ERR_INVALID_ARGUMENT, NULL, NULL, NULL, NULL, "tbc_onnx_write_with_initializers: a NULL argument");
		return TBC_ERR_INVALID_ARGUMENT;
	}
	uint8_t *buf = NULL, *packed = NULL;
	size_t size;
	tbc_code rc = tbc_fe_read_file(model_path, TBC_MAX_MODEL_BYTES, d, &buf, &size);
	if (rc) return rc;
	if (!tbc_fe_prescan_model(buf, size, model_path, d)) {
		free(buf);
		return tbc_diags_first_code(d);
	}
	Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, size, buf);
	if (!mp || !mp->graph) {
		tbc_diags_add(d, TBC_ERR_INVALID_MODEL, model_path, NULL, NULL, NULL,
			      "not a valid ONNX protobuf: protobuf-c could not decode the ModelProto");
		if (mp) onnx__model_proto__free_unpacked(mp, NULL);
		free(buf);
		return TBC_ERR_INVALID_MODEL;
	}
	const char *slash = strrchr(model_path, '/');
	char *dir = slash ? strndup(model_path, (size_t)(slash - model_path) + (slash == model_path)) : strdup(".");
	Onnx__GraphProto *g = mp->graph;
	saved_data *saved = calloc(g->n_initializer + 1, sizeof *saved);
	bool *used = calloc(n_values + 1, sizeof *used);
	size_t n_saved = 0;
	if (!dir || !saved || !used) {
		tbc_diags_add(d, TBC_ERR_NO_MEMORY, model_path, NULL, NULL, NULL, "out of memory");
		rc = TBC_ERR_NO_MEMORY;
	}
	for (size_t i = 0; !rc && i < g->n_initializer; i++) {
		Onnx__TensorProto *tp = g->initializer[i];
		const char *name = tbc_fe_str(tp->name);
		size_t vi = 0;
		const tbc_tensor *t = value_of(values, n_values, name, &vi);
		bool external = tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
		if (!t && !external) continue;
		saved_data *s = &saved[n_saved++];
		s->tp = tp;
		s->was = *tp;
		if (!t) { /* kept, but read in: the file must stand alone */
			if ((rc = tbc_fe_external_load(tp, dir, model_path, d, &s->ext))) break;
			set_raw(tp, s->ext.data, s->ext.size);
			continue;
		}
		used[vi] = true;
		bool same = tp->has_data_type && tp->data_type == (int32_t)t->dtype && tp->n_dims == (size_t)t->rank;
		for (int k = 0; same && k < t->rank; k++) same = tp->dims[k] == t->dims[k];
		if (!same) {
			tbc_diags_add(d, TBC_ERR_INVALID_ARGUMENT, model_path, NULL, NULL, name,
				      "initializer '%s' is not of the type and shape of the value given for it (%s, rank %d)", name,
				      tbc_dtype_name(t->dtype), t->rank);
			rc = TBC_ERR_INVALID_ARGUMENT;
			break;
		}
		set_raw(tp, t->data, (size_t)t->numel * tbc_dtype_size(t->dtype));
	}
	for (size_t i = 0; !rc && i < n_values; i++)
		if (!used[i]) {
			tbc_diags_add(d, TBC_ERR_INVALID_ARGUMENT, model_path, NULL, NULL, values[i].name,
				      "the model has no initializer named '%s' in its main graph", tbc_fe_str(values[i].name));
			rc = TBC_ERR_INVALID_ARGUMENT;
		}
	size_t out_size = rc ? 0 : onnx__model_proto__get_packed_size(mp);
	if (!rc && out_size > TBC_MAX_MODEL_BYTES) {
		tbc_diags_add(d, TBC_ERR_UNSUPPORTED, out_path, NULL, NULL, NULL,
			      "the model would be %zu bytes, more than a protobuf message may hold (%zu)", out_size,
			      TBC_MAX_MODEL_BYTES);
		rc = TBC_ERR_UNSUPPORTED;
	}
	if (!rc && !(packed = malloc(out_size ? out_size : 1))) {
		tbc_diags_add(d, TBC_ERR_NO_MEMORY, out_path, NULL, NULL, NULL, "out of memory for %zu bytes", out_size);
		rc = TBC_ERR_NO_MEMORY;
	}
	if (!rc && onnx__model_proto__pack(mp, packed) != out_size) {
		tbc_diags_add(d, TBC_ERR_INTERNAL, out_path, NULL, NULL, NULL, "protobuf-c packed another size than it measured");
		rc = TBC_ERR_INTERNAL;
	}
	if (!rc) rc = write_atomically(out_path, packed, out_size, d);
	for (size_t i = 0; i < n_saved; i++) { /* protobuf-c frees what it unpacked, not ours */
		*saved[i].tp = saved[i].was;
		tbc_fe_external_release(&saved[i].ext);
	}
	onnx__model_proto__free_unpacked(mp, NULL);
	free(packed);
	free(saved);
	free(used);
	free(dir);
	free(buf);
	return rc;
}
