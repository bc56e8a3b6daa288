/* External weights: a file named by the descriptor, relative to the
 * artifact's folder.  The name is untrusted, with the frontend's rules for
 * external data: not absolute, no '..' component, no symbolic link anywhere
 * on the way (each component is opened with openat(O_NOFOLLOW), so a link
 * swapped in after a check is refused too).  The file is mapped read-only,
 * must hold at least weights_size bytes, and their hash (XXH64 from ABI 7,
 * FNV-1a 64 before: include/tbc/abi.h) must be the descriptor's. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "tbc/abi_hash.h"

uint64_t tbcrt__fnv1a64(const void *data, uint64_t bytes) {
	const unsigned char *p = data;
	uint64_t h = 0xcbf29ce484222325ull;
	for (uint64_t i = 0; i < bytes; i++) {
		h ^= p[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

uint64_t tbcrt__weights_hash(uint32_t abi_version, const void *data, uint64_t bytes) {
	return abi_version >= 7 ? tbc_abi_xxh64(data, bytes) : tbcrt__fnv1a64(data, bytes);
}

const char *tbcrt__weights_hash_name(uint32_t abi_version) {
	return abi_version >= 7 ? "XXH64" : "FNV-1a 64";
}

static tbcrt_status open_inside(const char *dir, const char *file, int *out_fd) {
	*out_fd = -1;
	if (!*file) return tbcrt__err(TBCRT_ERR_INVALID_ARTIFACT, "the weights file name is empty");
	if (file[0] == '/' || file[0] == '\\')
		return tbcrt__err(TBCRT_ERR_INVALID_ARTIFACT, "weights file '%s' is an absolute path", file);
	size_t n = strlen(file);
	char path[TBCRT_MAX_NAME + 1];
	if (n > TBCRT_MAX_NAME) return tbcrt__err(TBCRT_ERR_INVALID_ARTIFACT, "weights file name is too long");
	memcpy(path, file, n + 1);
	for (char *p = path; *p; p++)
		if (*p == '\\') *p = '/';
	for (char *c = path; c;) {
		char *slash = strchr(c, '/');
		size_t len = slash ? (size_t)(slash - c) : strlen(c);
		if (len == 2 && c[0] == '.' && c[1] == '.')
			return tbcrt__err(TBCRT_ERR_INVALID_ARTIFACT, "weights file '%s' contains '..'", file);
		c = slash ? slash + 1 : NULL;
	}
	int d = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (d < 0) return tbcrt__err(TBCRT_ERR_IO, "cannot open the artifact's folder '%s': %s", dir, strerror(errno));
	tbcrt_status s = tbcrt__err(TBCRT_ERR_INVALID_ARTIFACT, "weights file '%s' names no file", file);
	char *save = NULL;
	for (char *comp = strtok_r(path, "/", &save); comp;) {
		char *next = strtok_r(NULL, "/", &save);
		if (!strcmp(comp, ".")) {
			comp = next;
			continue;
		}
		struct stat st;
		if (fstatat(d, comp, &st, AT_SYMLINK_NOFOLLOW) != 0) {
			s = tbcrt__err(errno == ENOENT ? TBCRT_ERR_INVALID_ARTIFACT : TBCRT_ERR_IO,
				       "weights file '%s' in '%s' cannot be opened: %s", file, dir, strerror(errno));
			break;
		}
		if (S_ISLNK(st.st_mode)) {
			s = tbcrt__err(TBCRT_ERR_INVALID_ARTIFACT, "weights file '%s': '%s' is a symbolic link", file, comp);
			break;
		}
		int fd = openat(d, comp, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | (next ? O_DIRECTORY : 0));
		if (fd < 0) {
			s = tbcrt__err(errno == ELOOP ? TBCRT_ERR_INVALID_ARTIFACT : TBCRT_ERR_IO,
				       "weights file '%s' cannot be opened: %s", file,
				       errno == ELOOP ? "a component is a symbolic link" : strerror(errno));
			break;
		}
		if (next) {
			close(d);
			d = fd;
			comp = next;
			continue;
		}
		if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
			s = tbcrt__err(TBCRT_ERR_INVALID_ARTIFACT, "weights file '%s' is not a regular file", file);
			close(fd);
			break;
		}
		*out_fd = fd;
		s = tbcrt__ok();
		break;
	}
	close(d);
	return s;
}

tbcrt_status tbcrt__weights_map(const char *dir, const char *file, uint64_t bytes, uint32_t abi_version, uint64_t hash,
				void **out_map, size_t *out_map_size) {
	*out_map = NULL;
	*out_map_size = 0;
	int fd;
	tbcrt_status s = open_inside(dir, file, &fd);
	if (s.code != TBCRT_OK) return s;
	struct stat st;
	if (fstat(fd, &st) != 0) {
		s = tbcrt__err(TBCRT_ERR_IO, "cannot stat weights file '%s': %s", file, strerror(errno));
	} else if ((uint64_t)st.st_size < bytes) {
		s = tbcrt__err(TBCRT_ERR_INVALID_ARTIFACT, "weights file '%s' holds %llu bytes; the artifact needs %llu", file,
			       (unsigned long long)st.st_size, (unsigned long long)bytes);
	} else if (bytes > SIZE_MAX) {
		s = tbcrt__err(TBCRT_ERR_LIMIT, "weights file '%s' is too large to map", file);
	} else if (bytes > 0) {
		void *m = mmap(NULL, (size_t)bytes, PROT_READ, MAP_PRIVATE, fd, 0);
		if (m == MAP_FAILED) {
			s = tbcrt__err(TBCRT_ERR_IO, "cannot map weights file '%s': %s", file, strerror(errno));
		} else if (tbcrt__weights_hash(abi_version, m, bytes) != hash) {
			munmap(m, (size_t)bytes);
			s = tbcrt__err(TBCRT_ERR_INVALID_ARTIFACT,
				       "weights file '%s' does not match the artifact (%s hash differs): it belongs to another build",
				       file, tbcrt__weights_hash_name(abi_version));
		} else {
			*out_map = m;
			*out_map_size = (size_t)bytes;
		}
	} else if (hash != tbcrt__weights_hash(abi_version, NULL, 0)) {
		s = tbcrt__err(TBCRT_ERR_INVALID_ARTIFACT, "weights hash (%s) does not match the artifact's 0 bytes of weights",
			       tbcrt__weights_hash_name(abi_version));
	}
	close(fd);
	return s;
}
