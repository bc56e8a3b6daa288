/* Helpers of the runtime's unit tests (tests/unit/test_runtime*.c). */
#ifndef RT_TEST_H
#define RT_TEST_H

#include <stdio.h>
#include <string.h>

#include "tbc/runtime.h"

#define RT_OK(expr)                                                                           \
	do {                                                                                  \
		tbcrt_status s_ = (expr);                                                     \
		if (s_.code != TBCRT_OK) fail_msg("%s -> %s: %s", #expr, tbcrt_code_name(s_.code), s_.message); \
	} while (0)

/* The call fails with code and a message containing text. */
#define RT_ERR(expr, want_code, text)                                                         \
	do {                                                                                  \
		tbcrt_status s_ = (expr);                                                     \
		if (s_.code != (want_code) || !strstr(s_.message, (text)))                    \
			fail_msg("%s -> %s \"%s\"; expected %s with \"%s\"", #expr, tbcrt_code_name(s_.code), s_.message, \
				 tbcrt_code_name(want_code), (text));                         \
	} while (0)

/* A context with that many threads (0: one per CPU). */
static inline tbcrt_context *rt_context(uint32_t threads) {
	tbcrt_context_options o;
	tbcrt_context_options_init(&o);
	o.thread_count = threads;
	tbcrt_context *c = NULL;
	RT_OK(tbcrt_context_create(&o, &c));
	return c;
}

static inline const char *rt_artifact(const char *name) {
	static char path[4096];
	snprintf(path, sizeof path, "%s/%s", TBCRT_ARTIFACT_DIR, name);
	return path;
}

#endif
