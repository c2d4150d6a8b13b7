"""A Cohort client and servant in Python, over the daemon's gRPC API (proto/api.proto).

The stubs (api_pb2.py, api_pb2_grpc.py) are generated from proto/api.proto by grpcio-tools:

    clients/python/generate.sh OUT_DIR      # then put OUT_DIR and this folder on PYTHONPATH

Usage:

    from cohort_client import CohortClient, Servant

    servant = Servant("127.0.0.1:7201", "counter", {"echo": lambda payload: payload},
                      get_state=lambda: b"...",  # state transfer to joiners (bytes), optional
                      set_state=lambda state: None,
                      rejoin_after_daemon_restart=True)  # outlives its daemon's restart
    servant.start()                              # deliveries arrive in total order, one at a time
    client = CohortClient("127.0.0.1:7201", "my-app")
    view = client.group_details("counter")       # view_id, members (name, node, suspected)
    reply = client.invoke("counter", "echo", b"hi", mode="majority")
    for r in reply.replies:                      # member, node, status_code, error, payload
        print(r.member, r.payload)

With TLS (a daemon's tls section), a bearer token (auth.tokens) and a client certificate
(auth.client_certificates), as the C++ ConnectOptions:

    client = CohortClient("cohort-0:7201", "my-app", ca_file="ca.pem", cert_file="app1.pem",
                          key_file="app1.key", token=None, server_name=None)
    Servant(address, group, handlers, ca_file=..., cert_file=..., key_file=..., token=...)

As the C++ library: a client attaches again when its daemon restarted (the daemon answers
"unknown NSO") and sends the refused request once more; a servant made with
rejoin_after_daemon_restart registers again by itself, its object first reset to its state at
start() (get_state then, set_state now), then given the group's state by transfer.
"""
import collections
import os
import queue
import threading
import time

import grpc

import api_pb2
import api_pb2_grpc
from kept_state import KeptCallLog, read_kept_state, write_kept_state  # noqa: F401 (re-exported)

MODES = {
    "default": api_pb2.MODE_UNSPECIFIED,
    "one_way": api_pb2.ONE_WAY,
    "first": api_pb2.WAIT_FIRST,
    "majority": api_pb2.WAIT_MAJORITY,
    "all": api_pb2.WAIT_ALL,
}

# A call's style (003 section 4): "closed" (to every member), "open" (through a request
# manager), "default" (the group's).
STYLES = {"default": api_pb2.STYLE_UNSPECIFIED, "open": api_pb2.OPEN, "closed": api_pb2.CLOSED}


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _connect(address, timeout, ca_file=None, cert_file=None, key_file=None, server_name=None):
    """Plaintext without a CA; with one, TLS checking the daemon's certificate (for server_name
    if given, else the address's host), presenting cert_file/key_file when given."""
    # A result holds a reply from each member, each up to the daemon's limits.max_payload_bytes
    # (4 MiB by default): grpcio's own 4 MiB receive bound would refuse one full-size reply.
    # Keepalive as the C++ client's (nso/keepalive.h): a vanished daemon is found in ~15 s.
    options = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1),
               ("grpc.keepalive_time_ms", 10000), ("grpc.keepalive_timeout_ms", 5000),
               ("grpc.keepalive_permit_without_calls", 1), ("grpc.http2.max_pings_without_data", 0)]
    if ca_file is None:
        if cert_file or key_file or server_name:
            raise ValueError("cert_file, key_file and server_name need ca_file (TLS)")
        channel = grpc.insecure_channel(address, options=options)
    else:
        if bool(cert_file) != bool(key_file):
            raise ValueError("cert_file and key_file go together")
        credentials = grpc.ssl_channel_credentials(
            root_certificates=_read(ca_file),
            private_key=_read(key_file) if key_file else None,
            certificate_chain=_read(cert_file) if cert_file else None)
        if server_name:
            options.append(("grpc.ssl_target_name_override", server_name))
        channel = grpc.secure_channel(address, credentials, options=options)
    grpc.channel_ready_future(channel).result(timeout=timeout)
    return channel


class CohortClient:
    """One application attached to a daemon: it gets its own NSO (NewTop service object)."""

    def __init__(self, address, client_name="python", timeout=5.0, ca_file=None, cert_file=None,
                 key_file=None, server_name=None, token=None, backpressure_wait=5.0):
        """backpressure_wait: seconds an invoke or multicast refused for backpressure (this
        client has limits.max_unordered_requests requests not yet ordered) waits for room and
        is sent again (an invoke: at most its deadline), as the C++ ConnectOptions; 0: raise
        RESOURCE_EXHAUSTED at once."""
        self._backpressure_wait = backpressure_wait
        self.channel = _connect(address, timeout, ca_file, cert_file, key_file, server_name)
        # The token goes with every call ("authorization: Bearer <token>"), TLS or not.
        self.metadata = [("authorization", "Bearer " + token)] if token else None
        self.stub = api_pb2_grpc.CohortStub(self.channel)
        self.admin = api_pb2_grpc.AdminStub(self.channel)
        self._client_name = client_name
        self._timeout = timeout
        self._attach_lock = threading.Lock()
        self._closed = False
        self.nso = 0
        self._attach()

    def _attach(self):
        reply = self.stub.Attach(api_pb2.AttachRequest(client_name=self._client_name),
                                 timeout=self._timeout, metadata=self.metadata)
        self.nso = reply.nso
        self.node_name = reply.node_name

    def _with_nso(self, call):
        """call(nso); when the daemon does not know the NSO (it restarted since the Attach, so it
        accepted nothing), attaches again and calls once more."""
        nso = self.nso
        try:
            return call(nso)
        except grpc.RpcError as error:
            if not _unknown_nso(error):
                raise
        self._attach_again(nso)
        return call(self.nso)

    def _attach_again(self, stale):
        """The daemon did not know NSO `stale`: a new one, unless another thread got it already."""
        with self._attach_lock:
            if self.nso == stale:
                self._attach()

    def group_details(self, group, timeout=5.0):
        return self._with_nso(lambda nso: self.stub.GroupDetails(
            api_pb2.GroupRequest(nso=nso, group=group), timeout=timeout, metadata=self.metadata))

    def watch_group(self, group, on_lost=None):
        """The group as this client's daemon sees it (WatchGroup): an iterator of
        GroupDetailsReply, the view now, then one after each change of the view or of the
        members suspected there. It follows the daemon through a restart (or to the next of
        several daemons): when the daemon goes (UNAVAILABLE), on_lost(error) is called if given,
        and the watch starts again every 0.05 to 1 s until a daemon answers; a view given again
        then is skipped. It raises grpc.RpcError when the first watch fails (NOT_FOUND: an
        unknown group) or when the watch ends (NOT_FOUND: the group was deleted); .cancel()
        ends it (the iteration stops)."""
        request = api_pb2.GroupRequest(nso=self.nso, group=group)
        return _GroupWatch(lambda: self.stub.WatchGroup(request, metadata=self.metadata), on_lost)

    def _invoke_request(self, nso, group, method, payload, mode, deadline_ms, style):
        if mode not in MODES:
            raise ValueError("mode %r: one of %s" % (mode, ", ".join(sorted(MODES))))
        if style not in STYLES:
            raise ValueError("style %r: one of %s" % (style, ", ".join(sorted(STYLES))))
        return api_pb2.InvokeRequest(nso=nso, group=group, method=method, payload=payload,
                                     mode=MODES[mode], deadline_ms=deadline_ms,
                                     style=STYLES[style])

    def invoke(self, group, method, payload, mode="default", deadline_ms=5000, style="default"):
        """Raises grpc.RpcError: NOT_FOUND (unknown group), UNAVAILABLE (too few members for
        the mode), DEADLINE_EXCEEDED (mode not met in time), INVALID_ARGUMENT,
        RESOURCE_EXHAUSTED (no room within backpressure_wait). style: "open", "closed" or
        "default" (the group's)."""
        start = time.monotonic()
        # A call's deadline covers its wait for room; a one-way call's runs from its acceptance.
        one_way = mode == "one_way"
        wait = self._backpressure_wait if one_way else min(self._backpressure_wait,
                                                           deadline_ms / 1000.0)

        def attempt():
            left_ms = deadline_ms if one_way else max(
                1, int(deadline_ms - (time.monotonic() - start) * 1000))
            return self._with_nso(lambda nso: self.stub.Invoke(
                self._invoke_request(nso, group, method, payload, mode, left_ms, style),
                timeout=left_ms / 1000.0 + 2, metadata=self.metadata))
        return _while_backlogged(start, wait, attempt)

    def invoke_future(self, group, method, payload, mode="default", deadline_ms=5000,
                      style="default"):
        """invoke without waiting: a future whose result() is the reply (or raises as invoke
        does); many may be in flight on the client's one channel."""
        future = self.stub.Invoke.future(
            self._invoke_request(self.nso, group, method, payload, mode, deadline_ms, style),
            timeout=deadline_ms / 1000.0 + 2, metadata=self.metadata)
        return _InvokeFuture(future, self.nso, self,
                             (group, method, payload, mode, deadline_ms, style))

    def create_group(self, group, members, ordering="", liveness="", style="", default_mode="",
                     acl=None, timeout=10.0, durable=False):
        """A group on every daemon at run time (daemons with dynamic_groups). acl: a dict of
        join/invoke/admin lists of application names (or "*"), as groups[].acl; None: no acl.
        durable: as groups[].durable (servants with keep_state_in). Raises grpc.RpcError:
        ALREADY_EXISTS, INVALID_ARGUMENT (names the bad key), FAILED_PRECONDITION (durable, and
        the daemon has no incarnation_file), UNAVAILABLE."""
        def create(nso):
            request = api_pb2.CreateGroupRequest(
                nso=nso, group=group, members=list(members), ordering=ordering,
                liveness=liveness, style=style, default_mode=default_mode, durable=durable)
            if acl is not None:
                request.acl.SetInParent()
                for right in ("join", "invoke", "admin"):
                    getattr(request.acl, right).extend(acl.get(right, []))
            self.stub.CreateGroup(request, timeout=timeout, metadata=self.metadata)
        self._with_nso(create)

    def delete_group(self, group, timeout=10.0):
        """Deletes a group made by create_group on every daemon (its servants end, its calls
        fail with NOT_FOUND); the name may be created again. Raises grpc.RpcError: NOT_FOUND,
        FAILED_PRECONDITION (a group of the YAML), UNAVAILABLE."""
        self._with_nso(lambda nso: self.stub.DeleteGroup(
            api_pb2.GroupRequest(nso=nso, group=group), timeout=timeout, metadata=self.metadata))

    def multicast(self, group, payload, timeout=5.0):
        _while_backlogged(time.monotonic(), self._backpressure_wait,
                          lambda: self._with_nso(lambda nso: self.stub.Multicast(
                              api_pb2.MulticastRequest(nso=nso, group=group, payload=payload),
                              timeout=timeout, metadata=self.metadata)))

    def status(self, timeout=5.0):
        return self.admin.Status(api_pb2.StatusRequest(), timeout=timeout, metadata=self.metadata)

    def close(self):
        """Gives the NSO back to the daemon (Detach; best effort: a daemon that is gone has
        forgotten it) and closes the channel. Calls already accepted are still delivered.
        Closing again does nothing."""
        if self._closed:
            return
        self._closed = True
        try:
            self.stub.Detach(api_pb2.DetachRequest(nso=self.nso), timeout=0.5,
                             metadata=self.metadata)
        except grpc.RpcError:
            pass
        self.channel.close()


# Ends the message of a refusal for backpressure (invocation/backpressure.h, kBacklogNote):
# nothing was accepted, so the request may be sent again once there is room.
BACKLOG_NOTE = "; backpressure: nothing was accepted, send again once earlier requests are ordered"


class _GroupWatch:
    """CohortClient.watch_group's iterator: WatchGroup streams, one after another."""

    _FIRST_PAUSE = 0.05
    _LONGEST_PAUSE = 1.0

    def __init__(self, open_stream, on_lost):
        self._open = open_stream
        self._on_lost = on_lost
        self._lock = threading.Lock()
        self._cancelled = threading.Event()
        self._stream = open_stream()
        self._connected = False  # a reply came on the stream open now
        self._ever_connected = False
        self._last = None  # the last reply given, serialized

    def __iter__(self):
        return self

    def __next__(self):
        pause = self._FIRST_PAUSE
        while True:
            if self._cancelled.is_set():
                raise StopIteration
            try:
                reply = next(self._stream)
            except StopIteration:
                error = None  # a daemon ends a watch with an error; taken as a loss
            except grpc.RpcError as failed:
                error = failed
            else:
                self._connected = self._ever_connected = True
                pause = self._FIRST_PAUSE
                serialized = reply.SerializeToString()
                if serialized == self._last:
                    continue
                self._last = serialized
                return reply
            if self._cancelled.is_set():
                raise StopIteration
            lost = error is None or error.code() in (grpc.StatusCode.UNAVAILABLE,
                                                     grpc.StatusCode.CANCELLED)
            if not self._ever_connected or not lost:
                raise error
            if self._connected and self._on_lost is not None:
                self._on_lost(error)
            self._connected = False
            if self._cancelled.wait(pause):
                raise StopIteration
            pause = min(pause * 2, self._LONGEST_PAUSE)
            with self._lock:
                if self._cancelled.is_set():
                    raise StopIteration
                self._stream = self._open()

    def cancel(self):
        """Ends the watch: the iteration stops (at once if it waits for a daemon)."""
        with self._lock:
            self._cancelled.set()
            self._stream.cancel()


def _backlogged(error):
    return (error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and
            BACKLOG_NOTE in (error.details() or ""))


def _while_backlogged(start, wait, attempt):
    """attempt(), again while the daemon refuses it for backpressure, pausing 0.2 ms doubling
    to 10 ms, for at most `wait` seconds from `start`; then the refusal is raised."""
    pause = 0.0002
    while True:
        try:
            return attempt()
        except grpc.RpcError as error:
            if not _backlogged(error) or time.monotonic() - start + pause > wait:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.01)


def _unknown_nso(error):
    return error.code() == grpc.StatusCode.NOT_FOUND and "unknown NSO" in (error.details() or "")


class _InvokeFuture:
    """CohortClient.invoke_future's result, with grpc.Future's methods: a refused call ("unknown
    NSO": the daemon restarted, or the NSO went idle) is sent again, after attaching again, when
    its result (or exception) is asked for. A done callback gets this future."""

    def __init__(self, future, nso, client, call):
        self._future, self._nso, self._client, self._call = future, nso, client, call

    def done(self):
        return self._future.done()

    def running(self):
        return self._future.running()

    def cancelled(self):
        return self._future.cancelled()

    def cancel(self):
        return self._future.cancel()

    def add_done_callback(self, fn):
        self._future.add_done_callback(lambda _: fn(self))

    def exception(self, timeout=None):
        try:
            self.result(timeout=timeout)
        except grpc.RpcError as error:
            return error
        return None

    def result(self, timeout=None):
        try:
            return self._future.result(timeout=timeout)
        except grpc.RpcError as error:
            if not _unknown_nso(error):
                raise
        self._client._attach_again(self._nso)
        return self._client.invoke(*self._call)


# A state is answered in chunks of at most this size (as the C++ servant).
STATE_CHUNK_BYTES = 256 * 1024


GroupView = collections.namedtuple("GroupView", "group view_id members in_view position")


class Servant:
    """A replica of `group` at one daemon. `handlers` maps method names to functions of the
    payload (bytes) returning the reply (bytes); an exception answers with an error. Multicasts
    (no method) are appended to `self.multicasts`.

    get_state() -> bytes and set_state(bytes): state transfer to a joining replica (read at a
    view change in delivery order at the member that gives it; installed at the joiner before any
    other delivery). Without them a replica's state is not transferred.

    keep_state_in: a durable group (README "Durable groups"): after the deliveries read together
    (at most 256 answers held), before their answers, the object's state (get_state) and its
    position in the group's order are written to this file (temporary file, fsync, rename, fsync
    of the directory; the format of the C++ library's Servant::KeepStateIn,
    invocation/kept_state.h; clients/python/kept_state.py). start() reads it aside and tells the
    daemon its position; when every member restarted, the daemon of the one that kept the most
    advanced state has it taken back ("$restore_kept") and re-founds the group from it. The
    answers of the latest calls are kept with the state, so that a call resent across a power
    cut is answered as it was, not executed again. Needs get_state and set_state. A write that
    fails ends the servant (self.end says why).

    on_view(view): the group's views, as the C++ Servant::OnViewChange: a GroupView (group,
    view_id, members as (name, node) pairs by node id, in_view, position), called on the
    delivery thread in the delivery order, after every delivery of the earlier views and before
    any of the new one, at the same position (deliveries before it) at every member. The first is
    the view of the servant's first delivery (after a state transfer, the view the state is of).

    rejoin_after_daemon_restart: when the stream ends because the daemon went away (restart,
    stop, broken connection), the servant attaches and registers again, every 0.1-2 s, until it
    is registered, stop() is called, or give_up_after seconds passed (None: never). Before
    registering again its object is reset to the state it had at start() (with the state
    hooks), and the group's state then arrives by transfer. `rejoins` counts the registrations.
    """

    def __init__(self, address, group, handlers, name="python-servant", timeout=5.0,
                 get_state=None, set_state=None, rejoin_after_daemon_restart=False,
                 give_up_after=None, keep_state_in=None, on_view=None, **connect):
        """connect: ca_file, cert_file, key_file, server_name, token, as for CohortClient."""
        self.group = group
        self.handlers = dict(handlers)
        self.multicasts = []
        self._address, self._name, self._connect = address, name, connect
        self._client = CohortClient(address, name, timeout, **connect)
        self._timeout = timeout
        self._get_state, self._set_state = get_state, set_state
        self._rejoin, self._give_up_after = rejoin_after_daemon_restart, give_up_after
        self._initial_state = None
        self._partial_state = b""
        self._kept_path = keep_state_in
        self._on_view = on_view
        self._kept = None  # KeptState read at start, until taken back or moved past
        self._kept_view = 0  # the latest view of the deliveries, kept with the state
        self._kept_calls = KeptCallLog()
        # Group commit (keep_state_in): the position applied but not yet kept, and the answers
        # held until it is (the deliveries read together are kept with one write).
        self._unkept = None
        self._held = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._outbox = None
        self._events = None
        self._thread = None
        self._max_reply_bytes = 0  # said by the daemon as it registers this servant
        self.rejoins = 0
        self.kept_error = None  # why the state could not be kept (keep_state_in)
        self.ended = None  # why the daemon ended the registration (its group was deleted)
        self.end = None    # why the servant ended (once `done` is set)
        self.done = threading.Event()

    def _register(self, client):
        """A new Serve stream, registered (raises grpc.RpcError or RuntimeError if not)."""
        outbox = queue.Queue()

        def messages():
            yield api_pb2.ServantMessage(register=api_pb2.ServantMessage.Register(
                nso=client.nso, group=self.group, methods=sorted(self.handlers),
                keeps_state=self._kept_path is not None,
                kept_position=self._kept.position if self._kept else 0,
                kept_view=self._kept.view if self._kept else 0,
                # A durable servant keeps the views with its state.
                view_events=self._on_view is not None or self._kept_path is not None))
            while True:
                message = outbox.get()
                if message is None:
                    return
                yield message

        events = client.stub.Serve(messages(), metadata=client.metadata)
        with self._lock:
            if self._stopping.is_set():
                events.cancel()
                outbox.put(None)
                raise RuntimeError("servant stopped")
            self._events, self._outbox = events, outbox
        try:
            first = next(events)
        except (grpc.RpcError, StopIteration):
            outbox.put(None)
            raise
        if not first.registered:
            outbox.put(None)
            raise RuntimeError("servant not registered: %r" % first)
        # The largest answer the daemon takes (its limits.max_payload_bytes; 0: not said).
        self._max_reply_bytes = first.max_reply_bytes

    def start(self):
        if self._kept_path is not None:
            if not (self._get_state and self._set_state):
                raise ValueError("keep_state_in needs get_state and set_state")
            self._kept = read_kept_state(self._kept_path, self.group)
            self._kept_view = self._kept.view if self._kept else 0
        if self._rejoin and self._get_state and self._set_state:
            self._initial_state = bytes(self._get_state())  # what a rejoin resets the object to
        self._register(self._client)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def wait(self, timeout=None):
        """Blocks until the servant ended (or `timeout` seconds); returns why (self.end)."""
        self.done.wait(timeout)
        return self.end

    def _answer(self, delivery, payload=b"", status_code=0, error="", more=False):
        self._outbox.put(api_pb2.ServantMessage(answer=api_pb2.ServantMessage.Answer(
            delivery=delivery, payload=payload, status_code=status_code, error=error,
            more=more)))

    def _send_state(self, delivery):
        try:
            state = bytes(self._get_state()) if self._get_state else b""
        except Exception as error:  # the joiner's provider cannot give it: the daemon says so
            self._answer(delivery, status_code=grpc.StatusCode.UNKNOWN.value[0], error=str(error))
            return
        at = 0
        while len(state) - at > STATE_CHUNK_BYTES:
            self._answer(delivery, state[at:at + STATE_CHUNK_BYTES], more=True)
            at += STATE_CHUNK_BYTES
        self._answer(delivery, state[at:])

    def _take_state_chunk(self, event):
        if event.state_offset == 0:
            self._partial_state = b""
        self._partial_state += event.payload
        if not event.state_last:
            return
        state, self._partial_state = self._partial_state, b""
        if self._set_state:
            self._set_state(state)

    def _keep(self, position):
        """Writes the object's state at `position` (keep_state_in); False if it could not: the
        servant ends rather than answer from a state not kept."""
        if self._kept_path is None:
            return True
        self._kept = None
        try:
            write_kept_state(self._kept_path, self.group, position, bytes(self._get_state()),
                             self._kept_calls.serialized(), self._kept_view)
            return True
        except Exception as error:
            self.kept_error = "group %r: cannot keep the state: %s" % (self.group, error)
            with self._lock:
                self._stopping.set()
                if self._events is not None:
                    self._events.cancel()
            return False

    def _restore_kept(self, delivery):
        """$restore_kept: the group is re-founded from the kept state; the answer gives back the
        calls kept with it."""
        answer = api_pb2.ServantMessage.Answer(delivery=delivery)
        if self._kept is None:
            answer.status_code = grpc.StatusCode.FAILED_PRECONDITION.value[0]
            answer.error = "group %r: no kept state to take back" % self.group
        else:
            kept, self._kept = self._kept, None
            try:
                self._kept_calls.replace(api_pb2.KeptCalls.FromString(kept.calls))
                self._partial_state = b""
                self._set_state(kept.state)
                answer.payload = kept.calls
            except Exception as error:
                self._kept_calls.replace(api_pb2.KeptCalls())
                answer.status_code = grpc.StatusCode.DATA_LOSS.value[0]
                answer.error = "taking back the state kept in %s: %s" % (self._kept_path, error)
        self._outbox.put(api_pb2.ServantMessage(answer=answer))

    def _applied(self, position, answer=None):
        """A delivery applied (keep_state_in): kept, and `answer` sent, by _flush_kept."""
        self._kept = None  # the object has moved on from what was found on disk
        self._unkept = position
        if answer is not None:
            self._held.append(answer)

    def _flush_kept(self):
        """Writes the state applied so far and sends the answers held for it; False if it could
        not be kept (the servant ends; the answers are never sent)."""
        if self._unkept is None:
            return True
        position, self._unkept = self._unkept, None
        held, self._held = self._held, []
        if not self._keep(position):
            return False
        for answer in held:
            self._outbox.put(api_pb2.ServantMessage(answer=answer))
        return True

    def _handle(self, event):
        keeping = self._kept_path is not None
        if keeping:
            self._kept_view = max(self._kept_view, event.view_id)
        if not event.method:
            self.multicasts.append(event.payload)
            if keeping:
                self._kept_calls.add(api_pb2.KeptCall(call=event.call))
                self._applied(event.group_seq)
            return
        if event.method == "$get_state":
            if self._flush_kept():
                self._send_state(event.delivery)
            return
        if event.method == "$set_state":
            if not self._flush_kept():
                return
            self._take_state_chunk(event)
            if event.state_last and keeping:
                if event.HasField("kept_calls"):
                    self._kept_calls.replace(event.kept_calls)
                self._applied(event.group_seq)
            return
        if event.method == "$restore_kept":
            self._restore_kept(event.delivery)
            return
        if event.method == "$view":
            if keeping:  # kept before on_view sees it: a view seen is never numbered again
                self._applied(event.group_seq)
                if not self._flush_kept():
                    return
            if self._on_view is not None:
                self._on_view(GroupView(
                    self.group, event.view_id,
                    [(member.name, member.node) for member in event.view.members],
                    event.view.in_view, event.group_seq))
            return
        answer = api_pb2.ServantMessage.Answer(delivery=event.delivery)
        handler = self.handlers.get(event.method)
        if handler is None:
            answer.status_code = grpc.StatusCode.UNIMPLEMENTED.value[0]
            answer.error = "no method %r" % event.method
        else:
            try:
                answer.payload = handler(event.payload)
            except Exception as error:  # the servant's failure goes back to the caller
                answer.status_code = grpc.StatusCode.UNKNOWN.value[0]
                answer.error = str(error)
            limit = self._max_reply_bytes
            if limit and len(answer.payload) > limit:
                # The error the daemon would make of it: sent, a reply past the daemon's frame
                # bound would break this servant's stream instead.
                answer.status_code = grpc.StatusCode.RESOURCE_EXHAUSTED.value[0]
                answer.error = ("the servant's reply of %d bytes exceeds its daemon's "
                                "limits.max_payload_bytes (%d): not sent"
                                % (len(answer.payload), limit))
                answer.payload = b""
            if keeping:
                self._kept_calls.add(api_pb2.KeptCall(call=event.call) if event.one_way else
                                     api_pb2.KeptCall(call=event.call,
                                                      status_code=answer.status_code,
                                                      error=answer.error, payload=answer.payload))
                # Answered once the state is on disk (_flush_kept): no answer from a state not kept.
                self._applied(event.group_seq, None if event.one_way else answer)
                return
        if not event.one_way:
            self._outbox.put(api_pb2.ServantMessage(answer=answer))

    # Group commit (keep_state_in): at most this many answers wait for one write.
    MAX_HELD_ANSWERS = 256

    def _serve(self):
        """Deliveries until the stream ends; returns why."""
        if self._kept_path is not None:
            return self._serve_keeping()
        try:
            for event in self._events:
                if event.ended:
                    self.ended = event.ended
                    self._events.cancel()
                    return "ended: " + event.ended
                self._handle(event)
            return "the daemon closed the stream"
        except grpc.RpcError as error:
            if error.code() == grpc.StatusCode.CANCELLED:
                return "stopped"
            return "%s: %s" % (error.code().name, error.details())
        finally:
            self._outbox.put(None)

    def _serve_keeping(self):
        """_serve keeping the state: a reader thread takes the events off the stream, and the
        deliveries read together are kept with one write (group commit, as the C++ library's)."""
        events = queue.Queue()

        def read():
            try:
                for event in self._events:
                    events.put(event)
                events.put("the daemon closed the stream")
            except grpc.RpcError as error:
                events.put("stopped" if error.code() == grpc.StatusCode.CANCELLED else
                           "%s: %s" % (error.code().name, error.details()))

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            while True:
                event = events.get()
                while True:
                    if isinstance(event, str):  # the stream ended
                        self._flush_kept()  # what was applied is kept; the answers go nowhere
                        return event
                    if event.ended:
                        self._flush_kept()
                        self.ended = event.ended
                        self._events.cancel()
                        return "ended: " + event.ended
                    self._handle(event)
                    if self._unkept is None or len(self._held) >= self.MAX_HELD_ANSWERS:
                        break
                    try:
                        event = events.get_nowait()
                    except queue.Empty:
                        break
                if not self._flush_kept():  # the servant ends (_keep cancelled the stream)
                    while not isinstance(events.get(), str):
                        pass
                    return "stopped"
        finally:
            self._outbox.put(None)
            reader.join(timeout=5)

    def _rejoin_now(self):
        """Registers again with back-off; True once registered."""
        # (The monotonic clock: a step of the wall clock neither ends nor stretches the wait.)
        give_up = None if self._give_up_after is None else time.monotonic() + self._give_up_after
        backoff = 0.1
        while not self._stopping.wait(backoff):
            if give_up is not None and time.monotonic() >= give_up:
                return False
            backoff = min(backoff * 2, 2.0)
            try:
                client = CohortClient(self._address, self._name, min(self._timeout, 1.0),
                                      **self._connect)
            except (grpc.RpcError, grpc.FutureTimeoutError):
                continue
            if self._initial_state is not None:
                self._partial_state = b""
                self._set_state(self._initial_state)
            self._kept_calls.replace(api_pb2.KeptCalls())
            if self._kept_path is not None:
                try:
                    self._kept = read_kept_state(self._kept_path, self.group)
                except ValueError as error:
                    self.kept_error = str(error)
                    return False
            try:
                self._register(client)
            except (grpc.RpcError, RuntimeError, StopIteration):
                client.close()
                continue
            old, self._client = self._client, client
            old.close()
            self.rejoins += 1
            return True
        return False

    def _run(self):
        while True:
            why = self._serve()
            if (self._stopping.is_set() or self.ended is not None or not self._rejoin
                    or not self._rejoin_now()):
                break
        self.end = (self.kept_error if self.kept_error else
                    "stopped" if self._stopping.is_set() else why)
        self.done.set()

    def stop(self):
        with self._lock:
            self._stopping.set()
            if self._outbox is not None:
                self._outbox.put(None)
            if self._events is not None:
                self._events.cancel()
        if self._thread is not None:
            self._thread.join(timeout=self._timeout)
        self._client.close()
