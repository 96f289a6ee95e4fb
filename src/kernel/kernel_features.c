// SPDX-License-Identifier: MIT
/*
 * kernel_features.c - probes the running kernel's BTF for what memtrack's
 * BPF side can use; see kernel_features.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <bpf/btf.h>
#include "kernel/kernel_features.h"

/* Per facility: its name, then the names of its mechanisms (KF_BEST, KF_FALLBACK). */
#define KF_X_NAMES(N, name, best, fallback) [KF_##N] = { name, best, fallback },
static const char *const names[KF_NFACILITIES][3] = { MT_KERNEL_FACILITIES(KF_X_NAMES) };
#undef KF_X_NAMES
_Static_assert((int)KF_NFACILITIES == (int)MT_KERNEL_NFACILITIES, "one list of facilities");

const char *kernel_features_facility(enum kf_facility f)
{
	return names[f][0];
}

const char *kernel_features_mech(const struct kernel_features *kf, enum kf_facility f)
{
	return names[f][1 + kf->mech[f]];
}

static bool has_func(const struct btf *btf, const char *name)
{
	return btf__find_by_name_kind(btf, name, BTF_KIND_FUNC) > 0;
}

/* Whether enum @type of the kernel's BTF has the enumerator @value. */
static bool has_enumerator(const struct btf *btf, const char *type, const char *value)
{
	int id = btf__find_by_name_kind(btf, type, BTF_KIND_ENUM);
	const struct btf_type *t = id > 0 ? btf__type_by_id(btf, id) : NULL;
	const struct btf_enum *e;

	if (!t)
		return false;
	e = btf_enum(t);
	for (unsigned i = 0; i < btf_vlen(t); i++)
		if (!strcmp(btf__name_by_offset(btf, e[i].name_off), value))
			return true;
	return false;
}

static const struct btf_type *skip_mods(const struct btf *btf, const struct btf_type *t)
{
	while (t && (btf_is_mod(t) || btf_is_typedef(t)))
		t = btf__type_by_id(btf, t->type);
	return t;
}

/*
 * Whether the member @member of struct or union @t, or of one of its
 * anonymous members (mm_struct's fields are in one), is an array.
 * @depth bounds the descent.
 */
static bool member_is_array_in(const struct btf *btf, const struct btf_type *t, const char *member,
			       int depth)
{
	const struct btf_member *m = btf_members(t);

	for (unsigned i = 0; i < btf_vlen(t); i++) {
		const struct btf_type *mt = skip_mods(btf, btf__type_by_id(btf, m[i].type));
		const char *name = btf__name_by_offset(btf, m[i].name_off);

		if (!mt)
			continue;
		if (name && !strcmp(name, member))
			return btf_is_array(mt);
		if ((!name || !*name) && btf_is_composite(mt) && depth > 0 &&
		    member_is_array_in(btf, mt, member, depth - 1))
			return true;
	}
	return false;
}

/* Whether struct @type's member @member is an array (else: a struct, or absent). */
static bool member_is_array(const struct btf *btf, const char *type, const char *member)
{
	int id = btf__find_by_name_kind(btf, type, BTF_KIND_STRUCT);
	const struct btf_type *t = id > 0 ? btf__type_by_id(btf, id) : NULL;

	return t && member_is_array_in(btf, t, member, 4);
}

/* The number of arguments of tracepoint @typedef_name (its BTF func proto, less the ctx). */
static int tracepoint_args(const struct btf *btf, const char *typedef_name)
{
	int id = btf__find_by_name_kind(btf, typedef_name, BTF_KIND_TYPEDEF);
	const struct btf_type *t = id > 0 ? btf__type_by_id(btf, id) : NULL;

	if (t) /* typedef -> pointer -> func proto */
		t = btf__type_by_id(btf, t->type);
	if (t && btf_is_ptr(t))
		t = btf__type_by_id(btf, t->type);
	return t && btf_is_func_proto(t) ? (int)btf_vlen(t) - 1 : -1;
}

/*
 * Whether MEMTRACK_FORCE_FALLBACKS (@force: "1" for every facility, or a
 * comma-separated list of facility names) forces facility @f.
 */
static bool forced(const char *force, enum kf_facility f)
{
	const char *name = kernel_features_facility(f);
	size_t len = strlen(name);

	if (!force || !*force)
		return false;
	if (!strcmp(force, "1"))
		return true;
	for (const char *p = force; p; p = strchr(p, ',')) {
		if (*p == ',')
			p++;
		if (!strncmp(p, name, len) && (p[len] == ',' || !p[len]))
			return true;
	}
	return false;
}

/* The mechanisms: the best one the kernel has, each fallback when forced. */
static void choose(struct kernel_features *kf, const char *force)
{
	bool best[KF_NFACILITIES] = {
		[KF_PARK] = kf->send_signal_task,
		[KF_RESUME] = kf->send_signal_task && kf->task_from_pid,
		[KF_UPROBES] = kf->uprobe_multi,
		[KF_RSS] = kf->rss_percpu,
		[KF_EXIT] = kf->exit_group_dead,
	};

	for (int f = 0; f < KF_NFACILITIES; f++) {
		/* the RSS layout is the kernel's: nothing to force */
		bool force_it = f != KF_RSS && forced(force, f);

		kf->mech[f] = best[f] && !force_it ? KF_BEST : KF_FALLBACK;
		kf->forced |= force_it;
	}
}

int kernel_features_probe(struct kernel_features *kf)
{
	const char *force = getenv("MEMTRACK_FORCE_FALLBACKS");
	struct utsname u;
	struct btf *btf;

	memset(kf, 0, sizeof(*kf));
	if (!uname(&u))
		snprintf(kf->release, sizeof(kf->release), "%s", u.release);
	btf = btf__load_vmlinux_btf();
	if (!btf) {
		choose(kf, force);
		return errno ? -errno : -ENOENT;
	}
	kf->btf = true;
	kf->bpf_loop = has_enumerator(btf, "bpf_func_id", "BPF_FUNC_loop");
	kf->send_signal_task = has_func(btf, "bpf_send_signal_task");
	kf->task_from_pid = has_func(btf, "bpf_task_from_pid") && has_func(btf, "bpf_task_release");
	kf->uprobe_multi = has_enumerator(btf, "bpf_attach_type", "BPF_TRACE_UPROBE_MULTI");
	kf->rss_percpu = member_is_array(btf, "mm_struct", "rss_stat");
	kf->exit_group_dead = tracepoint_args(btf, "btf_trace_sched_process_exit") >= 2;
	btf__free(btf);
	choose(kf, force);
	return 0;
}

void kernel_features_header(const struct kernel_features *kf, struct mt_header *h)
{
	for (int f = 0; f < KF_NFACILITIES; f++)
		snprintf(h->kernel_mech[f], sizeof(h->kernel_mech[f]), "%s",
			 kernel_features_mech(kf, f));
}

const char *kernel_features_below_floor(const struct kernel_features *kf, char *buf, size_t len)
{
	const char *missing = NULL, *since = NULL;

	if (!kf->btf) {
		missing = "BTF (/sys/kernel/btf/vmlinux: CONFIG_DEBUG_INFO_BTF=y)";
		since = "5.5";
	} else if (!kf->bpf_loop) {
		missing = "the BPF helper bpf_loop";
		since = "5.17";
	}
	if (!missing)
		return NULL;
	snprintf(
		buf, len,
		"this kernel (Linux %s) lacks %s, which came in Linux %s; memtrack needs Linux " MT_KERNEL_FLOOR
		" or newer",
		kf->release, missing, since);
	return buf;
}
