/* Files of the device backends (device_files.h). */
#include "codegen/device/device_files.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

bool tbc_dev_write_new_file(const char *path, const void *data, size_t n) {
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
	if (fd < 0) return false;
	const char *p = data;
	bool ok = true;
	while (n && ok) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR) continue;
		ok = w > 0;
		if (ok) p += w, n -= (size_t)w;
	}
	return close(fd) == 0 && ok;
}

bool tbc_dev_read_file(const char *path, void **data, size_t *size, size_t limit) {
	FILE *f = fopen(path, "rb");
	if (!f) return false;
	char *buf = NULL;
	size_t n = 0, cap = 0;
	bool ok = true;
	for (;;) {
		if (n == cap) {
			cap = cap ? cap * 2 : 65536;
			char *grown = cap <= limit + 1 ? realloc(buf, cap + 1) : NULL;
			if (!grown) {
				ok = false;
				break;
			}
			buf = grown;
		}
		size_t r = fread(buf + n, 1, cap - n, f);
		n += r;
		if (r == 0) break;
	}
	ok = ok && !ferror(f);
	fclose(f);
	if (!ok) {
		free(buf);
		return false;
	}
	buf[n] = 0;
	*data = buf;
	*size = n;
	return true;
}

bool tbc_dev_run_tool(const char *path, char *const argv[], const char *log_path, int *spawn_error, int *wait_status) {
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	posix_spawn_file_actions_adddup2(&fa, 1, 2);
	pid_t pid;
	int rc = posix_spawn(&pid, path, &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	int status = 0;
	if (rc == 0)
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
	*spawn_error = rc;
	*wait_status = status;
	return rc == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static bool executable(const char *path) { return access(path, X_OK) == 0; }

bool tbc_find_lld(char *out, size_t size) {
	const char *path = getenv("PATH");
	while (path && *path) {
		const char *colon = strchr(path, ':');
		size_t len = colon ? (size_t)(colon - path) : strlen(path);
		if (len && (size_t)snprintf(out, size, "%.*s/ld.lld-19", (int)len, path) < size && executable(out)) return true;
		path = colon ? colon + 1 : NULL;
	}
	snprintf(out, size, "/usr/bin/ld.lld-19");
	return executable(out);
}
