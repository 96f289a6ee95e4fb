# SPDX-License-Identifier: MIT
"""The wait between rounds for the suite's own memtrack reapers; also run
as a script (hyperfine's --prepare of every round: machine.wait_reapers_argv),
so it imports os and time only."""
import os
import time

# Every command the suite runs has this in its environment: a reaper is the
# suite's own when its /proc/PID/environ (memtrack's, which it forked from)
# carries it.
# A round's --prepare (wait_reapers_argv) runs in a child: it finds the
# token its suite exported.
RUN_TOKEN = "MEMTRACK_BENCH_RUN=" + (os.environ.get("MEMTRACK_BENCH_RUN")
                                     or f"{os.getpid()}.{time.time_ns()}")


def wait_for_reapers(limit_s=10.0):
    """A finished memtrack leaves a memtrack-reaper closing its links and BPF
    objects (the kernel's grace periods): the next row waits for it, so it
    does not pay for the last one's teardown.  Only the suite's own reapers
    (RUN_TOKEN): on a shared machine another user's can live for a minute,
    asleep in the kernel, and waiting for them cost up to limit_s a row."""
    token = RUN_TOKEN.encode()
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        busy = False
        for pid in os.listdir("/proc"):
            try:
                with open(f"/proc/{pid}/stat", "rb") as f:  # comm may be any bytes
                    st = f.read()
                # comm in parentheses, then the state: a zombie has closed everything
                if b"(memtrack-reaper)" not in st or st[st.rindex(b")") + 2:][:1] == b"Z":
                    continue
                with open(f"/proc/{pid}/environ", "rb") as f:
                    busy = token in f.read().split(b"\0")
            except OSError:
                continue
            if busy:
                break
        if not busy:
            return
        time.sleep(0.05)


if __name__ == "__main__":
    wait_for_reapers()
