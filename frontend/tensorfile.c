/* Tensor files: .npy (NumPy format versions 1-3, little-endian, C order) and
 * ONNX TensorProto .pb files in; .npy out.  Types NumPy has no dtype for are
 * written widened (docs/limits.md): bfloat16, float8 and float4 as float32,
 * int4/int2 as int8, uint4/uint2 as uint8. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend.h"

/* A tensor file may be as large as the largest tensor plus its header. */
#define TBC_MAX_TENSOR_FILE_BYTES ((size_t)TBC_MAX_TENSOR_BYTES + 65536)

static const struct {
	const char *descr; /* without the byte-order character */
	tbc_dtype dt;
} npy_types[] = {
	{"f4", TBC_DT_F32}, {"f8", TBC_DT_F64}, {"f2", TBC_DT_F16}, {"i1", TBC_DT_I8},  {"u1", TBC_DT_U8},
	{"i2", TBC_DT_I16}, {"u2", TBC_DT_U16}, {"i4", TBC_DT_I32}, {"u4", TBC_DT_U32}, {"i8", TBC_DT_I64},
	{"u8", TBC_DT_U64}, {"b1", TBC_DT_BOOL},
};

#define FERR(code, ...) (tbc_diags_add(diags, code, path, NULL, NULL, NULL, __VA_ARGS__), (code))

/* The value of key in a NumPy header dict, after the colon and spaces. */
static const char *npy_field(const char *h, const char *key) {
	const char *p = strstr(h, key);
	if (!p) return NULL;
	p += strlen(key);
	while (*p == ' ' || *p == '\'' || *p == '"') p++;
	if (*p != ':') return NULL;
	p++;
	while (*p == ' ') p++;
	return p;
}

static tbc_code read_npy(const char *path, const uint8_t *buf, size_t size, tbc_diags *diags, tbc_tensor **out) {
	if (size < 10) return FERR(TBC_ERR_INVALID_MODEL, "truncated .npy header");
	int major = buf[6];
	size_t hlen, hstart;
	if (major == 1) {
		hlen = (size_t)buf[8] | (size_t)buf[9] << 8;
		hstart = 10;
	} else if (major == 2 || major == 3) {
		if (size < 12) return FERR(TBC_ERR_INVALID_MODEL, "truncated .npy header");
		hlen = (size_t)buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 | (size_t)buf[11] << 24;
		hstart = 12;
	} else {
		return FERR(TBC_ERR_UNSUPPORTED, ".npy format version %d is not supported", major);
	}
	if (hlen > size - hstart || hlen > 1 << 20) return FERR(TBC_ERR_INVALID_MODEL, "truncated .npy header");
	char *h = malloc(hlen + 1);
	if (!h) return FERR(TBC_ERR_NO_MEMORY, "out of memory");
	memcpy(h, buf + hstart, hlen);
	h[hlen] = 0;
	tbc_code rc = TBC_OK;
	const char *d = npy_field(h, "descr");
	const char *fo = npy_field(h, "fortran_order");
	const char *sh = npy_field(h, "shape");
	if (!d || !fo || !sh || (*d != '\'' && *d != '"') || *sh != '(') {
		rc = FERR(TBC_ERR_INVALID_MODEL, "malformed .npy header");
		goto out;
	}
	/* descr is a quoted 3-character string: byte order, kind, size. */
	const char *close = strchr(d + 1, d[0]);
	if (!close || close - d != 4) {
		rc = FERR(TBC_ERR_UNSUPPORTED, ".npy dtype %.8s is not supported", d);
		goto out;
	}
	char order = d[1];
	tbc_dtype dt = TBC_DT_UNDEFINED;
	for (size_t i = 0; i < sizeof npy_types / sizeof npy_types[0]; i++)
		if (!strncmp(d + 2, npy_types[i].descr, 2)) dt = npy_types[i].dt;
	if (dt == TBC_DT_UNDEFINED || !strchr("<>|=", order)) {
		rc = FERR(TBC_ERR_UNSUPPORTED, ".npy dtype %.8s is not supported", d);
		goto out;
	}
	if (order == '>' && tbc_dtype_size(dt) > 1) {
		rc = FERR(TBC_ERR_UNSUPPORTED, ".npy data is big-endian; only little-endian is supported");
		goto out;
	}
	int64_t dims[TBC_MAX_RANK];
	int rank = 0;
	const char *p = sh + 1;
	for (;;) {
		while (*p == ' ' || *p == ',') p++;
		if (*p == ')') break;
		if (*p < '0' || *p > '9' || rank == TBC_MAX_RANK) {
			rc = FERR(TBC_ERR_INVALID_MODEL, "malformed or too long .npy shape");
			goto out;
		}
		int64_t v = 0;
		for (; *p >= '0' && *p <= '9'; p++) {
			if (v > (INT64_MAX - 9) / 10) {
				rc = FERR(TBC_ERR_INVALID_MODEL, ".npy shape overflows");
				goto out;
			}
			v = v * 10 + (*p - '0');
		}
		if (*p == 'L') p++;
		dims[rank++] = v;
	}
	if (!strncmp(fo, "True", 4) && rank > 1) {
		rc = FERR(TBC_ERR_UNSUPPORTED, ".npy data is in Fortran order; only C order is supported");
		goto out;
	}
	int64_t numel = tbc_shape_numel(rank, dims);
	if (numel < 0 || numel > TBC_MAX_TENSOR_BYTES / (int64_t)tbc_dtype_size(dt)) {
		rc = FERR(TBC_ERR_INVALID_MODEL, ".npy shape is too large");
		goto out;
	}
	size_t bytes = (size_t)numel * tbc_dtype_size(dt);
	if (size - hstart - hlen != bytes) {
		rc = FERR(TBC_ERR_INVALID_MODEL, ".npy holds %zu data bytes, its shape needs %zu", size - hstart - hlen, bytes);
		goto out;
	}
	tbc_tensor *t = tbc_tensor_create(dt, rank, dims);
	if (!t) {
		rc = FERR(TBC_ERR_NO_MEMORY, "out of memory");
		goto out;
	}
	memcpy(t->data, buf + hstart + hlen, bytes);
	if (dt == TBC_DT_BOOL)
		for (int64_t i = 0; i < numel; i++) ((uint8_t *)t->data)[i] = ((uint8_t *)t->data)[i] != 0;
	*out = t;
out:
	free(h);
	return rc;
}

static tbc_code read_pb(const char *path, const uint8_t *buf, size_t size, tbc_diags *diags, tbc_tensor **out,
			char **out_name) {
	if (size > TBC_MAX_MODEL_BYTES) return FERR(TBC_ERR_UNSUPPORTED, "the file is larger than 2 GiB");
	if (!tbc_fe_prescan_tensor(buf, size, path, diags)) return tbc_diags_first_code(diags);
	Onnx__TensorProto *tp = onnx__tensor_proto__unpack(NULL, size, buf);
	if (!tp) return FERR(TBC_ERR_INVALID_MODEL, "neither a .npy file nor a valid ONNX TensorProto");
	tbc_code rc = tbc_fe_tensor_from_proto(tp, NULL, path, diags, out);
	if (!rc && out_name && tp->name && *tp->name) {
		*out_name = strdup(tp->name);
		if (!*out_name) {
			tbc_tensor_destroy(*out);
			*out = NULL;
			rc = FERR(TBC_ERR_NO_MEMORY, "out of memory");
		}
	}
	onnx__tensor_proto__free_unpacked(tp, NULL);
	return rc;
}

tbc_code tbc_tensor_read_file(const char *path, tbc_diags *diags, tbc_tensor **out_tensor, char **out_name) {
	if (out_tensor) *out_tensor = NULL;
	if (out_name) *out_name = NULL;
	if (!path || !out_tensor) {
		tbc_diags_add(diags, TBC_ERR_INVALID_ARGUMENT, path, NULL, NULL, NULL, "no path or output");
		return TBC_ERR_INVALID_ARGUMENT;
	}
	uint8_t *buf;
	size_t size;
	tbc_code rc = tbc_fe_read_file(path, TBC_MAX_TENSOR_FILE_BYTES, diags, &buf, &size);
	if (rc) return rc;
	rc = tbc_fe_tensor_parse(path, buf, size, diags, out_tensor, out_name);
	free(buf);
	return rc;
}

tbc_code tbc_fe_tensor_parse(const char *path, const uint8_t *buf, size_t size, tbc_diags *diags,
			     tbc_tensor **out_tensor, char **out_name) {
	*out_tensor = NULL;
	if (out_name) *out_name = NULL;
	if (size >= 6 && !memcmp(buf, "\x93NUMPY", 6)) return read_npy(path, buf, size, diags, out_tensor);
	return read_pb(path, buf, size, diags, out_tensor, out_name);
}

/* NumPy's name for what we write for dt, and whether values are converted
 * to float32. */
static const char *npy_descr(tbc_dtype dt, bool *widen) {
	*widen = false;
	switch (dt) {
	case TBC_DT_F32: return "<f4";
	case TBC_DT_F64: return "<f8";
	case TBC_DT_F16: return "<f2";
	case TBC_DT_I8:
	case TBC_DT_I4:
	case TBC_DT_I2: return "|i1";
	case TBC_DT_U8:
	case TBC_DT_U4:
	case TBC_DT_U2: return "|u1";
	case TBC_DT_I16: return "<i2";
	case TBC_DT_U16: return "<u2";
	case TBC_DT_I32: return "<i4";
	case TBC_DT_U32: return "<u4";
	case TBC_DT_I64: return "<i8";
	case TBC_DT_U64: return "<u8";
	case TBC_DT_BOOL: return "|b1";
	case TBC_DT_BF16:
	case TBC_DT_F8E4M3FN:
	case TBC_DT_F8E4M3FNUZ:
	case TBC_DT_F8E5M2:
	case TBC_DT_F8E5M2FNUZ:
	case TBC_DT_F8E8M0:
	case TBC_DT_F4E2M1: *widen = true; return "<f4";
	default: return NULL;
	}
}

tbc_code tbc_tensor_write_npy(const char *path, const tbc_tensor *t, tbc_diags *diags) {
	if (!path || !t) {
		tbc_diags_add(diags, TBC_ERR_INVALID_ARGUMENT, path, NULL, NULL, NULL, "no path or tensor");
		return TBC_ERR_INVALID_ARGUMENT;
	}
	bool widen;
	const char *descr = npy_descr(t->dtype, &widen);
	if (!descr || t->rank < 0 || t->rank > TBC_MAX_RANK)
		return FERR(TBC_ERR_UNSUPPORTED, "cannot write a %s tensor as .npy", tbc_dtype_name(t->dtype));
	char header[1024];
	int n = snprintf(header, sizeof header, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
	for (int i = 0; i < t->rank; i++)
		n += snprintf(header + n, sizeof header - (size_t)n, "%lld,%s", (long long)t->dims[i],
			      i + 1 < t->rank ? " " : "");
	n += snprintf(header + n, sizeof header - (size_t)n, "), }");
	/* Pad with spaces so the data starts at a multiple of 64, then '\n'. */
	size_t total = 10 + (size_t)n + 1;
	size_t pad = (64 - total % 64) % 64;
	memset(header + n, ' ', pad);
	header[(size_t)n + pad] = '\n';
	size_t hlen = (size_t)n + pad + 1;
	FILE *f = fopen(path, "wb");
	if (!f) return FERR(TBC_ERR_IO, "cannot create the file");
	uint8_t pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (uint8_t)(hlen & 0xFF), (uint8_t)(hlen >> 8)};
	bool ok = fwrite(pre, 1, 10, f) == 10 && fwrite(header, 1, hlen, f) == hlen;
	if (widen) {
		for (int64_t i = 0; ok && i < t->numel; i++) {
			float v = (float)tbc_load_f64(t->dtype, t->data, (size_t)i);
			ok = fwrite(&v, 4, 1, f) == 1;
		}
	} else if (ok && t->numel) {
		size_t bytes = (size_t)t->numel * tbc_dtype_size(t->dtype);
		ok = fwrite(t->data, 1, bytes, f) == bytes;
	}
	if (fclose(f) != 0) ok = false;
	if (!ok) return FERR(TBC_ERR_IO, "write failed");
	return TBC_OK;
}
