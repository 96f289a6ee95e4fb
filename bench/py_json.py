# SPDX-License-Identifier: MIT
"""py_json.py - the Python frames benchmark (issue 37): json.dumps of a
sizeable structure (2,000 records of nested dicts, lists and strings) in
a loop, as a Python service serializing its responses does: the whole
structure once a round, then page by page (8 records a page).  Each
dumps allocates its result and the encoder's buffers through malloc
(strings over pymalloc's 512 bytes), under a few Python frames: every
such allocation's stack carries them, which is what --no-python-frames
saves.

    python3 bench/py_json.py [ROUNDS]      (default 40)
"""
import json
import sys

PAGE = 8


def record(i):
    return {"id": i, "name": "user%d" % i, "tags": ["t%d" % (i % 7), "t%d" % (i % 11)],
            "score": i * 0.5, "active": i % 2 == 0,
            "address": {"street": "%d Main St" % i, "zip": "%05d" % i}}


def encode(data):
    return json.dumps(data)


def pages(data):
    return sum(len(encode(data[i:i + PAGE])) for i in range(0, len(data), PAGE))


def main(rounds):
    data = [record(i) for i in range(2000)]
    total = 0
    for _ in range(rounds):
        total += len(encode(data)) + pages(data)
    return total


if __name__ == "__main__":
    print(main(int(sys.argv[1]) if len(sys.argv) > 1 else 40))
