/* NonMaxSuppression (opset 11 form): per batch and class, greedily keep the
 * highest-scoring boxes whose IoU with every kept box is at most
 * iou_threshold (onnx/reference/ops/op_non_max_suppression.py). */
#include "seq_common.h"

bool tbc_shape_NonMaxSuppression(tbc_infer *cx, tbc_op *op) {
	const tbc_type *boxes = seq_in_type(op, 0), *scores = seq_in_type(op, 1);
	if (!tbc_dtype_is_float(boxes->dtype) || scores->dtype != boxes->dtype)
		return tbc_infer_error(cx, op, "boxes and scores must be float tensors of one type");
	if (boxes->rank >= 0 && boxes->rank != 3) return tbc_infer_error(cx, op, "boxes must be [batch, boxes, 4]");
	if (scores->rank >= 0 && scores->rank != 3) return tbc_infer_error(cx, op, "scores must be [batch, classes, boxes]");
	if (boxes->rank == 3 && seq_dim_known(boxes->dims[2]) && boxes->dims[2].size != 4)
		return tbc_infer_error(cx, op, "boxes' last dim must be 4");
	int64_t cpb = tbc_attr_int(op, "center_point_box", 0);
	if (cpb != 0 && cpb != 1) return tbc_infer_error(cx, op, "center_point_box must be 0 or 1");
	tbc_type *y = seq_out_type(op, 0);
	y->dtype = TBC_DT_I64;
	y->rank = 2;
	y->dims[0] = tbc_module_fresh_dim(cx->module);
	y->dims[1] = seq_dim(4 - 1);
	return true;
}

typedef struct {
	double score;
	int64_t idx;
} nms_cand;

/* Highest score first; equal scores keep the lower index first. */
static int nms_cmp(const void *a, const void *b) {
	const nms_cand *x = a, *y = b;
	if (x->score != y->score) return x->score > y->score ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* Corners (ymin, xmin, ymax, xmax) of box i. */
static void nms_corners(const double *bx, int64_t i, bool center, double c[4]) {
	const double *b = bx + i * 4;
	if (center) {
		c[0] = b[1] - b[3] / 2, c[2] = b[1] + b[3] / 2;
		c[1] = b[0] - b[2] / 2, c[3] = b[0] + b[2] / 2;
	} else {
		c[0] = fmin(b[0], b[2]), c[2] = fmax(b[0], b[2]);
		c[1] = fmin(b[1], b[3]), c[3] = fmax(b[1], b[3]);
	}
}

static bool nms_suppress(const double *bx, int64_t i, int64_t j, bool center, double thr) {
	double a[4], b[4];
	nms_corners(bx, i, center, a);
	nms_corners(bx, j, center, b);
	double ix0 = fmax(a[1], b[1]), ix1 = fmin(a[3], b[3]);
	if (ix1 <= ix0) return false;
	double iy0 = fmax(a[0], b[0]), iy1 = fmin(a[2], b[2]);
	if (iy1 <= iy0) return false;
	double inter = (ix1 - ix0) * (iy1 - iy0);
	double area1 = (a[3] - a[1]) * (a[2] - a[0]), area2 = (b[3] - b[1]) * (b[2] - b[0]);
	double uni = area1 + area2 - inter;
	if (inter <= 0 || area1 <= 0 || area2 <= 0 || uni <= 0) return false;
	return inter / uni > thr;
}

int tbc_interp_NonMaxSuppression(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_tensor *boxes = in[0], *scores = in[1];
	const tbc_tensor *mo = seq_in(op, in, 2), *iou = seq_in(op, in, 3), *st = seq_in(op, in, 4);
	if (boxes->rank != 3 || boxes->dims[2] != 4 || scores->rank != 3 || scores->dims[0] != boxes->dims[0] ||
	    scores->dims[2] != boxes->dims[1])
		return tbc_interp_error(ip, op, "boxes must be [batch, boxes, 4] and scores [batch, classes, boxes]");
	int64_t NB = boxes->dims[0], NC = scores->dims[1], N = boxes->dims[1];
	int64_t max_out = mo && mo->numel > 0 ? tbc_get_i64(mo, 0) : 0;
	if (max_out < 0) max_out = 0;
	double thr = iou && iou->numel > 0 ? tbc_get_f64(iou, 0) : 0;
	bool has_st = st && st->numel > 0;
	double sthr = has_st ? tbc_get_f64(st, 0) : 0;
	if (thr < 0 || thr > 1) return tbc_interp_error(ip, op, "iou_threshold must be in [0, 1]");
	bool center = tbc_attr_int(op, "center_point_box", 0) == 1;
	int rc = -1;
	double *bx = seq_load_f64(boxes);
	nms_cand *cand = malloc((size_t)(N + 1) * sizeof *cand);
	int64_t *kept = malloc((size_t)(N + 1) * sizeof *kept);
	int64_t cap = 64, n_sel = 0;
	int64_t *sel = malloc((size_t)cap * 3 * sizeof *sel);
	if (!bx || !cand || !kept || !sel) {
		tbc_interp_error(ip, op, "out of memory");
		goto done;
	}
	for (int64_t b = 0; b < NB; b++)
		for (int64_t c = 0; c < NC; c++) {
			int64_t nc = 0, nk = 0;
			for (int64_t i = 0; i < N; i++) {
				double s = tbc_get_f64(scores, (b * NC + c) * N + i);
				if (!has_st || s > sthr) cand[nc++] = (nms_cand){s, i};
			}
			qsort(cand, (size_t)nc, sizeof *cand, nms_cmp);
			for (int64_t k = 0; k < nc && nk < max_out; k++) {
				bool keep = true;
				for (int64_t q = 0; q < nk && keep; q++)
					if (nms_suppress(bx + b * N * 4, cand[k].idx, kept[q], center, thr)) keep = false;
				if (!keep) continue;
				kept[nk++] = cand[k].idx;
				if (n_sel == cap) {
					int64_t *grown = realloc(sel, (size_t)cap * 2 * 3 * sizeof *sel);
					if (!grown) {
						tbc_interp_error(ip, op, "out of memory");
						goto done;
					}
					sel = grown;
					cap *= 2;
				}
				sel[n_sel * 3] = b, sel[n_sel * 3 + 1] = c, sel[n_sel * 3 + 2] = cand[k].idx;
				n_sel++;
			}
		}
	int64_t dims[2] = {n_sel, 3};
	tbc_tensor *y = tbc_interp_new(ip, op, TBC_DT_I64, 2, dims);
	if (!y) goto done;
	memcpy(y->data, sel, (size_t)n_sel * 3 * sizeof *sel);
	out[0] = y;
	rc = 0;
done:
	free(bx), free(cand), free(kept), free(sel);
	return rc;
}
