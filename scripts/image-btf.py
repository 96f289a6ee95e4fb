#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""image-btf.py - copies the kernel's own BTF (its .BTF section) out of a
raw kernel Image, for `bpftool btf dump file OUT format c`.

Debian's arm64 vmlinuz is a raw Image (no ELF sections, and the package's
System.map is a placeholder), so the section is found by its header: the
BTF magic 0xeb9f, version 1, a 24-byte header, then the type and string
sections it describes, which must fit in the file and whose string section
starts and ends with a NUL.  The largest such blob is vmlinux's (a module's
BTF is not in the Image).

usage: scripts/image-btf.py IMAGE OUT
"""
import struct
import sys

HDR = struct.Struct("<HBBIIIII")  # magic, version, flags, hdr_len, type_off, type_len, str_off, str_len


def blobs(data):
    """(offset, length) of every well-formed BTF blob in @data."""
    at = data.find(b"\x9f\xeb\x01\x00\x18\x00\x00\x00")
    while at >= 0:
        if at + HDR.size <= len(data):
            _, _, _, hdr_len, type_off, type_len, str_off, str_len = HDR.unpack_from(data, at)
            end = at + hdr_len + str_off + str_len
            strs = at + hdr_len + str_off
            if (type_off + type_len <= str_off and str_len > 0 and end <= len(data)
                    and data[strs] == 0 and data[end - 1] == 0):
                yield at, end - at
        at = data.find(b"\x9f\xeb\x01\x00\x18\x00\x00\x00", at + 1)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: image-btf.py IMAGE OUT")
    with open(sys.argv[1], "rb") as f:
        data = f.read()
    found = max(blobs(data), key=lambda b: b[1], default=None)
    if found is None:
        sys.exit("image-btf.py: no BTF in %s (a kernel built without CONFIG_DEBUG_INFO_BTF?)" % sys.argv[1])
    with open(sys.argv[2], "wb") as f:
        f.write(data[found[0]:found[0] + found[1]])


if __name__ == "__main__":
    main()
