// SPDX-License-Identifier: MIT
/*
 * test_as_user.c - as_user.c run as itself (no SUDO_UID: the operations run
 * in this process, the bind in a child): which directory a path names, that
 * the last component is never followed, that a temporary file is new and
 * 0600, that a rename replaces a link rather than its target, and that a
 * bound socket is born 0600 whatever the umask, which stays as it was.
 * (Under sudo the same calls run as the invoker: tests/integration/
 * test_privilege.py.)
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include "util/as_user.h"
#include "harness.h"

static char dir[64];

static void path_of(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", dir, name);
}

static void test_open_dir(void)
{
	char p[128];
	const char *base;
	struct stat a, b;
	int fd;

	CHECK_EQ(as_user_open_dir("a/b/", &base), -EINVAL);
	CHECK_EQ(as_user_open_dir("", &base), -EINVAL);
	fd = as_user_open_dir("x", &base);
	CHECK(fd >= 0 && !strcmp(base, "x") && !fstat(fd, &a) && !stat(".", &b) &&
	      a.st_ino == b.st_ino);
	close(fd);
	fd = as_user_open_dir("/x", &base);
	CHECK(fd >= 0 && !strcmp(base, "x") && !fstat(fd, &a) && !stat("/", &b) &&
	      a.st_ino == b.st_ino);
	close(fd);
	/* a link in the directory part is followed as given */
	path_of(p, sizeof(p), "link");
	CHECK_EQ(symlink(dir, p), 0);
	path_of(p, sizeof(p), "link/file");
	fd = as_user_open_dir(p, &base);
	CHECK(fd >= 0 && !strcmp(base, "file") && !fstat(fd, &a) && !stat(dir, &b) &&
	      a.st_ino == b.st_ino);
	close(fd);
}

static void test_no_follow_and_rename(void)
{
	char templ[] = "art.XXXXXX", p[128];
	const char *base;
	int d, fd;
	struct stat st;

	path_of(p, sizeof(p), "target");
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	CHECK_EQ(write(fd, "keep", 4), 4);
	close(fd);
	path_of(p, sizeof(p), "out");
	CHECK_EQ(symlink("target", p), 0);
	d = as_user_open_dir(p, &base);
	CHECK(d >= 0);
	CHECK_EQ(as_user_openat(d, base, O_WRONLY | O_TRUNC, 0), -ELOOP);
	fd = as_user_mkstempat(d, templ, 0);
	CHECK(fd >= 0 && strcmp(templ, "art.XXXXXX") != 0);
	CHECK(!fstat(fd, &st) && (st.st_mode & 0777) == 0600 && S_ISREG(st.st_mode));
	CHECK_EQ(as_user_openat(d, templ, O_WRONLY | O_CREAT | O_EXCL, 0600), -EEXIST);
	close(fd);
	/* the link is replaced; the file it pointed at keeps its bytes */
	CHECK_EQ(as_user_renameat(d, templ, base), 0);
	CHECK(!fstatat(d, base, &st, AT_SYMLINK_NOFOLLOW) && S_ISREG(st.st_mode) &&
	      st.st_size == 0);
	CHECK(!fstatat(d, "target", &st, 0) && st.st_size == 4);
	CHECK_EQ(as_user_unlinkat(d, base), 0);
	CHECK_EQ(as_user_mkdirat(d, "sub", 0700), 0);
	CHECK(!fstatat(d, "sub", &st, 0) && S_ISDIR(st.st_mode));
	close(d);
}

/* Counts the directory's entries other than "." and "..". */
static int entries(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	int n = 0;

	while (d && (e = readdir(d)))
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	if (d)
		closedir(d);
	return n;
}

static void test_listen(void)
{
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0),
	    s2 = socket(AF_UNIX, SOCK_STREAM, 0), c = socket(AF_UNIX, SOCK_STREAM, 0), d;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	const char *base;
	char p[128], sub[128];
	struct stat st;
	mode_t old = umask(0);

	path_of(sub, sizeof(sub), "listen");
	CHECK_EQ(mkdir(sub, 0700), 0);
	path_of(p, sizeof(p), "listen/c.sock");
	d = as_user_open_dir(p, &base);
	CHECK(s >= 0 && s2 >= 0 && c >= 0 && d >= 0);
	CHECK_EQ(as_user_listenat(d, s, base, 4), 0);
	CHECK(!fstatat(d, base, &st, AT_SYMLINK_NOFOLLOW) && S_ISSOCK(st.st_mode) &&
	      (st.st_mode & 0777) == 0600);
	CHECK_EQ(umask(old), 0); /* memtrack's umask was never touched */
	/* listening the moment the name exists; no temporary name left */
	CHECK(strlen(p) < sizeof(sa.sun_path));
	memcpy(sa.sun_path, p, strlen(p) + 1);
	CHECK_EQ(connect(c, (struct sockaddr *)&sa, sizeof(sa)), 0);
	CHECK_EQ(entries(sub), 1);
	/* an existing name is never replaced, and the second try leaves nothing */
	CHECK_EQ(as_user_listenat(d, s2, base, 4), -EEXIST);
	CHECK_EQ(entries(sub), 1);
	close(c);
	close(s);
	close(s2);
	close(d);
}

int main(void)
{
	char cmd[128];

	unsetenv("SUDO_UID");
	snprintf(dir, sizeof(dir), "/tmp/test_as_user.XXXXXX");
	if (!mkdtemp(dir))
		return 1;
	RUN(test_open_dir);
	RUN(test_no_follow_and_rename);
	RUN(test_listen);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd)) {
		/* a scratch directory left in /tmp */
	}
	HARNESS_EXIT();
}
