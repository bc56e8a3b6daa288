/* Internals of the ONNX frontend: wire-format pre-scan, TensorProto decoding,
 * external data, import of graphs into the IR, canonicalisation of older
 * opset forms, and the tensor file readers.  Nothing here is public API. */
#ifndef TBC_FRONTEND_H
#define TBC_FRONTEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir/ir.h"
#include "onnx/onnx.pb-c.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the ONNX frontend assumes a little-endian host (raw_data is little-endian)"
#endif

/* ---- Limits (docs/limits.md) --------------------------------------------- */
/* Largest model file or buffer: protobuf messages are limited to 2 GiB. */
#define TBC_MAX_MODEL_BYTES ((size_t)INT32_MAX)
/* Nesting of messages on the wire (any kind: graphs, nodes, attributes,
 * type protos); bounds protobuf-c's recursion. */
#define TBC_MAX_WIRE_DEPTH 160
/* TypeProto inside TypeProto (sequence of sequence of ...). */
#define TBC_MAX_TYPE_DEPTH 16
/* Nested calls of model-local functions. */
#define TBC_MAX_FUNCTION_DEPTH 16
/* Nodes created by inlining function bodies, in all: calls that each call
 * another function twice would otherwise grow exponentially. */
#define TBC_MAX_INLINED_NODES 250000
/* Bytes of tensors (Constant values, tensor attributes, initializers of
 * subgraphs) that function inlining copies, in all. */
#define TBC_MAX_INLINED_BYTES ((size_t)256 << 20)

/* A null-safe view of protobuf-c's optional strings. */
static inline const char *tbc_fe_str(const char *s) { return s ? s : ""; }

/* ---- wire.c -------------------------------------------------------------- */
/* Checks the wire format of a serialized ModelProto before protobuf-c sees
 * it: every tag, varint and length is well formed and inside its parent, and
 * message nesting along the recursive paths (graphs in attributes, type
 * protos in type protos) stays inside the limits above.  Reports to diags. */
bool tbc_fe_prescan_model(const uint8_t *data, size_t size, const char *file, tbc_diags *diags);
/* The same for a lone TensorProto (tensor .pb files). */
bool tbc_fe_prescan_tensor(const uint8_t *data, size_t size, const char *file, tbc_diags *diags);

/* ---- external.c ---------------------------------------------------------- */
/* Bytes of a tensor stored outside the model.  map is what the caller frees
 * with tbc_fe_external_release. */
typedef struct tbc_fe_external {
	const uint8_t *data;
	size_t size;
	void *map;
	size_t map_size;
} tbc_fe_external;

/* Resolves an EXTERNAL TensorProto's location/offset/length relative to
 * base_dir (the model's folder) with no absolute path, no '..', no symbolic
 * link on any component, and offset/length inside the file. */
tbc_code tbc_fe_external_load(const Onnx__TensorProto *tp, const char *base_dir, const char *file,
			      tbc_diags *diags, tbc_fe_external *out);
void tbc_fe_external_release(tbc_fe_external *e);

/* ---- tensor_proto.c ------------------------------------------------------ */
/* Decodes a TensorProto into a new heap tensor (sub-byte types unpacked to
 * one element per byte).  base_dir NULL: external data is refused. */
tbc_code tbc_fe_tensor_from_proto(const Onnx__TensorProto *tp, const char *base_dir, const char *file,
				  tbc_diags *diags, tbc_tensor **out);
/* Densifies a SparseTensorProto. */
tbc_code tbc_fe_tensor_from_sparse(const Onnx__SparseTensorProto *sp, const char *base_dir,
				   const char *file, tbc_diags *diags, tbc_tensor **out);

/* ---- tensorfile.c -------------------------------------------------------- */
/* The bytes of a .npy or TensorProto .pb file (path names it in messages). */
tbc_code tbc_fe_tensor_parse(const char *path, const uint8_t *buf, size_t size, tbc_diags *diags,
			     tbc_tensor **out_tensor, char **out_name);

/* ---- load.c -------------------------------------------------------------- */
typedef struct tbc_fe_options {
	bool skip_infer; /* import and canonicalise only (unit tests) */
	/* The input buffer, malloc'd, handed over: freed as soon as protobuf-c
	 * has copied what it needs (the caller must not free it), so a large
	 * model is not held twice. */
	void *free_after_decode;
} tbc_fe_options;

/* The whole load: size limit, pre-scan, decode, import, canonicalise, infer. */
tbc_code tbc_fe_load(const void *data, size_t size, const char *base_dir, const char *display_name,
		     const tbc_fe_options *opt, tbc_diags *diags, tbc_module **out_module);

/* Reads a whole regular file of at most limit bytes (malloc'd). */
tbc_code tbc_fe_read_file(const char *path, size_t limit, tbc_diags *diags, uint8_t **out, size_t *out_size);

/* ---- import.c, node.c, function.c: importing graphs ----------------------- */
/* Names visible in one graph; a subgraph's scope has its enclosing graph's
 * scope as parent (inner names shadow outer ones). */
typedef struct tbc_fe_scope {
	struct tbc_fe_scope *parent;
	const char **keys;
	tbc_value **vals;
	size_t n, cap;
	/* Names produced by nodes of this graph not yet imported: an input found
	 * here is a cycle or a topological-order violation. */
	const char **later;
	size_t n_later, cap_later;
} tbc_fe_scope;

/* An attribute as seen by a node: its name and the proto holding its value
 * (which may come from a function call's caller after ref_attr_name). */
typedef struct tbc_fe_attr_ref {
	const char *name;
	const Onnx__AttributeProto *a;
} tbc_fe_attr_ref;

/* A model-local function and its default attributes (FunctionProto field 11,
 * attribute_proto, which the system's onnx.proto may not know yet). */
typedef struct tbc_fe_function {
	const Onnx__FunctionProto *proto;
	Onnx__AttributeProto **defaults;
	size_t n_defaults;
	int64_t opset; /* its ai.onnx opset, the model's when not given */
	bool active;   /* being inlined: a call now is recursion */
} tbc_fe_function;

/* The function call being inlined: attribute references resolve here. */
typedef struct tbc_fe_call {
	const struct tbc_fe_call *outer;
	tbc_fe_attr_ref *attrs;
	size_t n_attrs;
	const tbc_fe_function *fn;
	const char *prefix; /* prepended to the names of values the body defines */
} tbc_fe_call;

typedef struct tbc_fe {
	tbc_module *m;
	tbc_diags *diags;
	const char *file;
	const char *base_dir;
	int64_t opset; /* ai.onnx opset of the nodes being imported */
	int graph_depth;
	int call_depth;
	unsigned n_calls; /* for unique name prefixes */
	size_t n_inlined;  /* function-body nodes imported so far */
	size_t inlined_bytes; /* tensor bytes copied by inlining so far */
	tbc_fe_function *functions;
	size_t n_functions;
	const tbc_fe_call *call;
} tbc_fe;

/* Reports an error located at a node and/or tensor; returns false. */
bool tbc_fe_err(tbc_fe *cx, tbc_code code, const char *node, const char *op_type, const char *tensor,
		const char *fmt, ...) __attribute__((format(printf, 6, 7)));
#define TBC_FE_ERR tbc_fe_err

/* Bound in a function body's scope to a formal input the caller omitted:
 * a use of it in the body is an omitted input too. */
extern tbc_value tbc_fe_omitted;

void tbc_fe_scope_free(tbc_fe_scope *s);
tbc_value *tbc_fe_scope_lookup(const tbc_fe_scope *s, const char *name);
bool tbc_fe_scope_has_local(const tbc_fe_scope *s, const char *name);
bool tbc_fe_scope_put(tbc_fe_scope *s, const char *name, tbc_value *v);
bool tbc_fe_scope_is_later(const tbc_fe_scope *s, const char *name);
/* A value name under the current call's prefix, in the arena. */
const char *tbc_fe_value_name(tbc_fe *cx, const char *name);

/* Counts the bytes of a tensor a function body's node creates (nothing
 * outside function bodies); false after reporting when over the limit. */
bool tbc_fe_count_tensor(tbc_fe *cx, const tbc_tensor *t, const char *node, const char *op_type);

/* Imports gp's initializers, inputs, nodes and outputs into g. */
bool tbc_fe_import_graph(tbc_fe *cx, tbc_graph *g, const Onnx__GraphProto *gp, tbc_fe_scope *scope);
/* Imports one node (a Constant, a function call or an op) into g. */
bool tbc_fe_import_node(tbc_fe *cx, tbc_graph *g, tbc_fe_scope *scope, const Onnx__NodeProto *n);
/* Inlines a call of fn. */
bool tbc_fe_inline_call(tbc_fe *cx, tbc_graph *g, tbc_fe_scope *scope, const Onnx__NodeProto *n,
			tbc_fe_function *fn);
/* The model-local function a node calls, or NULL. */
tbc_fe_function *tbc_fe_find_function(tbc_fe *cx, const char *domain, const char *name);
/* Reads the default attributes of every function; false after reporting. */
bool tbc_fe_functions_init(tbc_fe *cx, const Onnx__ModelProto *mp);
void tbc_fe_functions_free(tbc_fe *cx);
/* Resolves a node's attribute list through the current call (ref_attr_name).
 * *out is malloc'd; unresolved references are dropped. */
bool tbc_fe_resolve_attrs(tbc_fe *cx, const Onnx__NodeProto *n, tbc_fe_attr_ref **out, size_t *n_out);

/* ---- canon.c ------------------------------------------------------------- */
/* The canonical op an ONNX op_type imports as (Upsample -> Resize, Scatter ->
 * ScatterElements, ...); TBC_OP_COUNT when there is none. */
tbc_opcode tbc_fe_canon_opcode(const char *op_type);
/* Rewrites op, just imported from an ONNX node of op_type at ai.onnx opset
 * `opset`, into the newest opset's form.  Reports to diags on failure. */
bool tbc_fe_canon_op(tbc_op *op, const char *op_type, int64_t opset, tbc_diags *diags);

#endif
