/* A look at a shared object before dlopen maps it.  dlopen trusts the file:
 * a truncated object maps segments past the end of the file, and touching
 * them raises SIGBUS inside the dynamic loader.  So we read the ELF header and
 * the program headers ourselves and refuse a file that is not an ELF shared
 * object for this machine, or whose segments or tables lie past its end. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

#if defined(__x86_64__)
#define HOST_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define HOST_MACHINE EM_AARCH64
#else
#define HOST_MACHINE EM_NONE
#endif

static const char *machine_name(unsigned m) {
	switch (m) {
	case EM_X86_64: return "x86-64";
	case EM_AARCH64: return "AArch64";
	case EM_386: return "i386";
	case EM_ARM: return "32-bit ARM";
	case EM_RISCV: return "RISC-V";
	case EM_PPC64: return "PowerPC 64";
	default: return "another machine";
	}
}

static bool read_at(int fd, void *buf, size_t n, uint64_t off) {
	size_t got = 0;
	while (got < n) {
		ssize_t r = pread(fd, (char *)buf + got, n - got, (off_t)(off + got));
		if (r < 0 && errno == EINTR) continue;
		if (r <= 0) return false;
		got += (size_t)r;
	}
	return true;
}

static tbcrt_status check(int fd, const char *path, uint64_t size) {
	Elf64_Ehdr eh;
	if (size < sizeof eh || !read_at(fd, &eh, sizeof eh, 0) || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0)
		return tbcrt__err(TBCRT_ERR_INVALID_ARTIFACT, "'%s' is not an ELF shared object%s", path,
				  size < sizeof eh ? " (too short)" : "");
	if (eh.e_ident[EI_CLASS] != ELFCLASS64)
		return tbcrt__err(TBCRT_ERR_UNSUPPORTED_TARGET, "'%s' is a 32-bit ELF object; this host runs 64-bit code", path);
	if (eh.e_ident[EI_DATA] != ELFDATA2LSB)
		return tbcrt__err(TBCRT_ERR_UNSUPPORTED_TARGET, "'%s' is a big-endian ELF object", path);
	if (eh.e_type != ET_DYN)
		return tbcrt__err(TBCRT_ERR_INVALID_ARTIFACT, "'%s' is an ELF %s, not a shared object%s", path,
				  eh.e_type == ET_REL ? "relocatable object" : eh.e_type == ET_EXEC ? "executable" : "file",
				  eh.e_type == ET_REL ? " (link a .o into the program and use tbcrt_model_from_descriptor)" : "");
	if (eh.e_machine != HOST_MACHINE)
		return tbcrt__err(TBCRT_ERR_UNSUPPORTED_TARGET, "'%s' holds code for %s; this host is %s", path,
				  machine_name(eh.e_machine), machine_name(HOST_MACHINE));
	if (eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum == 0 || eh.e_phnum > 4096 ||
	    eh.e_phoff > size || (uint64_t)eh.e_phnum * sizeof(Elf64_Phdr) > size - eh.e_phoff)
		return tbcrt__err(TBCRT_ERR_INVALID_ARTIFACT, "'%s' is truncated or corrupt: its program headers lie outside the file",
				  path);
	if (eh.e_shnum != 0 && (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shoff > size ||
				(uint64_t)eh.e_shnum * sizeof(Elf64_Shdr) > size - eh.e_shoff))
		return tbcrt__err(TBCRT_ERR_INVALID_ARTIFACT, "'%s' is truncated or corrupt: its section headers lie outside the file",
				  path);
	bool dynamic = false, load = false;
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		Elf64_Phdr ph;
		if (!read_at(fd, &ph, sizeof ph, eh.e_phoff + (uint64_t)i * sizeof ph))
			return tbcrt__err(TBCRT_ERR_IO, "'%s': cannot read program header %u", path, i);
		if (ph.p_type == PT_DYNAMIC) dynamic = true;
		if (ph.p_type == PT_LOAD) load = true;
		if (ph.p_filesz != 0 && (ph.p_offset > size || ph.p_filesz > size - ph.p_offset))
			return tbcrt__err(TBCRT_ERR_INVALID_ARTIFACT,
					  "'%s' is truncated: segment %u needs bytes [%llu, %llu) of a %llu-byte file", path, i,
					  (unsigned long long)ph.p_offset, (unsigned long long)(ph.p_offset + ph.p_filesz),
					  (unsigned long long)size);
		if (ph.p_filesz > ph.p_memsz)
			return tbcrt__err(TBCRT_ERR_INVALID_ARTIFACT, "'%s' is corrupt: segment %u is larger in the file than in memory",
					  path, i);
	}
	if (!load || !dynamic)
		return tbcrt__err(TBCRT_ERR_INVALID_ARTIFACT, "'%s' is corrupt: it has no %s segment", path,
				  load ? "dynamic" : "loadable");
	return tbcrt__ok();
}

tbcrt_status tbcrt__elf_precheck(const char *path) {
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) return tbcrt__err(TBCRT_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
	struct stat st;
	tbcrt_status s;
	if (fstat(fd, &st) != 0) s = tbcrt__err(TBCRT_ERR_IO, "cannot stat '%s': %s", path, strerror(errno));
	else if (!S_ISREG(st.st_mode)) s = tbcrt__err(TBCRT_ERR_IO, "'%s' is not a regular file", path);
	else s = check(fd, path, (uint64_t)st.st_size);
	close(fd);
	return s;
}
