#!/bin/sh
# run.sh - memtrack's overhead benchmarks (`make bench` runs this).
#
#   bench/run.sh                      full suite: walltime + memory, all variants
#   bench/run.sh --smoke              each benchmark once, no statistics (CI)
#   bench/run.sh --only ls,dd --mode walltime --no-peers   one slice
#   bench/run.sh --compare old.json   run, then show the change per row
#   bench/run.sh --shard 2/3 [--mode walltime]   the 2nd of 3 disjoint parts
#   bench/run.sh --merge a.json b.json [--results OUT.json]   join shards
#   bench/run.sh --smoke --shard 1/2 --results s1.json   any run, to that file
#   bench/run.sh --shard 2/3 --list   the rows a run would measure
#   bench/run.sh --help               every option
#
# The benchmarks are listed in bench/benchmarks.toml.  Results go to
# build/bench-results/results.{md,json} (smoke.{md,json} with --smoke), or
# to --results FILE in every mode.  A whole run writes the rows' costs
# beside its results (costs.json); shards are balanced by that file when
# it is there, else by the committed bench/costs.json, which only
# --update-costs rewrites (a benchmark run leaves the checkout clean).
# Needs root (memtrack loads BPF), hyperfine, heaptrack, valgrind, GNU time
# and python3 >= 3.11: scripts/bootstrap.sh installs them.
set -e
cd "$(dirname "$0")/.."

# Whether the options run nothing (no root needed): --help, --merge, --list,
# and --compare of an existing --results file (no option that selects rows)
runs_nothing() {
	case " $* " in
	*" -h "* | *" --help "* | *" --merge "* | *" --list "*) return 0 ;;
	esac
	case " $* " in *" --compare "*) ;; *) return 1 ;; esac
	case " $* " in *" --results "*) ;; *) return 1 ;; esac
	case " $* " in
	*" --smoke "* | *" --shard "* | *" --only "* | *" --variant "* | *" --mode "* | *" --runs "* | *" --no-peers "*) return 1 ;;
	esac
	return 0
}
if runs_nothing "$@"; then
	exec python3 bench/bench.py "$@"
fi
if [ "$(id -u)" != 0 ]; then
	echo "bench: memtrack needs root to load its BPF programs; run: sudo $0 $*" >&2
	exit 1
fi
python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || {
	echo "bench: needs python3 >= 3.11 (for tomllib)" >&2
	exit 1
}
if [ ! -x build/memtrack ] || [ ! -x build/fixtures/alloc_pairs ]; then
	echo "bench: build/memtrack or build/fixtures/alloc_pairs missing; run make bench (or make all build/fixtures/alloc_pairs)" >&2
	exit 1
fi
exec python3 bench/bench.py "$@"
