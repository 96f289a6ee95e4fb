/* SPDX-License-Identifier: MIT */
/*
 * harness.h - the minimal test harness of the unit tests.
 *
 * A test is `static void test_x(void)` registered with RUN(test_x) in main().
 * Every check prints the expression and both values when it fails.  Each test
 * prints one line, "PASS name", "FAIL name" or, when it called SKIP(reason)
 * and failed no check, "SKIP name (reason)", which tests/run.sh counts (a skip
 * is never a pass); the binary exits 1 when any test failed.
 */
#ifndef MEMTRACK_HARNESS_H
#define MEMTRACK_HARNESS_H

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static int harness_failed_checks;   /* failed checks in the current test */
static int harness_failed_tests;    /* failed tests in this binary */
static const char *harness_skipped; /* why the current test could not run, or NULL */

/* The current test cannot run here: says why; the test returns after it. */
#define SKIP(reason) (harness_skipped = (reason))

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "  %s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
			harness_failed_checks++;                                                   \
		}                                                                                  \
	} while (0)

#define CHECK_EQ(a, b)                                                                        \
	do {                                                                                  \
		long long _a = (long long)(a), _b = (long long)(b);                           \
		if (_a != _b) {                                                               \
			fprintf(stderr, "  %s:%d: %s == %s failed: %lld != %lld\n", __FILE__, \
				__LINE__, #a, #b, _a, _b);                                    \
			harness_failed_checks++;                                              \
		}                                                                             \
	} while (0)

#define CHECK_U64(a, b)                                                                           \
	do {                                                                                      \
		uint64_t _a = (uint64_t)(a), _b = (uint64_t)(b);                                  \
		if (_a != _b) {                                                                   \
			fprintf(stderr, "  %s:%d: %s == %s failed: %" PRIu64 " != %" PRIu64 "\n", \
				__FILE__, __LINE__, #a, #b, _a, _b);                              \
			harness_failed_checks++;                                                  \
		}                                                                                 \
	} while (0)

#define CHECK_STR(a, b)                                                                           \
	do {                                                                                      \
		const char *_a = (a), *_b = (b);                                                  \
		if (!_a || !_b || strcmp(_a, _b)) {                                               \
			fprintf(stderr, "  %s:%d: %s == %s failed: \"%s\" != \"%s\"\n", __FILE__, \
				__LINE__, #a, #b, _a ? _a : "(null)", _b ? _b : "(null)");        \
			harness_failed_checks++;                                                  \
		}                                                                                 \
	} while (0)

#define RUN(fn)                                                                          \
	do {                                                                             \
		harness_failed_checks = 0;                                               \
		harness_skipped = NULL;                                                  \
		fn();                                                                    \
		if (harness_skipped && !harness_failed_checks)                           \
			printf("SKIP %s (%s)\n", #fn, harness_skipped);                  \
		else                                                                     \
			printf("%s %s\n", harness_failed_checks ? "FAIL" : "PASS", #fn); \
		fflush(stdout);                                                          \
		if (harness_failed_checks)                                               \
			harness_failed_tests++;                                          \
	} while (0)

/* Names a test that cannot run here without running it: "SKIP name (reason)". */
#define RUN_SKIPPED(fn, reason)                        \
	do {                                           \
		(void)(fn);                            \
		printf("SKIP %s (%s)\n", #fn, reason); \
		fflush(stdout);                        \
	} while (0)

#define HARNESS_EXIT() return harness_failed_tests ? 1 : 0

#endif /* MEMTRACK_HARNESS_H */
