/* External tensor data (TensorProto.data_location = EXTERNAL).  The location
 * is untrusted: it must stay inside the model's folder, so it may not be
 * absolute, may not contain a '..' component, and no component may be a
 * symbolic link.  We walk the path with openat(O_NOFOLLOW) one component at a
 * time, so a link swapped in after a check is still refused.  The bytes are
 * mapped read-only; offset and length are checked against the file size. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "frontend.h"

#define ERR(code, ...) (tbc_diags_add(diags, code, file, NULL, NULL, name, __VA_ARGS__), (code))

/* Strict unsigned decimal; false on anything else or overflow. */
static bool parse_u64(const char *s, uint64_t *out) {
	if (!s || !*s) return false;
	uint64_t v = 0;
	for (; *s; s++) {
		if (*s < '0' || *s > '9') return false;
		unsigned d = (unsigned)(*s - '0');
		if (v > (UINT64_MAX - d) / 10) return false;
		v = v * 10 + d;
	}
	*out = v;
	return true;
}

void tbc_fe_external_release(tbc_fe_external *e) {
	if (e->map) munmap(e->map, e->map_size);
	memset(e, 0, sizeof *e);
}

/* Opens location under base_dir one component at a time, refusing links.
 * Returns an fd of a regular file or -1 after reporting. */
static int open_inside(const char *base_dir, const char *location, const char *file, const char *name,
		       tbc_diags *diags, tbc_code *code) {
#define FAIL(c, ...) (*code = ERR(c, __VA_ARGS__))
	if (location[0] == '/' || location[0] == '\\') {
		FAIL(TBC_ERR_INVALID_MODEL, "external data location '%s' is an absolute path", location);
		return -1;
	}
	char *path = strdup(location);
	if (!path) {
		FAIL(TBC_ERR_NO_MEMORY, "out of memory");
		return -1;
	}
	for (char *p = path; *p; p++)
		if (*p == '\\') *p = '/';
	for (char *c = path; c;) {
		char *slash = strchr(c, '/');
		size_t len = slash ? (size_t)(slash - c) : strlen(c);
		if (len == 2 && c[0] == '.' && c[1] == '.') {
			FAIL(TBC_ERR_INVALID_MODEL, "external data location '%s' contains '..'", location);
			free(path);
			return -1;
		}
		c = slash ? slash + 1 : NULL;
	}
	int dir = open(base_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dir < 0) {
		FAIL(TBC_ERR_IO, "cannot open the model's folder '%s': %s", base_dir, strerror(errno));
		free(path);
		return -1;
	}
	int fd = -1;
	char *save = NULL;
	char *comp = strtok_r(path, "/", &save);
	if (!comp) FAIL(TBC_ERR_INVALID_MODEL, "external data location '%s' names no file", location);
	while (comp) {
		char *next = strtok_r(NULL, "/", &save);
		if (!strcmp(comp, ".")) {
			if (!next) FAIL(TBC_ERR_INVALID_MODEL, "external data location '%s' names no file", location);
			comp = next;
			continue;
		}
		struct stat st;
		if (fstatat(dir, comp, &st, AT_SYMLINK_NOFOLLOW) != 0) {
			FAIL(errno == ENOENT ? TBC_ERR_INVALID_MODEL : TBC_ERR_IO,
			    "external data file '%s' cannot be opened: %s", location, strerror(errno));
			break;
		}
		if (S_ISLNK(st.st_mode)) {
			FAIL(TBC_ERR_INVALID_MODEL, "external data location '%s': '%s' is a symbolic link", location, comp);
			break;
		}
		int flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | (next ? O_DIRECTORY : 0);
		int nfd = openat(dir, comp, flags);
		if (nfd < 0) {
			FAIL(errno == ELOOP ? TBC_ERR_INVALID_MODEL : TBC_ERR_IO, "external data file '%s' cannot be opened: %s",
			    location, errno == ELOOP ? "a component is a symbolic link" : strerror(errno));
			break;
		}
		if (next) {
			close(dir);
			dir = nfd;
			comp = next;
			continue;
		}
		if (fstat(nfd, &st) != 0 || !S_ISREG(st.st_mode)) {
			FAIL(TBC_ERR_INVALID_MODEL, "external data location '%s' is %s", location,
			    S_ISDIR(st.st_mode) ? "a directory" : "not a regular file");
			close(nfd);
			break;
		}
		fd = nfd;
		break;
	}
	close(dir);
	free(path);
	return fd;
#undef FAIL
}

tbc_code tbc_fe_external_load(const Onnx__TensorProto *tp, const char *base_dir, const char *file,
			      tbc_diags *diags, tbc_fe_external *out) {
	memset(out, 0, sizeof *out);
	const char *name = tp->name && *tp->name ? tp->name : NULL;
	const char *location = NULL, *offset_s = NULL, *length_s = NULL;
	for (size_t i = 0; i < tp->n_external_data; i++) {
		const Onnx__StringStringEntryProto *e = tp->external_data[i];
		const char *k = tbc_fe_str(e->key);
		if (!strcmp(k, "location")) location = tbc_fe_str(e->value);
		else if (!strcmp(k, "offset")) offset_s = tbc_fe_str(e->value);
		else if (!strcmp(k, "length")) length_s = tbc_fe_str(e->value);
	}
	if (!location || !*location) return ERR(TBC_ERR_INVALID_MODEL, "external data without a location");
	uint64_t offset = 0, length = 0;
	if (offset_s && !parse_u64(offset_s, &offset))
		return ERR(TBC_ERR_INVALID_MODEL, "external data offset '%s' is not a valid number", offset_s);
	if (length_s && !parse_u64(length_s, &length))
		return ERR(TBC_ERR_INVALID_MODEL, "external data length '%s' is not a valid number", length_s);
	tbc_code oc = TBC_ERR_IO;
	int fd = open_inside(base_dir, location, file, name, diags, &oc);
	if (fd < 0) return oc;
	struct stat st;
	tbc_code rc = TBC_OK;
	if (fstat(fd, &st) != 0) {
		rc = ERR(TBC_ERR_IO, "cannot stat external data file '%s'", location);
		goto out;
	}
	uint64_t fsize = (uint64_t)st.st_size;
	if (offset > fsize) {
		rc = ERR(TBC_ERR_INVALID_MODEL, "external data offset %llu is outside '%s' (%llu bytes)",
			 (unsigned long long)offset, location, (unsigned long long)fsize);
		goto out;
	}
	if (!length_s) length = fsize - offset;
	if (length > fsize - offset) {
		rc = ERR(TBC_ERR_INVALID_MODEL, "external data offset %llu + length %llu is outside '%s' (%llu bytes)",
			 (unsigned long long)offset, (unsigned long long)length, location, (unsigned long long)fsize);
		goto out;
	}
	if (length == 0) {
		static const uint8_t empty[1];
		out->data = empty;
		goto out;
	}
	long page = sysconf(_SC_PAGESIZE);
	uint64_t base = offset - offset % (uint64_t)(page > 0 ? page : 4096);
	size_t map_size = (size_t)(offset - base + length);
	void *map = mmap(NULL, map_size, PROT_READ, MAP_PRIVATE, fd, (off_t)base);
	if (map == MAP_FAILED) {
		rc = ERR(TBC_ERR_IO, "cannot map external data file '%s': %s", location, strerror(errno));
		goto out;
	}
	out->map = map;
	out->map_size = map_size;
	out->data = (const uint8_t *)map + (offset - base);
	out->size = (size_t)length;
out:
	close(fd);
	return rc;
}
