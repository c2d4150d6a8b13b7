"""The state a servant of a durable group keeps on disk (keep_state_in): the format of the C++
library's Servant::KeepStateIn (invocation/kept_state.h), and the calls kept with the state
(invocation/kept_call_log.h): the answers of the latest calls, so that a call resent across a
power cut is answered as it was, not executed again."""
import collections
import os

import api_pb2

KEPT_MAGIC = b"cohort-kept-state 2"
KEPT_MAGIC_V1 = b"cohort-kept-state 1"  # no calls
# The calls a servant keeps with its state: the latest, at most this many and bytes (as the C++
# library's, invocation/kept_state.h).
KEPT_CALLS_MAX = 4096
KEPT_CALLS_MAX_BYTES = 1 << 20


def read_kept_state(path, group):
    """(position, state, calls) kept in `path` for `group` (invocation/kept_state.h's format;
    calls: a serialized api_pb2.KeptCalls, empty in a file of version 1), or None when there is
    no file. ValueError naming the file if it is not this group's kept state."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    version1 = data.startswith(KEPT_MAGIC_V1 + b"\n")
    header_lines = 4 if version1 else 5
    parts = data.split(b"\n", header_lines)
    if parts[0] != KEPT_MAGIC and not version1:
        raise ValueError("kept state %r: not a servant's kept state (it starts %r)"
                         % (path, KEPT_MAGIC.decode()))
    try:
        assert len(parts) == header_lines + 1
        named = parts[1].split(b" ", 1)
        position = parts[2].split(b" ", 1)
        size = parts[3].split(b" ", 1)
        calls = [b"calls", b"0"] if version1 else parts[4].split(b" ", 1)
        assert named[0] == b"group" and position[0] == b"position" and size[0] == b"size"
        assert calls[0] == b"calls"
        named, position, size = named[1].decode(), int(position[1]), int(size[1])
        calls_size = int(calls[1])
    except (AssertionError, IndexError, ValueError, UnicodeDecodeError):
        raise ValueError("kept state %r: its header is damaged" % path)
    if named != group:
        raise ValueError("kept state %r: it is the state of group %r, not %r" % (path, named, group))
    body = parts[header_lines]
    if len(body) != size + calls_size:
        raise ValueError("kept state %r: it holds %d bytes of state and calls, its header says %d "
                         "and %d" % (path, len(body), size, calls_size))
    return position, body[:size], body[size:]


def write_kept_state(path, group, position, state, calls=b""):
    """Replaces the kept state durably: a temporary file, fsync, rename, fsync of the directory.
    `calls`: a serialized api_pb2.KeptCalls kept with it."""
    data = b"%s\ngroup %s\nposition %d\nsize %d\ncalls %d\n" % (
        KEPT_MAGIC, group.encode(), position, len(state), len(calls)) + state + calls
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, path)
    directory = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


class KeptCallLog:
    """The latest calls (api_pb2.KeptCall), oldest first, within KEPT_CALLS_MAX and
    KEPT_CALLS_MAX_BYTES."""

    def __init__(self):
        self._calls = collections.deque()
        self._bytes = 0

    def add(self, call):
        if not call.call:
            return
        self._calls.append(call)
        self._bytes += call.ByteSize()
        while len(self._calls) > KEPT_CALLS_MAX or (
                self._bytes > KEPT_CALLS_MAX_BYTES and len(self._calls) > 1):
            self._bytes -= self._calls.popleft().ByteSize()

    def replace(self, calls):
        """By the calls of an api_pb2.KeptCalls."""
        self._calls.clear()
        self._bytes = 0
        for call in calls.calls:
            self.add(call)

    def serialized(self):
        return api_pb2.KeptCalls(calls=self._calls).SerializeToString()
