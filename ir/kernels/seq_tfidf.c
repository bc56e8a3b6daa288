/* TfIdfVectorizer over integer tokens: counts the n-grams of the pool
 * (pool_int64s) found in each row, with up to max_skip_count skipped
 * tokens between grams, then weights them (TF, IDF or TFIDF).  Unigrams are
 * counted once, not once per skip distance (onnx's reference and
 * onnxruntime agree on this).  String pools are out of scope. */
#include "seq_common.h"

typedef struct {
	int64_t min_n, max_n, max_skip, out_size;
	int n_counts;
	const int64_t *counts, *indexes, *pool;
	int n_indexes, n_pool;
	int mode; /* 1 TF, 2 IDF, 3 TFIDF */
	const double *weights;
	int n_weights;
} tfidf_cfg;

static const char *tfidf_parse(const tbc_op *op, tfidf_cfg *c) {
	c->min_n = tbc_attr_int(op, "min_gram_length", 0);
	c->max_n = tbc_attr_int(op, "max_gram_length", 0);
	c->max_skip = tbc_attr_int(op, "max_skip_count", 0);
	const char *mode = tbc_attr_string(op, "mode", "");
	c->mode = !strcmp(mode, "TF") ? 1 : !strcmp(mode, "IDF") ? 2 : !strcmp(mode, "TFIDF") ? 3 : 0;
	if (!c->mode) return "mode must be TF, IDF or TFIDF";
	if (tbc_op_attr(op, "pool_strings")) return "string pools are not supported (strings are out of scope)";
	c->n_counts = tbc_attr_ints(op, "ngram_counts", &c->counts);
	c->n_indexes = tbc_attr_ints(op, "ngram_indexes", &c->indexes);
	c->n_pool = tbc_attr_ints(op, "pool_int64s", &c->pool);
	c->n_weights = tbc_attr_floats(op, "weights", &c->weights);
	if (c->n_counts <= 0 || c->n_indexes <= 0 || c->n_pool < 0) return "ngram_counts, ngram_indexes and pool_int64s are required";
	if (c->min_n < 1 || c->max_n < c->min_n) return "need 1 <= min_gram_length <= max_gram_length";
	if (c->max_skip < 0) return "max_skip_count must not be negative";
	c->out_size = 0;
	for (int i = 0; i < c->n_indexes; i++) {
		if (c->indexes[i] < 0) return "ngram_indexes must not be negative";
		if (c->indexes[i] + 1 > c->out_size) c->out_size = c->indexes[i] + 1;
	}
	if (c->n_weights > 0 && c->n_weights < c->out_size) return "weights must have an entry per output";
	int64_t id = 0;
	for (int i = 0; i < c->n_counts; i++) {
		int64_t start = c->counts[i], end = i + 1 < c->n_counts ? c->counts[i + 1] : c->n_pool;
		if (start < 0 || end < start || end > c->n_pool || (end - start) % (i + 1)) return "ngram_counts do not split pool_int64s";
		id += (end - start) / (i + 1);
	}
	if (id > c->n_indexes) return "ngram_indexes must have an entry per pool n-gram";
	if (c->n_counts < c->max_n) c->max_n = c->n_counts; /* no longer grams in the pool */
	return NULL;
}

bool tbc_shape_TfIdfVectorizer(tbc_infer *cx, tbc_op *op) {
	const tbc_type *x = seq_in_type(op, 0);
	tfidf_cfg c;
	const char *msg = tfidf_parse(op, &c);
	if (msg) return tbc_infer_error(cx, op, "%s", msg);
	if (x->dtype != TBC_DT_I32 && x->dtype != TBC_DT_I64) return tbc_infer_error(cx, op, "X must be int32 or int64");
	if (x->rank > 2) return tbc_infer_error(cx, op, "X must be [C] or [B, C]");
	tbc_type *y = seq_out_type(op, 0);
	y->dtype = TBC_DT_F32;
	if (x->rank < 0) {
		y->rank = -1;
		return true;
	}
	y->rank = x->rank == 2 ? 2 : 1;
	if (x->rank == 2) y->dims[0] = x->dims[0];
	y->dims[y->rank - 1] = seq_dim(c.out_size);
	return true;
}

/* Output index of the pool gram of length n equal to tokens at row[pos],
 * row[pos+skip], ...; -1 when absent. */
static int64_t tfidf_find(const tfidf_cfg *c, const int64_t *row, int64_t pos, int64_t skip, int64_t n) {
	int64_t start = c->counts[n - 1], end = n < c->n_counts ? c->counts[n] : c->n_pool;
	int64_t id = 0;
	for (int i = 0; i < n - 1; i++) id += ((i + 1 < c->n_counts ? c->counts[i + 1] : c->n_pool) - c->counts[i]) / (i + 1);
	for (int64_t g = start; g + n <= end; g += n, id++) {
		bool eq = true;
		for (int64_t k = 0; k < n && eq; k++) eq = c->pool[g + k] == row[pos + k * skip];
		if (eq) return c->indexes[id];
	}
	return -1;
}

int tbc_interp_TfIdfVectorizer(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_tensor *x = in[0];
	tfidf_cfg c;
	const char *msg = tfidf_parse(op, &c);
	if (msg) return tbc_interp_error(ip, op, "%s", msg);
	if (x->rank > 2) return tbc_interp_error(ip, op, "X must be [C] or [B, C]");
	int64_t rows = x->rank == 2 ? x->dims[0] : 1, C = x->rank == 0 ? 1 : x->dims[x->rank - 1];
	int64_t dims[2] = {rows, c.out_size};
	tbc_tensor *y = x->rank == 2 ? tbc_interp_new(ip, op, TBC_DT_F32, 2, dims) : tbc_interp_new(ip, op, TBC_DT_F32, 1, dims + 1);
	if (!y) return -1;
	int64_t *tok = tbc_tensor_i64s(x), *freq = calloc((size_t)(c.out_size + 1), sizeof *freq);
	if (!tok || !freq) {
		free(tok), free(freq);
		tbc_tensor_destroy(y);
		return tbc_interp_error(ip, op, "out of memory");
	}
	for (int64_t r = 0; r < rows; r++) {
		const int64_t *row = tok + r * C;
		memset(freq, 0, (size_t)c.out_size * sizeof *freq);
		int64_t min_n = c.min_n;
		for (int64_t skip = 1; skip <= c.max_skip + 1; skip++) {
			for (int64_t pos = 0; pos < C; pos++)
				for (int64_t n = min_n; n <= c.max_n && pos + (n - 1) * skip < C; n++) {
					int64_t o = tfidf_find(&c, row, pos, skip, n);
					if (o >= 0) freq[o]++;
				}
			if (min_n == 1) { /* unigrams do not depend on the skip */
				min_n = 2;
				if (min_n > c.max_n) break;
			}
		}
		for (int64_t i = 0; i < c.out_size; i++) {
			double v = (double)freq[i];
			if (c.mode == 2) v = freq[i] > 0 ? (c.n_weights > 0 ? c.weights[i] : 1) : 0;
			else if (c.mode == 3 && c.n_weights > 0) v = c.weights[i] * (double)freq[i];
			tbc_set_f64(y, r * c.out_size + i, v);
		}
	}
	free(tok), free(freq);
	out[0] = y;
	return 0;
}
