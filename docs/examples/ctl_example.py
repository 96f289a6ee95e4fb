# python3 ctl_example.py, run under: memtrack track --control PATH -- python3 ctl_example.py
import os
import socket

ctl = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
ctl.connect(os.environ["MEMTRACK_CONTROL"])
answers = ctl.makefile("rb")


def command(line):
    """Sends one command; returns once memtrack has carried it out."""
    ctl.sendall(line.encode() + b"\n")
    answer = answers.readline().decode().rstrip("\n")
    if answer != "ok":
        raise RuntimeError("memtrack: " + answer)


command("enable")
command("mark work")
data = [bytearray(1000) for _ in range(100)]   # the code to measure
command("disable")
ctl.close()
