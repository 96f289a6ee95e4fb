// SPDX-License-Identifier: MIT
/* authority.c - which processes a recording may hold; see authority.h. */
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/nsfs.h>
#include "inspect/authority.h"
#include "util/as_user.h"

#define YAMA_SCOPE_PATH "/proc/sys/kernel/yama/ptrace_scope"

/* What /proc/PID/status says of a process's ids, capabilities and parent. */
struct proc_ids {
	uid_t uid[3];		 /* real, effective, saved */
	gid_t gid[3];		 /* real, effective, saved */
	unsigned long long caps; /* CapPrm */
	pid_t ppid;
};

/* Reads @pid's status; returns 0 or -errno (-ENOENT: gone, -EINVAL: unreadable). */
static int read_ids(pid_t pid, struct proc_ids *ids)
{
	char path[32], line[256];
	unsigned long u[3], g[3];
	int found = 0;
	FILE *f;

	*ids = (struct proc_ids){ 0 };
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return errno == ESRCH || !errno ? -ENOENT : -errno;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "Uid: %lu %lu %lu", &u[0], &u[1], &u[2]) == 3)
			found |= 1;
		else if (sscanf(line, "Gid: %lu %lu %lu", &g[0], &g[1], &g[2]) == 3)
			found |= 2;
		else if (sscanf(line, "CapPrm: %llx", &ids->caps) == 1)
			found |= 4;
		else if (sscanf(line, "PPid: %d", &ids->ppid) == 1)
			found |= 8;
	}
	fclose(f);
	if (found != 15)
		return -EINVAL;
	for (int i = 0; i < 3; i++) {
		ids->uid[i] = u[i];
		ids->gid[i] = g[i];
	}
	return 0;
}

/*
 * Whether @pid's capabilities are ones the user holds anyway: those of a
 * user namespace the user owns (as the kernel's cap_ptrace_access_check
 * allows: the user is capable in it).  Capabilities in memtrack's own
 * namespace, the initial one, the user lacks.
 */
static bool caps_in_owned_ns(pid_t pid, uid_t uid)
{
	char path[40];
	struct stat self, st;
	uid_t owner;
	bool ok = false;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	if (!stat("/proc/self/ns/user", &self) && !fstat(fd, &st) && st.st_ino != self.st_ino &&
	    !ioctl(fd, NS_GET_OWNER_UID, &owner))
		ok = owner == uid;
	close(fd);
	return ok;
}

/*
 * Whether @pid's mm is dumpable: /proc/PID/stat is owned by its effective uid
 * when it is, by root when it is not (the kernel's task_dump_owner()), and
 * the user is not root.
 */
static bool dumpable_for(pid_t pid, uid_t uid)
{
	char path[40];
	struct stat st;

	/*
	 * A file of it, not /proc/PID itself: task_dump_owner() (fs/proc/base.c)
	 * gives a non-dumpable process's files to root but leaves the directory
	 * (mode 0555) its owner's, so its stat says nothing of dumpability.
	 */
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	return !stat(path, &st) && st.st_uid == uid;
}

/* Whether @pid is @ancestor or one of its descendants (parent chain, at most 4096 up). */
static bool descends_from(pid_t pid, pid_t ancestor)
{
	struct proc_ids ids;

	for (int i = 0; i < 4096 && pid > 1; i++) {
		if (pid == ancestor)
			return true;
		if (read_ids(pid, &ids))
			return false;
		pid = ids.ppid;
	}
	return pid == ancestor;
}

/* The user's nearest ancestor of memtrack running entirely as them: the shell that ran sudo. */
static pid_t find_invoker(uid_t uid)
{
	struct proc_ids ids;
	pid_t pid = getppid();

	for (int i = 0; i < 4096 && pid > 1; i++) {
		if (read_ids(pid, &ids))
			return 0;
		if (ids.uid[0] == uid && ids.uid[1] == uid && ids.uid[2] == uid)
			return pid;
		pid = ids.ppid;
	}
	return 0;
}

static int read_yama_scope(void)
{
	FILE *f = fopen(YAMA_SCOPE_PATH, "re");
	int scope = -1;

	if (!f)
		return -1;
	if (fscanf(f, "%d", &scope) != 1)
		scope = 3; /* unreadable: as strict as it gets */
	fclose(f);
	return scope;
}

void authority_init(struct authority *a)
{
	*a = (struct authority){ .yama_scope = -1 };
	a->restricted = sudo_invoker(&a->uid, &a->gid);
	if (!a->restricted)
		return;
	a->yama_scope = read_yama_scope();
	if (a->yama_scope == 1)
		a->invoker_pid = find_invoker(a->uid);
}

void authority_for_client(struct authority *a, uid_t uid, gid_t gid, pid_t client_pid)
{
	*a = (struct authority){
		.restricted = uid != 0, .uid = uid, .gid = gid, .yama_scope = -1, .daemon = true
	};
	if (!a->restricted)
		return;
	a->yama_scope = read_yama_scope();
	if (a->yama_scope == 1)
		a->invoker_pid = client_pid;
}

enum authority_verdict authority_check(const struct authority *a, pid_t pid,
				       struct authority_creds *c)
{
	struct proc_ids ids;
	int err;

	if (!a || !a->restricted)
		return AUTH_OK;
	err = read_ids(pid, &ids);
	if (err)
		return err == -ENOENT ? AUTH_GONE : AUTH_OTHER_USER;
	if (c) {
		memcpy(c->uid, ids.uid, sizeof(c->uid));
		memcpy(c->gid, ids.gid, sizeof(c->gid));
	}
	if (ids.uid[0] != a->uid || ids.gid[0] != a->gid)
		return AUTH_OTHER_USER;
	for (int i = 1; i < 3; i++)
		if (ids.uid[i] != a->uid || ids.gid[i] != a->gid)
			return AUTH_SETID;
	if (ids.caps && !caps_in_owned_ns(pid, a->uid))
		return AUTH_CAPS;
	if (!dumpable_for(pid, a->uid))
		return AUTH_UNDUMPABLE;
	if (a->yama_scope >= 2)
		return AUTH_YAMA_ADMIN;
	if (a->yama_scope == 1 && !(a->invoker_pid && descends_from(pid, a->invoker_pid)))
		return AUTH_YAMA_RELATION;
	return AUTH_OK;
}

/* "root (uid 0)" or "uid 1234" into @buf. */
static const char *user_name(uid_t uid, char *buf, size_t len)
{
	struct passwd *pw = getpwuid(uid);

	if (pw)
		snprintf(buf, len, "%s (uid %u)", pw->pw_name, (unsigned)uid);
	else
		snprintf(buf, len, "uid %u", (unsigned)uid);
	return buf;
}

void authority_explain(const struct authority *a, pid_t pid, enum authority_verdict v,
		       const struct authority_creds *c, char *buf, size_t len)
{
	/* the same rule, asked of sudo or of the daemon (authority_for_client) */
	const char *fix = a->daemon ? "run memtrack as root with --no-daemon to record it"
				    : "run memtrack as root without sudo to record it";
	const char *asked = a->daemon ? "who asked the daemon: through the daemon, memtrack"
				      : "who ran sudo: under sudo, memtrack attach";
	const char *rule =
		a->daemon ? "through the daemon, memtrack" : "under sudo, memtrack attach";
	const char *tracer = a->daemon ? "process" : "shell";
	char owner[96], user[96];

	user_name(a->uid, user, sizeof(user));
	user_name(c->uid[1], owner, sizeof(owner));
	switch (v) {
	case AUTH_OK: snprintf(buf, len, "process %d may be recorded", (int)pid); break;
	case AUTH_GONE:
		snprintf(buf, len, "no process %d; give the PID of a running process", (int)pid);
		break;
	case AUTH_OTHER_USER:
		snprintf(
			buf, len,
			"process %d belongs to %s, not to %s %s records only processes the invoking user could trace (ptrace's rule: real, effective and saved uid and gid theirs); %s",
			(int)pid, owner, user, asked, fix);
		break;
	case AUTH_SETID:
		snprintf(
			buf, len,
			"process %d runs with privileges it gained (effective uid %u, saved %u, gids %u/%u/%u: a setuid or setgid program), which %s could not trace: %s follows ptrace's rule; %s",
			(int)pid, (unsigned)c->uid[1], (unsigned)c->uid[2], (unsigned)c->gid[0],
			(unsigned)c->gid[1], (unsigned)c->gid[2], user, rule, fix);
		break;
	case AUTH_CAPS:
		snprintf(
			buf, len,
			"process %d holds capabilities %s lacks (file capabilities or inherited ones), so they could not trace it: %s follows ptrace's rule; %s",
			(int)pid, user, rule, fix);
		break;
	case AUTH_UNDUMPABLE:
		snprintf(
			buf, len,
			"process %d is not dumpable (it gained privileges at an exec or called prctl(PR_SET_DUMPABLE, 0)), so %s could not trace it: %s follows ptrace's rule; %s",
			(int)pid, user, rule, fix);
		break;
	case AUTH_YAMA_RELATION:
		snprintf(
			buf, len,
			"Yama's ptrace_scope is 1 and process %d does not descend from the %s of %s that %s, so they could not trace it; start it from that %s, or %s",
			(int)pid, tracer, user, a->daemon ? "asked the daemon" : "ran sudo", tracer,
			fix);
		break;
	case AUTH_YAMA_ADMIN:
		snprintf(buf, len,
			 "Yama's ptrace_scope is %d: %s may trace process %d, and %s may not; %s",
			 a->yama_scope,
			 a->yama_scope == 2 ? "only a process with CAP_SYS_PTRACE" : "no process",
			 (int)pid, user, fix);
		break;
	}
}
