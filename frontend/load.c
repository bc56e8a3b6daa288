/* Loading an ONNX model: read the file (bounded), pre-scan the wire format,
 * decode with protobuf-c, check the model header (IR version, opsets),
 * import the main graph (canonicalising each op as it is imported), infer
 * shapes, and check the declared output types against the inferred ones.
 * On any failure the module is destroyed: there is no partial result. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "frontend.h"

#define TBC_MIN_OPSET 1
#define TBC_MAX_OPSET 28
#define TBC_MAX_IR_VERSION 14

static bool is_onnx_domain(const char *d) { return !*d || !strcmp(d, "ai.onnx"); }

static void format_type(const tbc_type *t, char *buf, size_t size) {
	size_t used = (size_t)snprintf(buf, size, "%s[", tbc_dtype_name(t->dtype));
	for (int i = 0; i < t->rank && used < size; i++) {
		if (t->dims[i].sym)
			used += (size_t)snprintf(buf + used, size - used, "%s%s", i ? "," : "", t->dims[i].sym);
		else
			used += (size_t)snprintf(buf + used, size - used, "%s%lld", i ? "," : "", (long long)t->dims[i].size);
	}
	if (t->rank < 0 && used < size) used += (size_t)snprintf(buf + used, size - used, "?");
	if (used < size) snprintf(buf + used, size - used, "]");
}

/* Declared output types are not authoritative, but one that contradicts
 * inference (dtype, rank or a static dim) means the model is inconsistent. */
static bool check_outputs(tbc_fe *cx, const tbc_graph *g, const Onnx__GraphProto *gp) {
	for (size_t i = 0; i < gp->n_output && i < (size_t)g->n_outputs; i++) {
		const Onnx__TypeProto *tp = gp->output[i]->type;
		const tbc_value *v = g->outputs[i];
		const char *name = tbc_fe_str(gp->output[i]->name);
		if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE) continue;
		const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
		bool bad = tt->has_elem_type && tt->elem_type != 0 && tt->elem_type != (int)v->type.dtype;
		const Onnx__TensorShapeProto *sh = tt->shape;
		if (sh && v->type.rank >= 0) {
			if ((int)sh->n_dim != v->type.rank) bad = true;
			for (size_t d = 0; !bad && d < sh->n_dim; d++)
				if (sh->dim[d]->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE &&
				    !v->type.dims[d].sym && v->type.dims[d].size != sh->dim[d]->dim_value)
					bad = true;
		}
		if (bad) {
			char inferred[256];
			format_type(&v->type, inferred, sizeof inferred);
			return TBC_FE_ERR(cx, TBC_ERR_INVALID_MODEL, NULL, NULL, name,
					  "graph output '%s' is declared with a type or shape that disagrees with the inferred %s",
					  name, inferred);
		}
	}
	return true;
}

static bool check_header(tbc_fe *cx, const Onnx__ModelProto *mp) {
	if (mp->has_ir_version && (mp->ir_version < 1 || mp->ir_version > TBC_MAX_IR_VERSION))
		return TBC_FE_ERR(cx, TBC_ERR_UNSUPPORTED, NULL, NULL, NULL, "IR version %lld is not supported (1 to %d)",
				  (long long)mp->ir_version, TBC_MAX_IR_VERSION);
	int64_t opset = -1;
	for (size_t i = 0; i < mp->n_opset_import; i++) {
		const Onnx__OperatorSetIdProto *o = mp->opset_import[i];
		if (is_onnx_domain(tbc_fe_str(o->domain))) opset = o->has_version ? o->version : -1;
	}
	/* A model of other domains only (ai.onnx.ml, training) needs no ai.onnx
	 * opset; a node of the ai.onnx domain then reports the missing import. */
	if (opset < 0 && !mp->n_opset_import)
		return TBC_FE_ERR(cx, TBC_ERR_INVALID_MODEL, NULL, NULL, NULL,
				  "the model has no opset_import for the ai.onnx domain");
	if (opset >= 0 && (opset < TBC_MIN_OPSET || opset > TBC_MAX_OPSET))
		return TBC_FE_ERR(cx, TBC_ERR_UNSUPPORTED, NULL, NULL, NULL, "ai.onnx opset %lld is not supported (%d to %d)",
				  (long long)opset, TBC_MIN_OPSET, TBC_MAX_OPSET);
	if (!mp->graph) return TBC_FE_ERR(cx, TBC_ERR_INVALID_MODEL, NULL, NULL, NULL, "the model has no graph");
	cx->opset = opset;
	cx->m->opset = opset;
	cx->m->ir_version = mp->has_ir_version ? mp->ir_version : 0;
	if (mp->producer_name && *mp->producer_name)
		cx->m->producer = tbc_arena_strdup(cx->m->arena, mp->producer_name);
	return true;
}

tbc_code tbc_fe_load(const void *data, size_t size, const char *base_dir, const char *display_name,
		     const tbc_fe_options *opt, tbc_diags *diags, tbc_module **out_module) {
	*out_module = NULL;
	const char *file = display_name ? display_name : "<memory>";
	size_t before = tbc_diags_count(diags);
#define FAIL(code, ...)                                                               \
	do {                                                                          \
		tbc_diags_add(diags, code, file, NULL, NULL, NULL, __VA_ARGS__);      \
		return code;                                                          \
	} while (0)
	if ((!data && size) || size == 0 || size > TBC_MAX_MODEL_BYTES) {
		if (opt) free(opt->free_after_decode);
		if (!data && size) FAIL(TBC_ERR_INVALID_ARGUMENT, "no data");
		if (size == 0) FAIL(TBC_ERR_INVALID_MODEL, "the model is empty (0 bytes)");
		FAIL(TBC_ERR_UNSUPPORTED, "the model is %zu bytes, more than the limit of %zu", size, TBC_MAX_MODEL_BYTES);
	}
	void *owned = opt ? opt->free_after_decode : NULL;
	if (!tbc_fe_prescan_model(data, size, file, diags)) {
		free(owned);
		return tbc_diags_first_code(diags);
	}
	Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, size, data);
	free(owned);
	if (!mp) FAIL(TBC_ERR_INVALID_MODEL, "not a valid ONNX protobuf: protobuf-c could not decode the ModelProto");
#undef FAIL
	tbc_fe cx = {.diags = diags, .file = file, .base_dir = base_dir};
	tbc_fe_scope scope = {0};
	cx.m = tbc_module_new(file);
	bool ok = cx.m != NULL;
	if (!ok) tbc_diags_add(diags, TBC_ERR_NO_MEMORY, file, NULL, NULL, NULL, "out of memory");
	ok = ok && check_header(&cx, mp) && tbc_fe_functions_init(&cx, mp);
	if (ok) {
		cx.m->main->name = tbc_arena_strdup(cx.m->arena, tbc_fe_str(mp->graph->name));
		ok = tbc_fe_import_graph(&cx, cx.m->main, mp->graph, &scope);
	}
	tbc_fe_scope_free(&scope);
	if (ok && !(opt && opt->skip_infer)) {
		tbc_infer icx = {.module = cx.m, .diags = diags};
		ok = tbc_infer_graph(&icx, cx.m->main) && check_outputs(&cx, cx.m->main, mp->graph);
	}
	tbc_fe_functions_free(&cx);
	onnx__model_proto__free_unpacked(mp, NULL);
	if (!ok || tbc_diags_count(diags) > before) {
		tbc_module_destroy(cx.m);
		tbc_code c = TBC_ERR_INTERNAL;
		for (size_t i = before; i < tbc_diags_count(diags); i++) {
			c = tbc_diags_get(diags, i)->code;
			break;
		}
		if (c == TBC_ERR_INTERNAL && tbc_diags_count(diags) == before)
			tbc_diags_add(diags, TBC_ERR_INTERNAL, file, NULL, NULL, NULL, "import failed without a reason (bug in tbc)");
		return c;
	}
	*out_module = cx.m;
	return TBC_OK;
}

tbc_code tbc_module_load_onnx_memory(const void *data, size_t size, const char *base_dir, const char *display_name,
				     tbc_diags *diags, tbc_module **out_module) {
	return tbc_fe_load(data, size, base_dir, display_name, NULL, diags, out_module);
}

/* Reads a whole regular file of at most limit bytes into a malloc'd buffer. */
tbc_code tbc_fe_read_file(const char *path, size_t limit, tbc_diags *diags, uint8_t **out, size_t *out_size) {
	*out = NULL;
	*out_size = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		tbc_diags_add(diags, TBC_ERR_IO, path, NULL, NULL, NULL, "cannot open: %s", strerror(errno));
		return TBC_ERR_IO;
	}
	struct stat st;
	tbc_code rc = TBC_OK;
	uint8_t *buf = NULL;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		tbc_diags_add(diags, TBC_ERR_IO, path, NULL, NULL, NULL, "not a regular file");
		rc = TBC_ERR_IO;
		goto out;
	}
	if ((uint64_t)st.st_size > limit) {
		tbc_diags_add(diags, TBC_ERR_UNSUPPORTED, path, NULL, NULL, NULL, "the file is %lld bytes, more than the limit of %zu",
			      (long long)st.st_size, limit);
		rc = TBC_ERR_UNSUPPORTED;
		goto out;
	}
	size_t size = (size_t)st.st_size;
	buf = malloc(size ? size : 1);
	if (!buf) {
		tbc_diags_add(diags, TBC_ERR_NO_MEMORY, path, NULL, NULL, NULL, "out of memory reading %zu bytes", size);
		rc = TBC_ERR_NO_MEMORY;
		goto out;
	}
	size_t got = 0;
	while (got < size) {
		ssize_t k = read(fd, buf + got, size - got);
		if (k < 0 && errno == EINTR) continue;
		if (k <= 0) break;
		got += (size_t)k;
	}
	if (got != size) {
		tbc_diags_add(diags, TBC_ERR_IO, path, NULL, NULL, NULL, "short read (%zu of %zu bytes)", got, size);
		rc = TBC_ERR_IO;
		free(buf);
		buf = NULL;
		goto out;
	}
	*out = buf;
	*out_size = size;
out:
	close(fd);
	return rc;
}

tbc_code tbc_module_load_onnx(const char *path, tbc_diags *diags, tbc_module **out_module) {
	*out_module = NULL;
	if (!path) {
		tbc_diags_add(diags, TBC_ERR_INVALID_ARGUMENT, NULL, NULL, NULL, NULL, "no model path");
		return TBC_ERR_INVALID_ARGUMENT;
	}
	uint8_t *buf;
	size_t size;
	tbc_code rc = tbc_fe_read_file(path, TBC_MAX_MODEL_BYTES, diags, &buf, &size);
	if (rc) return rc;
	/* External data lives beside the model. */
	const char *slash = strrchr(path, '/');
	char *dir = slash ? strndup(path, (size_t)(slash - path) + (slash == path)) : strdup(".");
	if (!dir) {
		free(buf);
		tbc_diags_add(diags, TBC_ERR_NO_MEMORY, path, NULL, NULL, NULL, "out of memory");
		return TBC_ERR_NO_MEMORY;
	}
	tbc_fe_options opt = {.free_after_decode = buf};
	rc = tbc_fe_load(buf, size, dir, path, &opt, diags, out_module);
	free(dir);
	return rc;
}
