/* Einsum, in general: any number of operands, repeated labels inside an
 * operand (diagonals), an ellipsis broadcast across operands, implicit
 * output (ellipsis dims, then the labels that occur once, in ASCII order)
 * and explicit output.  Each label, and each ellipsis dim, is an index of
 * one loop nest; an operand's offset is the sum over labels of index times
 * that operand's stride for the label (the strides of its dims with that
 * label added up, so "ii" walks the diagonal).  Labels absent from the
 * output are summed.  Floats accumulate in double, integers exactly in 64
 * bits. */
#include <ctype.h>
#include <stdio.h>

#include "reduce_common.h"

#define EIN_MAX_IN 32
#define EIN_LETTERS 52
#define EIN_MAX_LABELS (TBC_MAX_RANK + EIN_LETTERS)

typedef struct ein_spec {
	int n_in;
	int rank[EIN_MAX_IN];
	int label[EIN_MAX_IN][TBC_MAX_RANK]; /* the label of each dim */
	int ell_rank;                        /* labels 0..ell_rank-1: the ellipsis dims */
	bool used[EIN_MAX_LABELS];
	int out_rank;
	int out_label[TBC_MAX_RANK];
} ein_spec;

/* A-Z then a-z, so that label order is ASCII order. */
static int letter_code(char c) { return c >= 'A' && c <= 'Z' ? c - 'A' : c >= 'a' && c <= 'z' ? 26 + c - 'a' : -1; }

static bool ein_parse(const char *equation, int n_in, const int *ranks, ein_spec *s, char *err, size_t errsz) {
	char eq[1024];
	size_t len = 0;
	for (const char *p = equation; *p; p++) {
		if (isspace((unsigned char)*p)) continue;
		if (len + 1 >= sizeof eq) {
			snprintf(err, errsz, "equation is too long");
			return false;
		}
		eq[len++] = *p;
	}
	eq[len] = 0;
	memset(s, 0, sizeof *s);
	if (n_in > EIN_MAX_IN) {
		snprintf(err, errsz, "at most %d operands are supported", EIN_MAX_IN);
		return false;
	}
	s->n_in = n_in;
	char *arrow = strstr(eq, "->");
	if (arrow) *arrow = 0;
	const char *rhs = arrow ? arrow + 2 : NULL;
	/* First pass over the operands' terms: ellipsis widths. */
	const char *term[EIN_MAX_IN];
	int ell[EIN_MAX_IN], k = 0;
	for (char *p = eq;; k++) {
		if (k >= n_in) {
			snprintf(err, errsz, "equation has more terms than the %d operands", n_in);
			return false;
		}
		term[k] = p;
		char *comma = strchr(p, ',');
		if (comma) *comma = 0;
		int letters = 0, dots = 0;
		for (const char *q = p; *q; q++) {
			if (letter_code(*q) >= 0) letters++;
			else if (!strncmp(q, "...", 3) && !dots) dots = 1, q += 2;
			else {
				snprintf(err, errsz, "term %d: unexpected '%c'", k, *q);
				return false;
			}
		}
		ell[k] = dots ? ranks[k] - letters : 0;
		if (ell[k] < 0 || (!dots && letters != ranks[k])) {
			snprintf(err, errsz, "term %d has %d labels for an operand of rank %d", k, letters, ranks[k]);
			return false;
		}
		if (ell[k] > s->ell_rank) s->ell_rank = ell[k];
		if (!comma) break;
		p = comma + 1;
	}
	if (k + 1 != n_in) {
		snprintf(err, errsz, "equation has %d terms for %d operands", k + 1, n_in);
		return false;
	}
	int count[EIN_LETTERS] = {0};
	for (k = 0; k < n_in; k++) {
		int d = 0;
		s->rank[k] = ranks[k];
		for (const char *q = term[k]; *q; q++) {
			if (*q == '.') {
				for (int j = 0; j < ell[k]; j++) s->label[k][d++] = s->ell_rank - ell[k] + j;
				q += 2;
			} else {
				int c = letter_code(*q);
				if (c < 0) {
					snprintf(err, errsz, "'%c' is not a subscript letter", *q);
					return false;
				}
				count[c]++;
				s->label[k][d++] = s->ell_rank + c;
			}
		}
		for (d = 0; d < ranks[k]; d++) s->used[s->label[k][d]] = true;
	}
	for (int j = 0; j < s->ell_rank; j++) s->used[j] = true;
	if (!rhs) {
		for (int j = 0; j < s->ell_rank; j++) s->out_label[s->out_rank++] = j;
		for (int c = 0; c < EIN_LETTERS; c++)
			if (count[c] == 1) {
				if (s->out_rank >= TBC_MAX_RANK) goto too_many;
				s->out_label[s->out_rank++] = s->ell_rank + c;
			}
		return true;
	}
	bool seen[EIN_MAX_LABELS] = {false}, dots = false;
	for (const char *q = rhs; *q; q++) {
		if (!strncmp(q, "...", 3) && !dots) {
			dots = true;
			q += 2;
			for (int j = 0; j < s->ell_rank; j++) {
				if (s->out_rank >= TBC_MAX_RANK) goto too_many;
				s->out_label[s->out_rank++] = j;
			}
			continue;
		}
		int c = letter_code(*q);
		if (c < 0) {
			snprintf(err, errsz, "output: unexpected '%c'", *q);
			return false;
		}
		if (!count[c] || seen[s->ell_rank + c]) {
			snprintf(err, errsz, "output label '%c' is %s", *q, count[c] ? "repeated" : "in no operand");
			return false;
		}
		if (s->out_rank >= TBC_MAX_RANK) goto too_many;
		seen[s->ell_rank + c] = true;
		s->out_label[s->out_rank++] = s->ell_rank + c;
	}
	return true;
too_many:
	snprintf(err, errsz, "output rank exceeds %d", TBC_MAX_RANK);
	return false;
}

bool tbc_shape_Einsum(tbc_infer *cx, tbc_op *op) {
	const char *eq = tbc_attr_string(op, "equation", NULL);
	tbc_type *y = &op->outputs[0]->type;
	if (!eq) return tbc_infer_error(cx, op, "the equation attribute is missing");
	int ranks[EIN_MAX_IN];
	bool known = true;
	y->dtype = op->inputs[0]->type.dtype;
	for (int k = 0; k < op->n_inputs; k++) {
		if (!op->inputs[k]) return tbc_infer_error(cx, op, "operand %d is missing", k);
		if (op->inputs[k]->type.dtype != y->dtype) return tbc_infer_error(cx, op, "operands have different types");
		if (k < EIN_MAX_IN) ranks[k] = op->inputs[k]->type.rank;
		known &= op->inputs[k]->type.rank >= 0;
	}
	if (!known) {
		y->rank = -1;
		return true;
	}
	ein_spec s;
	char err[160];
	if (!ein_parse(eq, op->n_inputs, ranks, &s, err, sizeof err)) return tbc_infer_error(cx, op, "equation '%s': %s", eq, err);
	/* Each label's dim: a static size other than 1 wins; conflicting ones are an error. */
	tbc_dim dim[EIN_MAX_LABELS];
	bool have[EIN_MAX_LABELS] = {false};
	for (int l = 0; l < EIN_MAX_LABELS; l++) dim[l] = (tbc_dim){1, NULL};
	for (int k = 0; k < s.n_in; k++)
		for (int d = 0; d < s.rank[k]; d++) {
			int l = s.label[k][d];
			tbc_dim x = op->inputs[k]->type.dims[d], cur = dim[l];
			if (!have[l] || (x.sym && !cur.sym && cur.size == 1) || (!x.sym && x.size != 1 && (cur.sym || cur.size == 1))) {
				dim[l] = x;
				have[l] = true;
			} else if (!x.sym && !cur.sym && x.size != 1 && x.size != cur.size) {
				return tbc_infer_error(cx, op, "equation '%s': a label has sizes %lld and %lld", eq, (long long)cur.size,
						       (long long)x.size);
			}
		}
	y->rank = s.out_rank;
	for (int i = 0; i < s.out_rank; i++) y->dims[i] = have[s.out_label[i]] ? dim[s.out_label[i]] : (tbc_dim){1, NULL};
	return true;
}

int tbc_interp_Einsum(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const char *eq = tbc_attr_string(op, "equation", NULL);
	if (!eq) return tbc_interp_error(ip, op, "the equation attribute is missing");
	int ranks[EIN_MAX_IN], n_in = op->n_inputs;
	if (n_in > EIN_MAX_IN) return tbc_interp_error(ip, op, "at most %d operands are supported", EIN_MAX_IN);
	for (int k = 0; k < n_in; k++) ranks[k] = in[k]->rank;
	ein_spec s;
	char err[160];
	if (!ein_parse(eq, n_in, ranks, &s, err, sizeof err)) return tbc_interp_error(ip, op, "equation '%s': %s", eq, err);
	int64_t size[EIN_MAX_LABELS], coef[EIN_MAX_IN][EIN_MAX_LABELS];
	for (int l = 0; l < EIN_MAX_LABELS; l++) size[l] = 1;
	memset(coef, 0, sizeof coef);
	for (int k = 0; k < n_in; k++) {
		int64_t str[TBC_MAX_RANK];
		tbc_strides(in[k]->rank, in[k]->dims, str);
		for (int d = 0; d < in[k]->rank; d++) {
			int l = s.label[k][d];
			int64_t n = in[k]->dims[d];
			if (n == 1) continue; /* broadcast: stride 0 */
			if (size[l] != 1 && size[l] != n)
				return tbc_interp_error(ip, op, "equation '%s': a label has sizes %lld and %lld", eq, (long long)size[l], (long long)n);
			size[l] = n;
			coef[k][l] += str[d];
		}
	}
	/* A dim of size 1 whose label is larger elsewhere broadcasts; a label
	 * seen only with size 1 stays 1. */
	int64_t odims[TBC_MAX_RANK];
	bool in_out[EIN_MAX_LABELS] = {false};
	for (int i = 0; i < s.out_rank; i++) {
		odims[i] = size[s.out_label[i]];
		in_out[s.out_label[i]] = true;
	}
	int sum_l[EIN_MAX_LABELS], n_sum = 0, act[EIN_MAX_LABELS], n_act = 0;
	int64_t sum_dims[EIN_MAX_LABELS], sum_total = 1;
	for (int l = 0; l < EIN_MAX_LABELS; l++) {
		if (!s.used[l]) continue;
		act[n_act++] = l;
		if (in_out[l]) continue;
		sum_l[n_sum] = l;
		sum_dims[n_sum++] = size[l];
		if (size[l] && sum_total > ((int64_t)1 << 50) / size[l])
			return tbc_interp_error(ip, op, "equation '%s' sums over too many terms for the interpreter", eq);
		sum_total *= size[l];
	}
	tbc_tensor *y = tbc_interp_new(ip, op, in[0]->dtype, s.out_rank, odims);
	if (!y) return -1;
	bool is_float = tbc_red_class_of(y->dtype) == TBC_RED_FLOAT;
	void *vals[EIN_MAX_IN] = {NULL};
	bool ok = true;
	for (int k = 0; k < n_in; k++) {
		vals[k] = is_float ? (void *)tbc_red_load_f64s(in[k]) : (void *)tbc_tensor_i64s(in[k]);
		ok &= vals[k] != NULL;
	}
	int64_t idx[EIN_MAX_LABELS] = {0}, oidx[TBC_MAX_RANK] = {0}, sidx[EIN_MAX_LABELS];
	for (int64_t o = 0; ok && o < y->numel; o++) {
		for (int i = 0; i < s.out_rank; i++) idx[s.out_label[i]] = oidx[i];
		for (int j = 0; j < n_sum; j++) sidx[j] = idx[sum_l[j]] = 0;
		double facc = 0;
		uint64_t iacc = 0;
		for (int64_t t = 0; t < sum_total; t++) {
			double fp = 1;
			uint64_t ipd = 1;
			for (int k = 0; k < n_in; k++) {
				int64_t off = 0;
				for (int a = 0; a < n_act; a++) off += idx[act[a]] * coef[k][act[a]];
				if (is_float) fp *= ((double *)vals[k])[off];
				else ipd *= (uint64_t)((int64_t *)vals[k])[off];
			}
			facc += fp;
			iacc += ipd;
			tbc_index_next(n_sum, sum_dims, sidx);
			for (int j = 0; j < n_sum; j++) idx[sum_l[j]] = sidx[j];
		}
		if (is_float) tbc_set_f64(y, o, facc);
		else tbc_set_i64(y, o, (int64_t)iacc);
		tbc_index_next(s.out_rank, odims, oidx);
	}
	for (int k = 0; k < n_in; k++) free(vals[k]);
	if (!ok) {
		tbc_tensor_destroy(y);
		return tbc_interp_error(ip, op, "out of memory");
	}
	out[0] = y;
	return 0;
}
