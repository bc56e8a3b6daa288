/* Constant data as an ELF relocatable object of its own, written here
 * without LLVM: a model's weights (100 MB for ResNet-50) went through LLVM
 * as one constant, which copied them twice more and made them part of the
 * host module's code generation (docs/compile-time.md).  The object holds
 * one read-only section per blob, each with a hidden global symbol at its
 * start; the host module declares the symbols and the linker (or the JIT)
 * resolves them as any other object's.
 *
 * The layout is the System V gABI's: the ELF header, the sections' bytes,
 * then the section header table.  Sections: the null one, each blob's
 * .rodata.NAME (SHF_ALLOC, its alignment), an empty .note.GNU-stack (no
 * executable stack), .symtab, .strtab, .shstrtab. */
#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/cpu/cpu.h"

uint16_t cpu_elf_machine(const char *triple) {
	static const char *not_elf[] = {"apple", "darwin", "macos", "ios", "windows", "win32", "mingw", "cygwin"};
	for (size_t i = 0; i < sizeof not_elf / sizeof *not_elf; i++)
		if (strstr(triple, not_elf[i])) return 0;
	if (!strncmp(triple, "x86_64", 6)) return EM_X86_64;
	if (!strncmp(triple, "aarch64", 7)) return EM_AARCH64;
	return 0;
}

/* A growing byte buffer, for the small tables. */
typedef struct bytes {
	unsigned char *p;
	size_t n, cap;
	bool failed;
} bytes;

static void put(bytes *b, const void *data, size_t n) {
	if (b->failed) return;
	if (b->n + n > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		while (cap < b->n + n) cap *= 2;
		unsigned char *q = realloc(b->p, cap);
		if (!q) {
			b->failed = true;
			return;
		}
		b->p = q;
		b->cap = cap;
	}
	if (n) memcpy(b->p + b->n, data, n);
	b->n += n;
}

/* The offset name will have in a string table being built in s. */
static uint32_t str_add(bytes *s, const char *name) {
	uint32_t at = (uint32_t)s->n;
	put(s, name, strlen(name) + 1);
	return at;
}

static size_t align_up(size_t at, size_t align) {
	return (at + align - 1) / align * align;
}

/* The layout is computed first and the object allocated once, zeroed (the
 * padding), so a blob with fill writes its bytes straight into place: the
 * weights are written once, never copied (docs/compile-time.md). */
bool cpu_data_object(uint16_t machine, const cpu_data_blob *blobs, int n, void **out, size_t *out_size,
		     size_t *out_offsets) {
	*out = NULL;
	*out_size = 0;
	/* Section indices: 0 null, 1..n blobs, n+1 .note.GNU-stack, n+2
	 * .symtab, n+3 .strtab, n+4 .shstrtab. */
	int n_sec = n + 5;
	Elf64_Shdr *sh = calloc((size_t)n_sec, sizeof *sh);
	bytes shstr = {0}, str = {0}, sym = {0};
	if (!sh) return false;
	put(&shstr, "", 1);
	put(&str, "", 1);
	Elf64_Sym null_sym = {0};
	put(&sym, &null_sym, sizeof null_sym);
	Elf64_Ehdr eh = {0};
	memcpy(eh.e_ident, ELFMAG, SELFMAG);
	eh.e_ident[EI_CLASS] = ELFCLASS64;
	eh.e_ident[EI_DATA] = ELFDATA2LSB;
	eh.e_ident[EI_VERSION] = EV_CURRENT;
	eh.e_ident[EI_OSABI] = ELFOSABI_NONE;
	eh.e_type = ET_REL;
	eh.e_machine = machine;
	eh.e_version = EV_CURRENT;
	eh.e_ehsize = sizeof eh;
	eh.e_shentsize = sizeof(Elf64_Shdr);
	eh.e_shnum = (uint16_t)n_sec;
	eh.e_shstrndx = (uint16_t)(n + 4);
	size_t at = sizeof eh;
	for (int i = 0; i < n; i++) {
		char name[200];
		snprintf(name, sizeof name, ".rodata.%s", blobs[i].symbol);
		Elf64_Shdr *s = &sh[1 + i];
		s->sh_name = str_add(&shstr, name);
		s->sh_type = SHT_PROGBITS;
		s->sh_flags = SHF_ALLOC;
		s->sh_addralign = blobs[i].align;
		at = align_up(at, blobs[i].align);
		s->sh_offset = at;
		s->sh_size = blobs[i].size;
		at += blobs[i].size;
		Elf64_Sym y = {0};
		y.st_name = str_add(&str, blobs[i].symbol);
		y.st_info = ELF64_ST_INFO(STB_GLOBAL, STT_OBJECT);
		y.st_other = STV_HIDDEN;
		y.st_shndx = (uint16_t)(1 + i);
		y.st_size = blobs[i].size;
		put(&sym, &y, sizeof y);
	}
	Elf64_Shdr *note = &sh[n + 1];
	note->sh_name = str_add(&shstr, ".note.GNU-stack");
	note->sh_type = SHT_PROGBITS;
	note->sh_offset = at;
	note->sh_addralign = 1;
	Elf64_Shdr *symtab = &sh[n + 2], *strtab = &sh[n + 3], *shstrtab = &sh[n + 4];
	symtab->sh_name = str_add(&shstr, ".symtab");
	strtab->sh_name = str_add(&shstr, ".strtab");
	shstrtab->sh_name = str_add(&shstr, ".shstrtab");
	at = align_up(at, 8);
	symtab->sh_type = SHT_SYMTAB;
	symtab->sh_offset = at;
	symtab->sh_size = sym.n;
	symtab->sh_link = (uint32_t)(n + 3);
	symtab->sh_info = 1; /* the first global symbol: every one after the null one */
	symtab->sh_addralign = 8;
	symtab->sh_entsize = sizeof(Elf64_Sym);
	at += sym.n;
	strtab->sh_type = SHT_STRTAB;
	strtab->sh_offset = at;
	strtab->sh_size = str.n;
	strtab->sh_addralign = 1;
	at += str.n;
	shstrtab->sh_type = SHT_STRTAB;
	shstrtab->sh_offset = at;
	shstrtab->sh_size = shstr.n;
	shstrtab->sh_addralign = 1;
	at += shstr.n;
	at = align_up(at, 8);
	eh.e_shoff = at;
	size_t total = at + (size_t)n_sec * sizeof *sh;
	unsigned char *file = NULL;
	bool ok = !(sym.failed || str.failed || shstr.failed);
	if (ok) ok = (file = calloc(total, 1)) != NULL;
	if (ok) {
		memcpy(file, &eh, sizeof eh);
		for (int i = 0; i < n; i++) {
			unsigned char *dst = file + sh[1 + i].sh_offset;
			if (blobs[i].fill)
				blobs[i].fill(blobs[i].fill_ctx, dst);
			else if (blobs[i].size)
				memcpy(dst, blobs[i].data, blobs[i].size);
			if (out_offsets) out_offsets[i] = (size_t)sh[1 + i].sh_offset;
		}
		memcpy(file + symtab->sh_offset, sym.p, sym.n);
		memcpy(file + strtab->sh_offset, str.p, str.n);
		memcpy(file + shstrtab->sh_offset, shstr.p, shstr.n);
		memcpy(file + eh.e_shoff, sh, (size_t)n_sec * sizeof *sh);
	}
	free(sh);
	free(shstr.p);
	free(str.p);
	free(sym.p);
	if (!ok) return false;
	*out = file;
	*out_size = total;
	return true;
}
