/* Runs a libFuzzer harness over files without libFuzzer, so the inputs that
 * once crashed it (tests/fuzz/regressions/) are replayed by every ordinary
 * build and by the sanitizer build in CI. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <stdint.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path) {
	FILE *f = fopen(path, "rb");
	if (!f) return 1;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
	size_t got = buf && n > 0 ? fread(buf, 1, (size_t)n, f) : 0;
	fclose(f);
	if (!buf) return 1;
	LLVMFuzzerTestOneInput(buf, got);
	free(buf);
	printf("ok %s\n", path);
	return 0;
}

int main(int argc, char **argv) {
	LLVMFuzzerInitialize(&argc, &argv);
	int bad = 0;
	for (int i = 1; i < argc; i++) {
		struct stat st;
		if (stat(argv[i], &st) != 0) return 1;
		if (!S_ISDIR(st.st_mode)) {
			bad |= run_file(argv[i]);
			continue;
		}
		DIR *d = opendir(argv[i]);
		if (!d) return 1;
		for (struct dirent *e; (e = readdir(d));) {
			if (e->d_name[0] == '.') continue;
			char path[4096];
			snprintf(path, sizeof path, "%s/%s", argv[i], e->d_name);
			bad |= run_file(path);
		}
		closedir(d);
	}
	return bad;
}
