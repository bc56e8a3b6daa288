/* Precision lowering (docs/precision.md): float32 computation moved to
 * float16 or bfloat16 where the policy below allows it, with Casts at the
 * boundaries; or, for fp8 (lower_fp8, below), the large weights of matrix
 * products, convolutions and embeddings stored as float8 e4m3 with one
 * float32 scale per output channel, everything computing in float32.
 *
 * Each op of the main graph gets one of three policies (policy_of, the one
 * table):
 *   LOW     matrix products and convolutions: their float operands are cast
 *           to the low type (constants folded afterwards, so weights are
 *           stored in it) and they compute in it, accumulating in float32
 *           (the kernels' accumulator, codegen/lower/matmul.c);
 *   FOLLOW  elementwise and data-movement ops: low when their float inputs
 *           are (at least one low, every other low or a constant; or only
 *           constants, one of them a weight: an embedding table under
 *           Gather), float32 otherwise -- the widest input wins, as in
 *           torch's autocast;
 *   KEEP    everything else, and those the policy names for accuracy
 *           (softmax, normalizations, reductions, Exp/Log/Pow/Erf, Div by a
 *           value that is not a constant, losses): float32, their low inputs
 *           cast back.
 * Only the inputs an op's type constraint ties to its float data are
 * touched (Resize's scales stay float32); an op with a float32 input the
 * policy does not list stays float32.  Subgraphs (If/Loop/Scan bodies) stay
 * float32: a value they capture is read as it is.
 *
 * Afterwards one Cast per value and type is shared by its readers, a Cast
 * back to the type a value came from reads the value itself, and folding
 * (the pipeline runs fold after this pass) turns casts of constants into
 * constants of the low type; dce removes the float32 originals nobody reads. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/dtype.h"
#include "passes/passes.h"
#include "passes/util.h"

typedef enum policy { KEEP = 0, LOW, FOLLOW } policy;

/* A constant at least this large is a weight: a FOLLOW op whose only float
 * data is constants runs low when one of them is (an embedding table
 * under Gather), so the weight is stored lowered. */
#define WEIGHT_BYTES 4096

/* The policy of an op and which of its inputs carry its float data (bit i:
 * input i; ALL: every input). */
#define ALL 0xffffffffu
typedef struct rule {
	tbc_opcode code;
	policy p;
	uint32_t data; /* the inputs of the op's float type */
} rule;

static const rule rules[] = {
	/* Matrix products and convolutions: operands and bias. */
	{TBC_OP_MatMul, LOW, 0x3},
	{TBC_OP_Gemm, LOW, 0x7},
	{TBC_OP_Conv, LOW, 0x7},
	{TBC_OP_ConvTranspose, LOW, 0x7},
	/* Elementwise ops that lose nothing to a narrower type beyond the
	 * rounding of their result. */
	{TBC_OP_Add, FOLLOW, 0x3},
	{TBC_OP_Sub, FOLLOW, 0x3},
	{TBC_OP_Mul, FOLLOW, 0x3},
	{TBC_OP_Neg, FOLLOW, 0x1},
	{TBC_OP_Abs, FOLLOW, 0x1},
	{TBC_OP_Relu, FOLLOW, 0x1},
	{TBC_OP_LeakyRelu, FOLLOW, 0x1},
	{TBC_OP_PRelu, FOLLOW, 0x3},
	{TBC_OP_Clip, FOLLOW, 0x7},
	{TBC_OP_Max, FOLLOW, ALL},
	{TBC_OP_Min, FOLLOW, ALL},
	{TBC_OP_Sigmoid, FOLLOW, 0x1},
	{TBC_OP_HardSigmoid, FOLLOW, 0x1},
	{TBC_OP_HardSwish, FOLLOW, 0x1},
	{TBC_OP_Tanh, FOLLOW, 0x1},
	{TBC_OP_Where, FOLLOW, 0x6},
	/* Data movement: exact in any type. */
	{TBC_OP_Identity, FOLLOW, 0x1},
	{TBC_OP_Reshape, FOLLOW, 0x1},
	{TBC_OP_Flatten, FOLLOW, 0x1},
	{TBC_OP_Squeeze, FOLLOW, 0x1},
	{TBC_OP_Unsqueeze, FOLLOW, 0x1},
	{TBC_OP_Transpose, FOLLOW, 0x1},
	{TBC_OP_Concat, FOLLOW, ALL},
	{TBC_OP_Split, FOLLOW, 0x1},
	{TBC_OP_Slice, FOLLOW, 0x1},
	{TBC_OP_Gather, FOLLOW, 0x1},
	{TBC_OP_Expand, FOLLOW, 0x1},
	{TBC_OP_Tile, FOLLOW, 0x1},
	{TBC_OP_Pad, FOLLOW, 0x5},
	{TBC_OP_Resize, FOLLOW, 0x1},
	{TBC_OP_DepthToSpace, FOLLOW, 0x1},
	{TBC_OP_SpaceToDepth, FOLLOW, 0x1},
	{TBC_OP_MaxPool, FOLLOW, 0x1},
	{TBC_OP_Dropout, FOLLOW, 0x1},
};

static const rule *rule_of(const tbc_op *op) {
	for (size_t i = 0; i < sizeof rules / sizeof *rules; i++)
		if (rules[i].code == op->code) return &rules[i];
	return NULL;
}

static bool is_data(const rule *r, int i) { return i < 32 && (r->data >> i & 1u); }

/* Whether v is read as a constant (an initializer, or what folding will
 * make one): constants adopt the type of the op that reads them. */
static bool is_const(const tbc_value *v) { return v->kind == TBC_VALUE_CONST; }

static bool excluded(const tbc_op *op, const tbc_precision_options *o) {
	const char *type = tbc_ops[op->code].onnx_name;
	for (const char *p = o->exclude; p && *p;) {
		size_t n = strcspn(p, ",");
		if ((strlen(type) == n && !strncmp(type, p, n)) || (op->name && strlen(op->name) == n && !strncmp(op->name, p, n)))
			return true;
		p += n;
		if (*p == ',') p++;
	}
	return false;
}

typedef struct lowering {
	tbc_module *m;
	const tbc_precision_options *o;
	tbc_dtype low;
	pass_bits lowered; /* values this pass made low (the model's own low values are not ours) */
	pass_bits pinned;  /* values a subgraph reads: they keep their type */
	/* Per value id: its Cast to the other float type, made so far. */
	tbc_value **cast_of;
	uint32_t n;
	tbc_precision_stats *st;
} lowering;

/* The policy of op before anything changed: KEEP unless the table lists it,
 * the options do not exclude it, its float data is float32 and no subgraph
 * reads its results. */
static policy policy_of(const lowering *L, const tbc_op *op) {
	const rule *r = rule_of(op);
	if (!r || excluded(op, L->o)) return KEEP;
	bool any = false;
	for (int i = 0; i < op->n_inputs; i++) {
		const tbc_value *v = op->inputs[i];
		if (!v || !is_data(r, i)) continue;
		if (v->type.dtype != TBC_DT_F32) return KEEP;
		any = true;
	}
	for (int i = 0; i < op->n_outputs; i++) {
		const tbc_value *v = op->outputs[i];
		if (!v || (op->code == TBC_OP_Dropout && i == 1)) continue; /* Dropout's mask */
		if (v->type.dtype != TBC_DT_F32 || pass_bits_get(&L->pinned, v->id)) return KEEP;
	}
	return any ? r->p : KEEP;
}

/* The value v as type t: v itself, the value v was cast from when that is
 * of type t (a Cast back is no Cast), or one Cast shared by every reader,
 * just after v's definition (before `before` for graph inputs and
 * constants, so that a constant's Cast folds where it is read). */
static tbc_value *as_type(lowering *L, tbc_value *v, tbc_dtype t, tbc_op *before) {
	if (v->type.dtype == t) return v;
	if (v->kind == TBC_VALUE_RESULT && v->def->code == TBC_OP_Cast && v->def->inputs[0] &&
	    v->def->inputs[0]->type.dtype == t && pass_bits_get(&L->lowered, v->def->outputs[0]->id))
		return v->def->inputs[0];
	if (v->id < L->n && L->cast_of[v->id]) return L->cast_of[v->id];
	tbc_op *c = tbc_op_new(before->graph, TBC_OP_Cast, "", 1, &v, 1);
	tbc_attr *a = c ? tbc_op_add_attr(c, "to", TBC_ATTR_INT) : NULL;
	if (!a) return NULL;
	a->i = t;
	pass_unlink(c);
	if (v->kind == TBC_VALUE_RESULT && v->def->graph == before->graph) pass_insert_after(c, v->def);
	else pass_insert_before(c, before);
	tbc_value *out = c->outputs[0];
	out->type = v->type;
	out->type.dtype = t;
	if (v->id < L->n) L->cast_of[v->id] = out;
	if (t == L->low && !pass_bits_set(&L->lowered, out->id)) return NULL;
	L->st->casts_inserted++;
	return out;
}

/* Marks every main-graph value read inside a subgraph of g's ops. */
static bool pin_captures(lowering *L, const tbc_graph *g) {
	for (const tbc_op *op = g->first; op; op = op->next) {
		for (int a = 0; a < op->n_attrs; a++) {
			const tbc_attr *at = &op->attrs[a];
			int n = at->kind == TBC_ATTR_GRAPH ? 1 : at->kind == TBC_ATTR_GRAPHS ? at->n : 0;
			for (int j = 0; j < n; j++)
				if (!pin_captures(L, at->graphs[j])) return false;
		}
		if (g == L->m->main) continue;
		for (int i = 0; i < op->n_inputs; i++)
			if (op->inputs[i] && op->inputs[i]->graph == L->m->main && !pass_bits_set(&L->pinned, op->inputs[i]->id))
				return false;
	}
	for (int i = 0; g != L->m->main && i < g->n_outputs; i++)
		if (g->outputs[i] && g->outputs[i]->graph == L->m->main && !pass_bits_set(&L->pinned, g->outputs[i]->id))
			return false;
	return true;
}

static bool lower_main(lowering *L) {
	tbc_graph *g = L->m->main;
	int n_ops = 0;
	for (tbc_op *op = g->first; op; op = op->next) n_ops++;
	pass_ptrmap pol;
	if (!pass_map_init(&pol, (size_t)n_ops + 1)) return false;
	for (tbc_op *op = g->first; op; op = op->next) pass_map_put(&pol, op, (int)policy_of(L, op));
	/* Without --keep-io-types, float32 inputs become inputs of the low type. */
	for (int i = 0; !L->o->keep_io_types && i < g->n_inputs; i++) {
		tbc_value *v = g->inputs[i];
		if (v->type.dtype != TBC_DT_F32 || pass_bits_get(&L->pinned, v->id)) continue;
		v->type.dtype = L->low;
		if (!pass_bits_set(&L->lowered, v->id)) goto oom;
	}
	for (tbc_op *op = g->first, *next; op; op = next) {
		next = op->next;
		int p = pass_map_get(&pol, op);
		if (p < 0) continue; /* a Cast this pass made */
		const rule *r = rule_of(op);
		bool low = p == LOW;
		if (p == FOLLOW) { /* the widest input wins; constants adopt the op's type */
			bool any_low = false, all = true, weight = false;
			for (int i = 0; i < op->n_inputs; i++) {
				const tbc_value *v = op->inputs[i];
				if (!v || !is_data(r, i)) continue;
				if (is_const(v)) weight |= pass_value_bytes(v) >= WEIGHT_BYTES;
				else if (pass_bits_get(&L->lowered, v->id)) any_low = true;
				else all = false;
			}
			/* A weight read only through data movement (an embedding table
			 * that Gather reads) is stored lowered too. */
			low = all && (any_low || weight);
		}
		if (low) {
			for (int i = 0; i < op->n_inputs; i++) {
				tbc_value *v = op->inputs[i];
				if (!v || !is_data(r, i) || pass_bits_get(&L->lowered, v->id)) continue;
				tbc_value *c = as_type(L, v, L->low, op);
				if (!c) goto oom;
				tbc_op_set_input(op, i, c);
			}
			for (int i = 0; i < op->n_outputs; i++) {
				tbc_value *v = op->outputs[i];
				if (!v || (op->code == TBC_OP_Dropout && i == 1)) continue;
				v->type.dtype = L->low;
				if (!pass_bits_set(&L->lowered, v->id)) goto oom;
			}
			L->st->ops_lowered++;
			if (L->o->on_lowered) L->o->on_lowered(L->o->on_lowered_user, op);
			continue;
		}
		/* float32: every input this pass lowered is read back as float32. */
		for (int i = 0; i < op->n_inputs; i++) {
			tbc_value *v = op->inputs[i];
			if (!v || !pass_bits_get(&L->lowered, v->id)) continue;
			tbc_value *c = as_type(L, v, TBC_DT_F32, op);
			if (!c) goto oom;
			tbc_op_set_input(op, i, c);
		}
	}
	/* Outputs: back to float32 under their names with --keep-io-types. */
	for (int i = 0; L->o->keep_io_types && i < g->n_outputs; i++) {
		tbc_value *v = g->outputs[i];
		if (!v || !pass_bits_get(&L->lowered, v->id)) continue;
		tbc_value *c = NULL;
		if (v->kind == TBC_VALUE_RESULT && v->def->code == TBC_OP_Cast && v->def->inputs[0]->type.dtype == TBC_DT_F32)
			c = v->def->inputs[0]; /* an input passed through */
		else if (v->kind == TBC_VALUE_RESULT) {
			tbc_op *cast = tbc_op_new(g, TBC_OP_Cast, "", 1, &v, 1);
			tbc_attr *a = cast ? tbc_op_add_attr(cast, "to", TBC_ATTR_INT) : NULL;
			if (!a) goto oom;
			a->i = TBC_DT_F32;
			pass_unlink(cast);
			pass_insert_after(cast, v->def);
			c = cast->outputs[0];
			c->type = v->type;
			c->type.dtype = TBC_DT_F32;
			L->st->casts_inserted++;
		}
		if (!c) continue;
		/* The model's interface keeps its name: the float32 value takes it. */
		for (int j = 0; j < g->n_outputs; j++)
			if (g->outputs[j] == v) g->outputs[j] = c;
		if (!c->name) {
			c->name = v->name;
			v->name = NULL;
		}
	}
	pass_map_free(&pol);
	return true;
oom:
	pass_map_free(&pol);
	return false;
}

/* ---- fp8: weights stored as float8 e4m3 ------------------------------------------
 * A MatMul, Gemm or Conv whose weight (or a Gather whose table: an
 * embedding, one scale per row) is a float32 constant larger than
 * folding keeps (TBC_FOLD_SMALL_BYTES: a smaller one would be folded back
 * to float32) reads it through DequantizeLinear(e4m3 weight, one float32
 * scale per output channel): max |w| over the channel maps to 448, e4m3's
 * largest finite value (or 57344, e5m2's, for a weight e5m2 holds closer:
 * quantize_weight).  Activations, biases and every other op stay
 * float32; the dequantized weight depends on constants alone, so the
 * compiled code makes it once per session (codegen/lower/load_time.c) and
 * the artifact stores a quarter of the bytes. */
#define E4M3_MAX 448.0f
#define E5M2_MAX 57344.0f

/* The input of op that is its weight (1; Gather's table: 0). */
static int weight_input(const tbc_op *op) { return op->code == TBC_OP_Gather ? 0 : 1; }

/* The output-channel axis of op's weight, or -1 (an embedding table's
 * rows: one scale per row that Gather reads). */
static int weight_axis(const tbc_op *op, int rank) {
	switch (op->code) {
	case TBC_OP_Gather: return rank == 2 && tbc_attr_int(op, "axis", 0) == 0 ? 0 : -1;
	case TBC_OP_MatMul: return rank >= 2 ? rank - 1 : -1;
	case TBC_OP_Gemm: return rank == 2 ? (tbc_attr_int(op, "transB", 0) ? 0 : 1) : -1;
	case TBC_OP_Conv: return rank >= 3 ? 0 : -1;
	default: return -1;
	}
}

/* w's elements quantized to fp8 type dt with one scale per channel of axis
 * (max |w| over the channel maps to the format's largest finite value
 * fmax; element i's channel is (i / inner) % channels): q and scale
 * filled; returns the sum of squared errors of the dequantized weight. */
static double quantize_channels(const tbc_tensor *t, int64_t channels, int64_t inner, tbc_dtype dt, float fmax,
				uint8_t *q, float *scale) {
	const float *x = t->data;
	for (int64_t c = 0; c < channels; c++) scale[c] = 0;
	for (int64_t i = 0; i < t->numel; i++) {
		float a = x[i] < 0 ? -x[i] : x[i];
		int64_t c = (i / inner) % channels;
		if (a > scale[c]) scale[c] = a; /* NaN never wins */
	}
	for (int64_t c = 0; c < channels; c++) scale[c] = scale[c] > 0 && scale[c] < INFINITY ? scale[c] / fmax : 1.0f;
	double err = 0;
	for (int64_t i = 0; i < t->numel; i++) {
		float sc = scale[(i / inner) % channels];
		q[i] = tbc_f32_to_f8(dt, x[i] / sc, true);
		double e = (double)tbc_f8_to_f32(dt, q[i]) * sc - x[i];
		if (e == e) err += e * e;
	}
	return err;
}

/* The weight w (float32 constant) as DequantizeLinear(fp8, scales, axis),
 * inserted before op; NULL when out of memory.  The format is the one
 * whose dequantized weight is closer to w (the smaller sum of squared
 * errors; e4m3 on a tie): e4m3's extra mantissa bit wins for weights of
 * ordinary spread, e5m2's range where a channel's values span more than
 * e4m3 reaches below its largest (an outlier 10^4 and more times the
 * rest). */
static tbc_value *quantize_weight(lowering *L, tbc_value *w, int axis, tbc_op *before) {
	const tbc_tensor *t = w->constant;
	int64_t channels = t->dims[axis], inner = 1;
	for (int k = axis + 1; k < t->rank; k++) inner *= t->dims[k];
	tbc_tensor *q = tbc_tensor_create(TBC_DT_F8E4M3FN, t->rank, t->dims);
	tbc_tensor *q5 = tbc_tensor_create(TBC_DT_F8E5M2, t->rank, t->dims);
	int64_t sdims[1] = {channels};
	tbc_tensor *sc = tbc_tensor_create(TBC_DT_F32, 1, sdims), *sc5 = tbc_tensor_create(TBC_DT_F32, 1, sdims);
	tbc_value *out = NULL;
	if (!q || !sc || !q5 || !sc5) goto done;
	double e4 = quantize_channels(t, channels, inner, TBC_DT_F8E4M3FN, E4M3_MAX, q->data, sc->data);
	double e5 = quantize_channels(t, channels, inner, TBC_DT_F8E5M2, E5M2_MAX, q5->data, sc5->data);
	if (e5 < e4) {
		tbc_tensor *x = q;
		q = q5, q5 = x;
		x = sc, sc = sc5, sc5 = x;
		L->st->weights_e5m2++;
	}
	tbc_graph *g = before->graph;
	tbc_value *qv = tbc_graph_add_const(g, NULL, q), *sv = tbc_graph_add_const(g, NULL, sc);
	tbc_value *ins[2] = {qv, sv};
	tbc_op *dq = qv && sv ? tbc_op_new(g, TBC_OP_DequantizeLinear, "", 2, ins, 1) : NULL;
	tbc_attr *a = dq ? tbc_op_add_attr(dq, "axis", TBC_ATTR_INT) : NULL;
	if (!a) goto done;
	a->i = axis;
	pass_unlink(dq);
	pass_insert_before(dq, before);
	out = dq->outputs[0];
	out->type = w->type;
done:
	tbc_tensor_destroy(q);
	tbc_tensor_destroy(sc);
	tbc_tensor_destroy(q5);
	tbc_tensor_destroy(sc5);
	return out;
}

static bool lower_fp8(lowering *L) {
	tbc_graph *g = L->m->main;
	for (tbc_op *op = g->first; op; op = op->next) {
		if ((op->code != TBC_OP_MatMul && op->code != TBC_OP_Gemm && op->code != TBC_OP_Conv &&
		     op->code != TBC_OP_Gather) ||
		    op->n_inputs < 2 || excluded(op, L->o))
			continue;
		int wi = weight_input(op);
		tbc_value *w = op->inputs[wi];
		if (!w || !is_const(w) || !w->constant || w->constant->dtype != TBC_DT_F32 ||
		    pass_value_bytes(w) <= TBC_FOLD_SMALL_BYTES || pass_bits_get(&L->pinned, w->id))
			continue;
		int axis = weight_axis(op, w->constant->rank);
		if (axis < 0) continue;
		tbc_value *dq = w->id < L->n ? L->cast_of[w->id] : NULL;
		if (dq && tbc_attr_int(dq->def, "axis", -1) != axis) continue; /* one weight read two ways */
		if (!dq) {
			dq = quantize_weight(L, w, axis, op);
			if (!dq) return false;
			if (w->id < L->n) L->cast_of[w->id] = dq;
			L->st->casts_inserted++;
		}
		tbc_op_set_input(op, wi, dq);
		L->st->ops_lowered++;
		if (L->o->on_lowered) L->o->on_lowered(L->o->on_lowered_user, op);
	}
	return true;
}

bool tbc_pass_precision(tbc_module *m, const tbc_precision_options *o, tbc_precision_stats *st, tbc_diags *d) {
	tbc_precision_stats local;
	if (!st) st = &local;
	memset(st, 0, sizeof *st);
	if (!o || o->low == TBC_DT_F32 || o->low == TBC_DT_UNDEFINED) return true;
	if (o->low != TBC_DT_F16 && o->low != TBC_DT_BF16 && o->low != TBC_DT_F8E4M3FN) {
		tbc_diags_add(d, TBC_ERR_UNSUPPORTED, m->path, NULL, NULL, NULL, "precision %s is not one tbc lowers to yet",
			      tbc_dtype_name(o->low));
		return false;
	}
	lowering L = {.m = m, .o = o, .low = o->low, .st = st, .n = m->n_values};
	L.cast_of = calloc((size_t)L.n + 1, sizeof *L.cast_of);
	bool ok = L.cast_of && pin_captures(&L, m->main) && (o->low == TBC_DT_F8E4M3FN ? lower_fp8(&L) : lower_main(&L));
	free(L.cast_of);
	pass_bits_free(&L.lowered);
	pass_bits_free(&L.pinned);
	if (!ok) tbc_diags_add(d, TBC_ERR_NO_MEMORY, m->path, NULL, NULL, NULL, "out of memory lowering precision");
	return ok;
}
