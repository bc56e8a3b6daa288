/* TensorProto decoding: every numeric dtype, from raw_data (little-endian;
 * 4-bit types packed two per byte and 2-bit types four per byte, low bits
 * first), from the typed fields (int32_data also carries the bit patterns of
 * the narrow types), or from external data.  The data must match the shape
 * exactly: a tensor that declares more (or fewer) elements than it carries is
 * rejected before any allocation, so a hostile model cannot make us allocate
 * what it does not contain. */
#include <stdlib.h>
#include <string.h>

#include "frontend.h"

/* Bits per element of the sub-byte types, packed low bits first; 0 for the
 * byte-sized ones. */
static int packed_bits(tbc_dtype dt) {
	if (dt == TBC_DT_I4 || dt == TBC_DT_U4 || dt == TBC_DT_F4E2M1) return 4;
	if (dt == TBC_DT_U2 || dt == TBC_DT_I2) return 2;
	return 0;
}

static bool is_packed(tbc_dtype dt) { return packed_bits(dt) != 0; }

/* Bytes the raw encoding of numel elements of dt takes. */
static uint64_t raw_bytes(tbc_dtype dt, int64_t numel) {
	int bits = packed_bits(dt);
	if (bits) {
		uint64_t per = (uint64_t)(8 / bits);
		return (uint64_t)numel / per + ((uint64_t)numel % per != 0);
	}
	return (uint64_t)numel * tbc_dtype_size(dt);
}

/* Element i of packed sub-byte data, sign-extended for the signed types. */
static uint8_t packed_elem(tbc_dtype dt, uint8_t byte_of_i, int64_t i) {
	int bits = packed_bits(dt), per = 8 / bits;
	uint8_t mask = (uint8_t)((1u << bits) - 1);
	uint8_t v = (uint8_t)((byte_of_i >> (bits * (int)(i % per))) & mask);
	if (dt == TBC_DT_I4 || dt == TBC_DT_I2) {
		int shift = 8 - bits;
		return (uint8_t)(int8_t)((int8_t)(uint8_t)(v << shift) >> shift);
	}
	return v;
}

static void unpack4(tbc_dtype dt, const uint8_t *src, uint8_t *dst, int64_t numel) {
	int per = 8 / packed_bits(dt);
	for (int64_t i = 0; i < numel; i++) dst[i] = packed_elem(dt, src[i / per], i);
}

static void decode_raw(tbc_tensor *t, const uint8_t *src) {
	if (is_packed(t->dtype)) {
		unpack4(t->dtype, src, t->data, t->numel);
		return;
	}
	if (!t->numel) return; /* src may be NULL */
	memcpy(t->data, src, (size_t)t->numel * tbc_dtype_size(t->dtype));
	if (t->dtype == TBC_DT_BOOL)
		for (int64_t i = 0; i < t->numel; i++) ((uint8_t *)t->data)[i] = ((uint8_t *)t->data)[i] != 0;
}

#define ERR(code, ...) (tbc_diags_add(diags, code, file, NULL, NULL, name, __VA_ARGS__), (code))

/* Which typed field carries dt: its name and entry count, and the count the
 * shape needs. */
static const char *typed_field(const Onnx__TensorProto *tp, tbc_dtype dt, int64_t n, size_t *have, uint64_t *want) {
	*want = (uint64_t)n;
	switch (dt) {
	case TBC_DT_F32: *have = tp->n_float_data; return "float_data";
	case TBC_DT_I64: *have = tp->n_int64_data; return "int64_data";
	case TBC_DT_F64: *have = tp->n_double_data; return "double_data";
	case TBC_DT_U32:
	case TBC_DT_U64: *have = tp->n_uint64_data; return "uint64_data";
	default:
		*have = tp->n_int32_data;
		if (is_packed(dt)) *want = raw_bytes(dt, n);
		return "int32_data";
	}
}

static void decode_typed(const Onnx__TensorProto *tp, tbc_tensor *t) {
	tbc_dtype dt = t->dtype;
	int64_t n = t->numel;
	uint8_t *d8 = t->data;
	for (int64_t i = 0; i < n; i++) {
		switch (dt) {
		case TBC_DT_F32: ((float *)t->data)[i] = tp->float_data[i]; break;
		case TBC_DT_I64: ((int64_t *)t->data)[i] = tp->int64_data[i]; break;
		case TBC_DT_F64: ((double *)t->data)[i] = tp->double_data[i]; break;
		case TBC_DT_U32: ((uint32_t *)t->data)[i] = (uint32_t)tp->uint64_data[i]; break;
		case TBC_DT_U64: ((uint64_t *)t->data)[i] = tp->uint64_data[i]; break;
		case TBC_DT_I32: ((int32_t *)t->data)[i] = tp->int32_data[i]; break;
		case TBC_DT_I16: ((int16_t *)t->data)[i] = (int16_t)tp->int32_data[i]; break;
		case TBC_DT_U16:
		case TBC_DT_F16:
		case TBC_DT_BF16: ((uint16_t *)t->data)[i] = (uint16_t)tp->int32_data[i]; break;
		case TBC_DT_BOOL: d8[i] = tp->int32_data[i] != 0; break;
		default:
			if (is_packed(dt))
				d8[i] = packed_elem(dt, (uint8_t)tp->int32_data[i / (8 / packed_bits(dt))], i);
			else
				d8[i] = (uint8_t)tp->int32_data[i]; /* int8, uint8, float8 */
			break;
		}
	}
}

tbc_code tbc_fe_tensor_from_proto(const Onnx__TensorProto *tp, const char *base_dir, const char *file,
				  tbc_diags *diags, tbc_tensor **out) {
	*out = NULL;
	const char *name = tp->name && *tp->name ? tp->name : NULL;
	int dti = tp->has_data_type ? tp->data_type : 0;
	if (!tbc_dtype_valid(dti))
		return ERR(TBC_ERR_INVALID_MODEL, "unknown data type %d", dti);
	tbc_dtype dt = (tbc_dtype)dti;
	if (!tbc_dtype_supported(dt))
		return ERR(TBC_ERR_UNSUPPORTED, "tensors of type %s are not supported", tbc_dtype_name(dt));
	if (tp->n_dims > TBC_MAX_RANK)
		return ERR(TBC_ERR_UNSUPPORTED, "rank %zu exceeds the limit of %d", tp->n_dims, TBC_MAX_RANK);
	int rank = (int)tp->n_dims;
	for (int i = 0; i < rank; i++)
		if (tp->dims[i] < 0) return ERR(TBC_ERR_INVALID_MODEL, "dim %d is negative (%lld)", i, (long long)tp->dims[i]);
	int64_t numel = tbc_shape_numel(rank, tp->dims);
	if (numel < 0) return ERR(TBC_ERR_INVALID_MODEL, "the product of its dims overflows");
	if (tp->segment) return ERR(TBC_ERR_UNSUPPORTED, "segmented tensors are not supported");

	bool external = tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
	if (tp->has_data_location && !external && tp->data_location != ONNX__TENSOR_PROTO__DATA_LOCATION__DEFAULT)
		return ERR(TBC_ERR_INVALID_MODEL, "unknown data_location %d", (int)tp->data_location);
	/* The data must match the shape before anything is allocated. */
	tbc_fe_external ext = {0};
	const uint8_t *raw = NULL;
	size_t raw_len = 0;
	bool is_raw = external || tp->has_raw_data;
	if (external) {
		if (!base_dir) return ERR(TBC_ERR_UNSUPPORTED, "external data is not allowed here");
		tbc_code c = tbc_fe_external_load(tp, base_dir, file, diags, &ext);
		if (c) return c;
		raw = ext.data;
		raw_len = ext.size;
	} else if (tp->has_raw_data) {
		raw = tp->raw_data.data;
		raw_len = tp->raw_data.len;
	}
	tbc_code rc = TBC_OK;
	size_t es = tbc_dtype_size(dt);
	if (is_raw) {
		bool fits = is_packed(dt) || (uint64_t)numel <= UINT64_MAX / es;
		uint64_t want = fits ? raw_bytes(dt, numel) : 0;
		if (!fits || raw_len != want) {
			rc = ERR(TBC_ERR_INVALID_MODEL, "%s has %zu bytes, the shape (%lld elements of %s) needs %llu",
				 external ? "external data" : "raw_data", raw_len, (long long)numel, tbc_dtype_name(dt),
				 (unsigned long long)want);
			goto done;
		}
	} else {
		size_t have;
		uint64_t want;
		const char *field = typed_field(tp, dt, numel, &have, &want);
		if (have != want) {
			if (have == 0)
				rc = ERR(TBC_ERR_INVALID_MODEL, "declares %lld elements of %s but carries no data",
					 (long long)numel, tbc_dtype_name(dt));
			else
				rc = ERR(TBC_ERR_INVALID_MODEL, "%s has %zu entries, the shape needs %llu", field, have,
					 (unsigned long long)want);
			goto done;
		}
	}
	if (numel > TBC_MAX_TENSOR_BYTES / (int64_t)es) {
		rc = ERR(TBC_ERR_UNSUPPORTED, "%lld elements exceed the tensor size limit", (long long)numel);
		goto done;
	}
	tbc_tensor *t = tbc_tensor_create(dt, rank, tp->dims);
	if (!t) {
		rc = ERR(TBC_ERR_NO_MEMORY, "out of memory for %lld elements", (long long)numel);
		goto done;
	}
	if (is_raw)
		decode_raw(t, raw);
	else
		decode_typed(tp, t);
	*out = t;
done:
	tbc_fe_external_release(&ext);
	return rc;
}

tbc_code tbc_fe_tensor_from_sparse(const Onnx__SparseTensorProto *sp, const char *base_dir, const char *file,
				   tbc_diags *diags, tbc_tensor **out) {
	*out = NULL;
	const char *name = sp->values && sp->values->name && *sp->values->name ? sp->values->name : NULL;
	if (!sp->values || !sp->indices) return ERR(TBC_ERR_INVALID_MODEL, "sparse tensor without values or indices");
	if (sp->n_dims > TBC_MAX_RANK)
		return ERR(TBC_ERR_UNSUPPORTED, "rank %zu exceeds the limit of %d", sp->n_dims, TBC_MAX_RANK);
	int rank = (int)sp->n_dims;
	for (int i = 0; i < rank; i++)
		if (sp->dims[i] < 0) return ERR(TBC_ERR_INVALID_MODEL, "dim %d is negative", i);
	if (tbc_shape_numel(rank, sp->dims) < 0) return ERR(TBC_ERR_INVALID_MODEL, "the product of its dims overflows");
	tbc_tensor *vals = NULL, *idx = NULL, *t = NULL;
	tbc_code rc = tbc_fe_tensor_from_proto(sp->values, base_dir, file, diags, &vals);
	if (!rc) rc = tbc_fe_tensor_from_proto(sp->indices, base_dir, file, diags, &idx);
	if (rc) goto done;
	int64_t nnz = vals->rank == 1 ? vals->dims[0] : -1;
	if (nnz < 0) {
		rc = ERR(TBC_ERR_INVALID_MODEL, "sparse values must be 1-D");
		goto done;
	}
	bool linear = idx->rank == 1 && idx->dims[0] == nnz;
	bool coords = idx->rank == 2 && idx->dims[0] == nnz && idx->dims[1] == rank;
	if (idx->dtype != TBC_DT_I64 || (!linear && !coords)) {
		rc = ERR(TBC_ERR_INVALID_MODEL, "sparse indices must be int64 of shape [NNZ] or [NNZ, rank]");
		goto done;
	}
	t = tbc_tensor_create(vals->dtype, rank, sp->dims);
	if (!t) {
		rc = ERR(TBC_ERR_NO_MEMORY, "out of memory densifying a sparse tensor");
		goto done;
	}
	size_t es = tbc_dtype_size(t->dtype);
	const int64_t *ix = idx->data;
	for (int64_t k = 0; k < nnz; k++) {
		int64_t pos = 0;
		if (linear) {
			pos = ix[k];
		} else {
			for (int d = 0; d < rank; d++) {
				int64_t c = ix[k * rank + d];
				if (c < 0 || c >= sp->dims[d]) {
					pos = -1;
					break;
				}
				pos = pos * sp->dims[d] + c;
			}
		}
		if (pos < 0 || pos >= t->numel) {
			rc = ERR(TBC_ERR_INVALID_MODEL, "sparse index %lld is out of range", (long long)k);
			goto done;
		}
		memcpy((uint8_t *)t->data + (size_t)pos * es, (uint8_t *)vals->data + (size_t)k * es, es);
	}
	*out = t;
	t = NULL;
done:
	tbc_tensor_destroy(vals);
	tbc_tensor_destroy(idx);
	tbc_tensor_destroy(t);
	return rc;
}
