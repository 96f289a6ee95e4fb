// SPDX-License-Identifier: MIT
/*
 * test_symbolize.c - symbolize.c and symcache.c on programs compiled here
 * with -g: expected addresses come from `nm`, expected lines from the
 * sources below; a stripped copy finds its separate debug file by build-id;
 * the cache answers without the ELF and is ignored once corrupted.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include "harness.h"
#include "analyze/symbolize.h"

/* line numbers matter: leaf is on line 2, inl on 3, outer on 4, main on 5 */
static const char c_src[] =
	"#include <stdlib.h>\n"
	"__attribute__((noinline)) void *leaf(unsigned n) { return malloc(n); }\n"
	"static inline __attribute__((always_inline)) void *inl(unsigned n) { return leaf(n); }\n"
	"__attribute__((noinline)) void *outer(unsigned n) { return inl(n + 1); }\n"
	"int main(void) { return outer(3) == 0; }\n";
static const char cc_src[] = "namespace ns {\n"
			     "__attribute__((noinline)) int twice(int x) { return 2 * x; }\n"
			     "}\n"
			     "int main(int argc, char **) { return ns::twice(argc); }\n";

static char dir[64];

static int run(const char *fmt, const char *a)
{
	char cmd[1024];

	snprintf(cmd, sizeof(cmd), fmt, a, a, a, a);
	return system(cmd);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

/* Address and size of @sym in @bin, from nm. */
static uint64_t nm_addr(const char *bin, const char *sym, uint64_t *size)
{
	char cmd[512], line[512], name[256];
	unsigned long long a = 0, s = 0, ra, rs;
	char type;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "nm -S %s 2>/dev/null", bin);
	p = popen(cmd, "r");
	while (p && fgets(line, sizeof(line), p))
		if (sscanf(line, "%llx %llx %c %255s", &ra, &rs, &type, name) == 4 &&
		    !strcmp(name, sym)) {
			a = ra;
			s = rs;
		}
	if (p)
		pclose(p);
	if (size)
		*size = s;
	return a;
}

/* The GNU build-id of @bin into @obj, from readelf. */
static void read_build_id(const char *bin, struct mt_object *obj)
{
	char cmd[512], line[512];
	FILE *p;

	snprintf(cmd, sizeof(cmd), "readelf -n %s", bin);
	p = popen(cmd, "r");
	obj->build_id_len = 0;
	while (p && fgets(line, sizeof(line), p)) {
		char *h = strstr(line, "Build ID: ");

		if (!h)
			continue;
		h += 10;
		for (unsigned v; obj->build_id_len < 20 && sscanf(h, "%2x", &v) == 1; h += 2)
			obj->build_id[obj->build_id_len++] = v;
	}
	if (p)
		pclose(p);
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = s ? strlen(s) : 0, m = strlen(suffix);

	return n >= m && !strcmp(s + n - m, suffix);
}

static char fx[128], fxx[128], stripped[128], linked[128], debugroot[128], cache[128];

static int build_fixtures(void)
{
	char path[160];

	snprintf(dir, sizeof(dir), "/tmp/mt-symXXXXXX");
	if (!mkdtemp(dir))
		return -1;
	snprintf(path, sizeof(path), "%s/fx.c", dir);
	write_file(path, c_src);
	snprintf(path, sizeof(path), "%s/fxx.cc", dir);
	write_file(path, cc_src);
	snprintf(fx, sizeof(fx), "%s/fx", dir);
	snprintf(fxx, sizeof(fxx), "%s/fxx", dir);
	snprintf(stripped, sizeof(stripped), "%s/fx.stripped", dir);
	snprintf(linked, sizeof(linked), "%s/fxl.stripped", dir);
	snprintf(debugroot, sizeof(debugroot), "%s/debug", dir);
	snprintf(cache, sizeof(cache), "%s/cache/memtrack", dir);
	if (run("cd %s && gcc -g -O0 -Wl,--build-id -o fx fx.c && g++ -g -O0 -o fxx fxx.cc", dir))
		return -1;
	/* no build-id: the debug file is found by the .gnu_debuglink beside the binary */
	if (run("cd %s && gcc -g -O0 -Wl,--build-id=none -o fxl fx.c && "
		"objcopy --only-keep-debug fxl fxl.debug && strip --strip-all -o fxl.stripped fxl && "
		"objcopy --add-gnu-debuglink=fxl.debug fxl.stripped",
		dir))
		return -1;
	/* Debian's layout: the stripped file, its debug file under .build-id/xx/rest.debug */
	return run(
		"cd %s && B=$(readelf -n fx | sed -n 's/.*Build ID: //p') && "
		"mkdir -p debug/.build-id/$(echo $B | cut -c1-2) && "
		"objcopy --only-keep-debug fx debug/.build-id/$(echo $B | cut -c1-2)/$(echo $B | cut -c3-).debug && "
		"strip --strip-all -o fx.stripped fx",
		dir);
}

static struct symbolizer *new_sym(const char *cachedir)
{
	char dp[200];
	struct symbolizer_opts o = { .cache_dir = cachedir, .debug_path = dp };

	snprintf(dp, sizeof(dp), ":.debug:%s", debugroot);
	return symbolizer__new(&o);
}

static void test_function_and_line(void)
{
	struct symbolizer *s = new_sym("");
	struct mt_object obj = { .id = 1, .path = fx };
	struct sym_result r;
	uint64_t leaf = nm_addr(fx, "leaf", NULL), main_ = nm_addr(fx, "main", NULL);

	read_build_id(fx, &obj);
	CHECK_EQ(obj.build_id_len, 20);
	CHECK(leaf != 0);
	CHECK_EQ(symbolizer__lookup(s, &obj, leaf + 4, &r), 0);
	CHECK_EQ(r.nframes, 1);
	CHECK_STR(r.frames[0].function, "leaf");
	CHECK(ends_with(r.frames[0].file, "/fx.c"));
	CHECK_EQ(r.frames[0].line, 2);
	CHECK_EQ(symbolizer__lookup(s, &obj, main_ + 4, &r), 0);
	CHECK_STR(r.frames[0].function, "main");
	CHECK_EQ(r.frames[0].line, 5);
	/* an address in no object: one frame, nothing known */
	CHECK_EQ(symbolizer__lookup(s, NULL, 0x7fff0000, &r), 0);
	CHECK_EQ(r.nframes, 1);
	CHECK(r.frames[0].function == NULL);
	symbolizer__free(s);
}

/* Some address of outer() lies in the inlined inl(): [inl fx.c:3, outer fx.c:4]. */
static void test_inlined(void)
{
	struct symbolizer *s = new_sym("");
	struct mt_object obj = { .id = 1, .path = fx };
	uint64_t size = 0, outer = nm_addr(fx, "outer", &size);
	int found = 0;

	read_build_id(fx, &obj);
	CHECK(size > 0);
	for (uint64_t a = outer; a < outer + size && !found; a++) {
		struct sym_result r;

		if (symbolizer__lookup(s, &obj, a, &r) || r.nframes != 2)
			continue;
		found = 1;
		CHECK_STR(r.frames[0].function, "inl");
		CHECK_EQ(r.frames[0].line, 3);
		CHECK_STR(r.frames[1].function, "outer");
		CHECK(ends_with(r.frames[1].file, "/fx.c"));
		CHECK_EQ(r.frames[1].line, 4);
	}
	CHECK_EQ(found, 1);
	symbolizer__free(s);
}

static void test_cxx_demangled(void)
{
	struct symbolizer *s = new_sym("");
	struct mt_object obj = { .id = 1, .path = fxx };
	uint64_t a = nm_addr(fxx, "_ZN2ns5twiceEi", NULL);
	struct sym_result r;

	CHECK(a != 0);
	CHECK_EQ(symbolizer__lookup(s, &obj, a + 4, &r), 0);
	CHECK_STR(r.frames[r.nframes - 1].function, "ns::twice(int)");
	CHECK_EQ(r.frames[r.nframes - 1].line, 2);
	symbolizer__free(s);
}

/* The stripped copy has no .symtab and no DWARF: both come from debug/.build-id/. */
static void test_separate_debug_file(void)
{
	struct symbolizer *s = new_sym("");
	struct mt_object obj = { .id = 1, .path = stripped };
	uint64_t leaf = nm_addr(fx, "leaf", NULL);
	struct sym_result r;

	read_build_id(stripped, &obj);
	CHECK_EQ(obj.build_id_len, 20);
	CHECK(nm_addr(stripped, "leaf", NULL) == 0); /* really stripped */
	CHECK_EQ(symbolizer__lookup(s, &obj, leaf + 4, &r), 0);
	CHECK_STR(r.frames[0].function, "leaf");
	CHECK_EQ(r.frames[0].line, 2);
	symbolizer__free(s);
}

/* No build-id at all: .gnu_debuglink names the debug file next to the binary. */
static void test_debuglink(void)
{
	struct symbolizer *s = new_sym("");
	struct mt_object obj = { .id = 1, .path = linked };
	char full[160];
	uint64_t leaf;
	struct sym_result r;

	snprintf(full, sizeof(full), "%s/fxl", dir);
	leaf = nm_addr(full, "leaf", NULL);
	CHECK(leaf != 0);
	CHECK(nm_addr(linked, "leaf", NULL) == 0);
	CHECK_EQ(symbolizer__lookup(s, &obj, leaf + 4, &r), 0);
	CHECK_STR(r.frames[0].function, "leaf");
	CHECK_EQ(r.frames[0].line, 2);
	symbolizer__free(s);
}

/* A recorded build-id the file no longer has: no names from the wrong file. */
static void test_changed_file(void)
{
	struct symbolizer *s = new_sym("");
	struct mt_object obj = { .id = 1, .path = fx },
			 missing = { .id = 2, .path = "/nonexistent/x" };
	uint64_t leaf = nm_addr(fx, "leaf", NULL);
	struct sym_result r;

	read_build_id(fxx, &obj); /* fxx's build-id, fx's path */
	CHECK_EQ(symbolizer__lookup(s, &obj, leaf + 4, &r), 0);
	CHECK_EQ(r.nframes, 1);
	CHECK_STR(r.frames[0].function, SYM_CHANGED);
	CHECK_EQ(symbolizer__lookup(s, &missing, 0x1000, &r), 0);
	CHECK(r.frames[0].function == NULL);
	symbolizer__free(s);
}

static void flip_middle_byte(const char *dirpath)
{
	char cmd[512];

	/* the cache directory holds one file: corrupt one byte in its middle */
	snprintf(cmd, sizeof(cmd),
		 "f=$(ls %s/*.syms) && n=$(stat -c %%s $f) && "
		 "printf 'Z' | dd of=$f bs=1 seek=$((n / 2)) conv=notrunc status=none",
		 dirpath);
	CHECK_EQ(system(cmd), 0);
}

/*
 * Resolved once, saved; a second symbolizer answers from the cache alone (the
 * object's path now names no file); a corrupt cache file is ignored; an
 * unwritable cache directory is no error.
 */
static void test_cache(void)
{
	struct mt_object obj = { .id = 1, .path = fx },
			 gone = { .id = 1, .path = "/nonexistent/fx" };
	uint64_t leaf = nm_addr(fx, "leaf", NULL);
	struct symbolizer *s = new_sym(cache);
	struct sym_result r;

	read_build_id(fx, &obj);
	memcpy(gone.build_id, obj.build_id, 20);
	gone.build_id_len = obj.build_id_len;
	CHECK_EQ(symbolizer__lookup(s, &obj, leaf + 4, &r), 0);
	symbolizer__save(s);
	symbolizer__free(s);

	s = new_sym(cache);
	CHECK_EQ(symbolizer__lookup(s, &gone, leaf + 4, &r), 0);
	CHECK_STR(r.frames[0].function, "leaf");
	CHECK(ends_with(r.frames[0].file, "/fx.c"));
	CHECK_EQ(r.frames[0].line, 2);
	/* not in the cache, and the file is gone: unknown */
	CHECK_EQ(symbolizer__lookup(s, &gone, leaf + 5, &r), 0);
	CHECK(r.frames[0].function == NULL);
	symbolizer__free(s);

	flip_middle_byte(cache);
	s = new_sym(cache);
	CHECK_EQ(symbolizer__lookup(s, &gone, leaf + 4, &r), 0);
	CHECK(r.frames[0].function == NULL);
	symbolizer__free(s);

	s = new_sym("/proc/memtrack-no-such-dir");
	CHECK_EQ(symbolizer__lookup(s, &obj, leaf + 4, &r), 0);
	CHECK_STR(r.frames[0].function, "leaf");
	symbolizer__save(s);
	symbolizer__free(s);
}

int main(void)
{
	if (build_fixtures()) {
		printf("FAIL build_fixtures (gcc, g++, objcopy, strip, readelf needed)\n");
		return 1;
	}
	RUN(test_function_and_line);
	RUN(test_inlined);
	RUN(test_cxx_demangled);
	RUN(test_separate_debug_file);
	RUN(test_debuglink);
	RUN(test_changed_file);
	RUN(test_cache);
	run("rm -rf %s", dir);
	HARNESS_EXIT();
}
