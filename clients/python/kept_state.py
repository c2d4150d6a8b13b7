"""The state a servant of a durable group keeps on disk (keep_state_in): the format of the C++
library's Servant::KeepStateIn (invocation/kept_state.h), and the calls kept with the state
(invocation/kept_call_log.h): the answers of the latest calls, so that a call resent across a
power cut is answered as it was, not executed again."""
import collections
import os

import api_pb2

KEPT_MAGIC = b"cohort-kept-state 3"
KEPT_MAGIC_V2 = b"cohort-kept-state 2"  # no view
KEPT_MAGIC_V1 = b"cohort-kept-state 1"  # no view, no calls
# The calls a servant keeps with its state: the latest, at most this many and bytes (as the C++
# library's, invocation/kept_state.h).
KEPT_CALLS_MAX = 4096
KEPT_CALLS_MAX_BYTES = 1 << 20


# What a file holds: view is the last view the state knew of (0 in files of version 1 and 2).
KeptState = collections.namedtuple("KeptState", "position state calls view")


def read_kept_state(path, group):
    """KeptState(position, state, calls, view) kept in `path` for `group`
    (invocation/kept_state.h's format; calls: a serialized api_pb2.KeptCalls, empty in a file of
    version 1), or None when there is no file. ValueError naming the file if it is not this
    group's kept state."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    version1 = data.startswith(KEPT_MAGIC_V1 + b"\n")
    version2 = data.startswith(KEPT_MAGIC_V2 + b"\n")
    header_lines = 4 if version1 else 5 if version2 else 6
    parts = data.split(b"\n", header_lines)
    if parts[0] != KEPT_MAGIC and not version1 and not version2:
        raise ValueError("kept state %r: not a servant's kept state (it starts %r)"
                         % (path, KEPT_MAGIC.decode()))
    try:
        assert len(parts) == header_lines + 1
        lines = [line.split(b" ", 1) for line in parts[1:header_lines]]
        if version1 or version2:
            lines.insert(2, [b"view", b"0"])
        if version1:
            lines.append([b"calls", b"0"])
        named, position, view, size, calls = lines
        assert named[0] == b"group" and position[0] == b"position" and view[0] == b"view"
        assert size[0] == b"size" and calls[0] == b"calls"
        named, position, view, size = named[1].decode(), int(position[1]), int(view[1]), int(size[1])
        calls_size = int(calls[1])
    except (AssertionError, IndexError, ValueError, UnicodeDecodeError):
        raise ValueError("kept state %r: its header is damaged" % path)
    if named != group:
        raise ValueError("kept state %r: it is the state of group %r, not %r" % (path, named, group))
    body = parts[header_lines]
    if len(body) != size + calls_size:
        raise ValueError("kept state %r: it holds %d bytes of state and calls, its header says %d "
                         "and %d" % (path, len(body), size, calls_size))
    return KeptState(position, body[:size], body[size:], view)


def write_kept_state(path, group, position, state, calls=b"", view=0):
    """Replaces the kept state durably: a temporary file, fsync, rename, fsync of the directory.
    `calls`: a serialized api_pb2.KeptCalls kept with it; `view`: the last view it knew of."""
    data = b"%s\ngroup %s\nposition %d\nview %d\nsize %d\ncalls %d\n" % (
        KEPT_MAGIC, group.encode(), position, view, len(state), len(calls)) + state + calls
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
