/* SPDX-License-Identifier: MIT */
/*
 * authority.h - which processes a recording may hold.
 *
 * memtrack run as plain root may record any process.  Under sudo, `attach`
 * records only what the invoking user could trace themselves: the rule of
 * the kernel's ptrace_may_access() with PTRACE_MODE_ATTACH_REALCREDS, read
 * from /proc: the target's real, effective and saved uid and gid are the
 * user's, it holds no capabilities (but in a user namespace the user owns),
 * its mm is dumpable (not setuid-gained, no prctl(PR_SET_DUMPABLE, 0)), and
 * Yama's ptrace_scope allows it (1: a descendant of the user's process that
 * ran sudo; 2 and 3: never, the user has no CAP_SYS_PTRACE).
 *
 * The rule is applied to the root before anything is loaded, to each
 * process of the running tree as it is found (one that fails is left out,
 * with its descendants), and again to each after it is tracked (so an exec
 * between the two checks is seen).  From then on the BPF side applies it at
 * every exec and undumpable prctl of the tree (proc.bpf.c owner_may_trace),
 * and a process that fails leaves the recording (a LEFT record).
 *
 * Nothing here prints; authority_explain() words a refusal in one line.
 *
 * THREAD NOTES: main only (before the pipeline starts).
 */
#ifndef MEMTRACK_AUTHORITY_H
#define MEMTRACK_AUTHORITY_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct authority {
	bool restricted;   /* false: any process (memtrack run as root without sudo) */
	uid_t uid;	   /* the invoking user (restricted) */
	gid_t gid;	   /* their primary group, SUDO_GID */
	int yama_scope;	   /* kernel.yama.ptrace_scope, -1 without Yama */
	pid_t invoker_pid; /* scope 1: the user's process that ran sudo, 0 if none found */
	bool daemon;	   /* for a client of memtrack daemon (authority_for_client): its wording */
};

enum authority_verdict {
	AUTH_OK,
	AUTH_GONE,	    /* no such process */
	AUTH_OTHER_USER,    /* its real uid or gid is not the user's */
	AUTH_SETID,	    /* its effective or saved uid or gid is not the user's: setid-gained */
	AUTH_CAPS,	    /* it holds capabilities the user lacks */
	AUTH_UNDUMPABLE,    /* its mm is not dumpable */
	AUTH_YAMA_RELATION, /* ptrace_scope 1: not a descendant of the user's process */
	AUTH_YAMA_ADMIN,    /* ptrace_scope 2 or 3: attaching needs CAP_SYS_PTRACE */
};

/* What the check read of the target, for the message. */
struct authority_creds {
	uid_t uid[3]; /* real, effective, saved */
	gid_t gid[3];
};

/*
 * Fills @a from the environment: restricted when memtrack is root run
 * through sudo (SUDO_UID/SUDO_GID, util/as_user.h), with Yama's scope and,
 * for scope 1, the invoking user's process found among memtrack's
 * ancestors.
 */
void authority_init(struct authority *a);

/*
 * Fills @a for a client of `memtrack daemon` (daemon/serve.c): the user
 * @uid/@gid its socket's peer credentials name (restricted unless root),
 * Yama's scope, and for scope 1 the client @client_pid as the tracer.
 */
void authority_for_client(struct authority *a, uid_t uid, gid_t gid, pid_t client_pid);

/* Whether @a (NULL: any process) lets @pid be recorded; @c (may be NULL) gets its ids. */
enum authority_verdict authority_check(const struct authority *a, pid_t pid,
				       struct authority_creds *c);

/*
 * One line (no "memtrack: ", no newline) into @buf saying why @pid may not
 * be recorded (@v from authority_check, @c its ids) and what to do.
 */
void authority_explain(const struct authority *a, pid_t pid, enum authority_verdict v,
		       const struct authority_creds *c, char *buf, size_t len);

#endif /* MEMTRACK_AUTHORITY_H */
