/* Cubins (nvptx.h): the PTX of a cuda:sm_XX target assembled by the CUDA
 * toolkit's ptxas for exactly that architecture, so a GPU it runs on loads
 * machine code instead of JIT-compiling the PTX at a model's first load.
 *
 * ptxas runs as a subprocess in a temporary folder (kernels.ptx in,
 * kernels.cubin out, its messages captured in ptxas.err); nothing of the
 * folder's name reaches the cubin, so the same PTX gives the same bytes. */
#include "codegen/nvptx/nvptx.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "codegen/device/device_files.h"
#include "tbc/tbc.h"

extern char **environ;

bool tbc_nvptx_find_ptxas(const char *cuda_path, char *out, size_t size) {
	const char *dir = cuda_path && *cuda_path ? cuda_path : getenv("CUDA_PATH");
	if (!dir || !*dir) dir = "/usr/local/cuda";
	if ((size_t)snprintf(out, size, "%s/bin/ptxas", dir) >= size) return false;
	return access(out, X_OK) == 0;
}

bool tbc_nvptx_assemble(const char *ptxas, const char *arch, const void *ptx, size_t ptx_size, void **cubin,
			size_t *cubin_size, tbc_diags *d) {
	*cubin = NULL;
	*cubin_size = 0;
	const char *tmp = getenv("TMPDIR");
	if (!tmp || !*tmp) tmp = "/tmp";
	char dir[4096], in[4200], out[4200], err_path[4200], arch_opt[64];
	snprintf(dir, sizeof dir, "%s/tbc-ptxas-XXXXXX", tmp);
	if (!mkdtemp(dir)) {
		tbc_diags_add(d, TBC_ERR_IO, NULL, NULL, NULL, NULL, "cuda:%s: a temporary folder for ptxas in %s: %s", arch, tmp,
			      strerror(errno));
		return false;
	}
	snprintf(in, sizeof in, "%s/kernels.ptx", dir);
	snprintf(out, sizeof out, "%s/kernels.cubin", dir);
	snprintf(err_path, sizeof err_path, "%s/ptxas.err", dir);
	snprintf(arch_opt, sizeof arch_opt, "-arch=%s", arch);
	bool ok = tbc_dev_write_new_file(in, ptx, ptx_size);
	if (!ok) {
		tbc_diags_add(d, TBC_ERR_IO, NULL, NULL, NULL, NULL, "cuda:%s: writing %s for ptxas", arch, in);
	} else {
		char *argv[] = {(char *)ptxas, arch_opt, "-O3", "-o", out, in, NULL};
		int rc, status;
		ok = tbc_dev_run_tool(ptxas, argv, err_path, &rc, &status);
		if (!ok) {
			void *msg = NULL;
			size_t n = 0;
			if (rc || !tbc_dev_read_file(err_path, &msg, &n, 1 << 16)) msg = NULL;
			while (msg && n && (((char *)msg)[n - 1] == '\n' || ((char *)msg)[n - 1] == ' ')) ((char *)msg)[--n] = 0;
			char how[64];
			if (rc) snprintf(how, sizeof how, "could not run: %s", strerror(rc));
			else if (WIFEXITED(status)) snprintf(how, sizeof how, "exited with status %d", WEXITSTATUS(status));
			else snprintf(how, sizeof how, "was killed by signal %d", WIFSIGNALED(status) ? WTERMSIG(status) : 0);
			tbc_diags_add(d, TBC_ERR_INTERNAL, NULL, NULL, NULL, NULL,
				      "cuda:%s: assembling the PTX into a cubin: %s %s %s%s%.600s (--no-cubin ships the PTX alone)",
				      arch, ptxas, arch_opt, how, msg && *(char *)msg ? ": " : "", msg ? (char *)msg : "");
			free(msg);
		} else if (!tbc_dev_read_file(out, cubin, cubin_size, (size_t)1 << 31) || *cubin_size < 4 ||
			   memcmp(*cubin, "\177ELF", 4)) {
			free(*cubin);
			*cubin = NULL;
			*cubin_size = 0;
			ok = false;
			tbc_diags_add(d, TBC_ERR_IO, NULL, NULL, NULL, NULL, "cuda:%s: %s wrote no ELF cubin at %s", arch, ptxas, out);
		}
	}
	unlink(in);
	unlink(out);
	unlink(err_path);
	rmdir(dir);
	return ok;
}
