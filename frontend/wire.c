/* A pre-scan of the protobuf wire format.  protobuf-c's unpacker recurses
 * once per nested message, so a model that nests graphs (or type protos)
 * deeply enough would overflow the C stack inside protobuf-c.  Before
 * protobuf-c sees the bytes we walk them along every path where messages can
 * nest without bound (graph -> node -> attribute -> graph, type proto ->
 * sequence -> type proto, ...), with explicit depth limits, and check that
 * every tag, varint and length is well formed and inside its parent. */
#include <string.h>

#include "frontend.h"

typedef enum kind {
	K_NONE, /* a message we need not descend into */
	K_MODEL,
	K_GRAPH,
	K_NODE,
	K_ATTR,
	K_FUNCTION,
	K_VALUEINFO,
	K_TYPE,
	K_TYPE_SEQ, /* Sequence, Optional: elem_type = 1 */
	K_TYPE_MAP, /* Map: value_type = 2 */
	K_TRAINING,
	K_TENSOR
} kind;

/* The message kind of field `field` of a message of kind k. */
static kind child_kind(kind k, uint32_t field) {
	switch (k) {
	case K_MODEL: return field == 7 ? K_GRAPH : field == 25 ? K_FUNCTION : field == 20 ? K_TRAINING : K_NONE;
	case K_TRAINING: return field == 1 || field == 2 ? K_GRAPH : K_NONE;
	case K_GRAPH:
		return field == 1 ? K_NODE : (field == 11 || field == 12 || field == 13) ? K_VALUEINFO : K_NONE;
	case K_NODE: return field == 5 ? K_ATTR : K_NONE;
	case K_FUNCTION: return field == 7 ? K_NODE : field == 11 ? K_ATTR : field == 12 ? K_VALUEINFO : K_NONE;
	case K_ATTR:
		return (field == 6 || field == 11) ? K_GRAPH : (field == 14 || field == 15) ? K_TYPE : K_NONE;
	case K_VALUEINFO: return field == 2 ? K_TYPE : K_NONE;
	case K_TYPE: return (field == 4 || field == 9) ? K_TYPE_SEQ : field == 5 ? K_TYPE_MAP : K_NONE;
	case K_TYPE_SEQ: return field == 1 ? K_TYPE : K_NONE;
	case K_TYPE_MAP: return field == 2 ? K_TYPE : K_NONE;
	default: return K_NONE;
	}
}

typedef struct scan {
	const char *file;
	tbc_diags *diags;
	const char *what; /* set on failure */
} scan;

static bool varint(const uint8_t **p, const uint8_t *end, uint64_t *out) {
	uint64_t v = 0;
	for (int shift = 0; shift < 64; shift += 7) {
		if (*p >= end) return false;
		uint8_t b = *(*p)++;
		v |= (uint64_t)(b & 0x7F) << shift;
		if (!(b & 0x80)) {
			*out = v;
			return true;
		}
	}
	return false;
}

static bool walk(scan *s, const uint8_t *p, const uint8_t *end, kind k, int depth, int graphs, int types) {
	if (depth > TBC_MAX_WIRE_DEPTH) {
		s->what = "messages are nested too deeply";
		return false;
	}
	if (k == K_GRAPH && graphs > TBC_MAX_SUBGRAPH_DEPTH + 1) { /* the main graph is level 0 */
		s->what = "subgraphs are nested deeper than the limit";
		return false;
	}
	if (k == K_TYPE && types > TBC_MAX_TYPE_DEPTH) {
		s->what = "type protos are nested too deeply";
		return false;
	}
	while (p < end) {
		uint64_t tag, v;
		if (!varint(&p, end, &tag)) {
			s->what = "a field tag is truncated";
			return false;
		}
		uint64_t field = tag >> 3;
		if (field == 0 || field > 536870911u) {
			s->what = "a field number is invalid";
			return false;
		}
		switch (tag & 7) {
		case 0:
			if (!varint(&p, end, &v)) {
				s->what = "a varint is truncated or too long";
				return false;
			}
			break;
		case 1:
			if (end - p < 8) {
				s->what = "a 64-bit field is truncated";
				return false;
			}
			p += 8;
			break;
		case 5:
			if (end - p < 4) {
				s->what = "a 32-bit field is truncated";
				return false;
			}
			p += 4;
			break;
		case 2: {
			if (!varint(&p, end, &v) || v > (uint64_t)(end - p)) {
				s->what = "a length-delimited field runs past the end of its message";
				return false;
			}
			kind ck = child_kind(k, (uint32_t)field);
			if (ck != K_NONE &&
			    !walk(s, p, p + v, ck, depth + 1, graphs + (ck == K_GRAPH), types + (ck == K_TYPE)))
				return false;
			p += v;
			break;
		}
		default:
			s->what = "a field has an invalid wire type";
			return false;
		}
	}
	return true;
}

static bool prescan(const uint8_t *data, size_t size, kind k, const char *file, tbc_diags *diags) {
	scan s = {file, diags, NULL};
	if (walk(&s, data, data + size, k, 0, 0, 0)) return true;
	if (strstr(s.what, "nested"))
		tbc_diags_add(diags, TBC_ERR_UNSUPPORTED, file, NULL, NULL, NULL,
			      "%s (limits: %d subgraph levels, %d type levels, %d message levels)", s.what,
			      TBC_MAX_SUBGRAPH_DEPTH, TBC_MAX_TYPE_DEPTH, TBC_MAX_WIRE_DEPTH);
	else
		tbc_diags_add(diags, TBC_ERR_INVALID_MODEL, file, NULL, NULL, NULL, "not a valid ONNX protobuf: %s", s.what);
	return false;
}

bool tbc_fe_prescan_model(const uint8_t *data, size_t size, const char *file, tbc_diags *diags) {
	return prescan(data, size, K_MODEL, file, diags);
}

bool tbc_fe_prescan_tensor(const uint8_t *data, size_t size, const char *file, tbc_diags *diags) {
	return prescan(data, size, K_TENSOR, file, diags);
}
