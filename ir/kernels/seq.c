/* Kernels and shape rules of the seq family (rows of ir/ops.def). */
#include "kernels.h"

bool tbc_shape_RNN(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_RNN(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_GRU(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_GRU(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_LSTM(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_LSTM(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_Attention(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_Attention(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_LinearAttention(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_LinearAttention(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_RotaryEmbedding(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_DFT(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_DFT(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_STFT(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_STFT(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_BlackmanWindow(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_BlackmanWindow(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_HammingWindow(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_HammingWindow(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_HannWindow(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_HannWindow(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_MelWeightMatrix(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_MelWeightMatrix(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_NonMaxSuppression(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_NonMaxSuppression(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_TfIdfVectorizer(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_TfIdfVectorizer(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_If(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_If(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_Loop(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_Loop(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_Scan(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_Scan(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
