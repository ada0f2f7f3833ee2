#!/usr/bin/env python3
"""A complete persistent-mode executor (protocol v2) in Python.

Answers every task with its payload upper-cased, adds a label and an
annotation, and answers status "retry" for a payload starting with "busy".
Config: [executor] binary_path = "/path/to/echo.py", mode = "persistent"
"""
import json
import struct
import sys

stdin, stdout = sys.stdin.buffer, sys.stdout.buffer


def read_exact(n):
    buf = b""
    while len(buf) < n:
        chunk = stdin.read(n - len(buf))
        if not chunk:
            return None  # EOF
        buf += chunk
    return buf


def read_frame():
    prefix = read_exact(4)
    if prefix is None:
        return None, None
    (length,) = struct.unpack(">I", prefix)
    frame = read_exact(length)
    if frame is None:
        sys.exit("echo.py: stream ended inside a frame")
    header, _, body = frame.partition(b"\n")
    return json.loads(header), body


def write_frame(header, body=b""):
    # stdout carries frames only: print diagnostics to stderr.
    h = json.dumps(header).encode()
    stdout.write(struct.pack(">I", len(h) + 1 + len(body)) + h + b"\n" + body)
    stdout.flush()  # the worker waits for the whole frame


# Load models, open connections etc. here, then say ready.
write_frame({"type": "ready"})
while True:
    task, payload = read_frame()
    if task is None:
        break  # EOF on stdin: the worker is done with this process
    if payload.startswith(b"busy"):
        print("task %s: dependency busy" % task["task_id"], file=sys.stderr, flush=True)
        write_frame({"type": "result", "task_id": task["task_id"], "attempt": task["attempt"],
                     "status": "retry", "error": "dependency busy"})
        continue
    write_frame(
        {
            "type": "result",
            "task_id": task["task_id"],  # names the task answered (required)
            "attempt": task["attempt"],
            "status": "ok",
            "labels": {"handled_by": "echo.py"},
            "annotations": [{"kind": "echo.size", "payload": {"bytes": len(payload)}}],
        },
        payload.upper(),
    )
