"""A Cohort client and servant in Python, over the daemon's gRPC API (proto/api.proto).

The stubs (api_pb2.py, api_pb2_grpc.py) are generated from proto/api.proto by grpcio-tools:

    clients/python/generate.sh OUT_DIR      # then put OUT_DIR and this folder on PYTHONPATH

Usage:

    from cohort_client import CohortClient, Servant

    servant = Servant("127.0.0.1:7201", "counter", {"echo": lambda payload: payload})
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
"""
import queue
import threading

import grpc

import api_pb2
import api_pb2_grpc

MODES = {
    "default": api_pb2.MODE_UNSPECIFIED,
    "one_way": api_pb2.ONE_WAY,
    "first": api_pb2.WAIT_FIRST,
    "majority": api_pb2.WAIT_MAJORITY,
    "all": api_pb2.WAIT_ALL,
}


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _connect(address, timeout, ca_file=None, cert_file=None, key_file=None, server_name=None):
    """Plaintext without a CA; with one, TLS checking the daemon's certificate (for server_name
    if given, else the address's host), presenting cert_file/key_file when given."""
    if ca_file is None:
        if cert_file or key_file or server_name:
            raise ValueError("cert_file, key_file and server_name need ca_file (TLS)")
        channel = grpc.insecure_channel(address)
    else:
        if bool(cert_file) != bool(key_file):
            raise ValueError("cert_file and key_file go together")
        credentials = grpc.ssl_channel_credentials(
            root_certificates=_read(ca_file),
            private_key=_read(key_file) if key_file else None,
            certificate_chain=_read(cert_file) if cert_file else None)
        options = [("grpc.ssl_target_name_override", server_name)] if server_name else []
        channel = grpc.secure_channel(address, credentials, options=options)
    grpc.channel_ready_future(channel).result(timeout=timeout)
    return channel


class CohortClient:
    """One application attached to a daemon: it gets its own NSO (NewTop service object)."""

    def __init__(self, address, client_name="python", timeout=5.0, ca_file=None, cert_file=None,
                 key_file=None, server_name=None, token=None):
        self.channel = _connect(address, timeout, ca_file, cert_file, key_file, server_name)
        # The token goes with every call ("authorization: Bearer <token>"), TLS or not.
        self.metadata = [("authorization", "Bearer " + token)] if token else None
        self.stub = api_pb2_grpc.CohortStub(self.channel)
        self.admin = api_pb2_grpc.AdminStub(self.channel)
        reply = self.stub.Attach(api_pb2.AttachRequest(client_name=client_name), timeout=timeout,
                                 metadata=self.metadata)
        self.nso = reply.nso
        self.node_name = reply.node_name

    def group_details(self, group, timeout=5.0):
        return self.stub.GroupDetails(api_pb2.GroupRequest(nso=self.nso, group=group),
                                      timeout=timeout, metadata=self.metadata)

    def invoke(self, group, method, payload, mode="default", deadline_ms=5000):
        """Raises grpc.RpcError: NOT_FOUND (unknown group), UNAVAILABLE (too few members for
        the mode), DEADLINE_EXCEEDED (mode not met in time), INVALID_ARGUMENT."""
        request = api_pb2.InvokeRequest(nso=self.nso, group=group, method=method,
                                        payload=payload, mode=MODES[mode],
                                        deadline_ms=deadline_ms)
        return self.stub.Invoke(request, timeout=deadline_ms / 1000.0 + 2, metadata=self.metadata)

    def invoke_future(self, group, method, payload, mode="default", deadline_ms=5000):
        """invoke without waiting: a grpc.Future whose result() is the reply (or raises as
        invoke does); many may be in flight on the client's one channel."""
        request = api_pb2.InvokeRequest(nso=self.nso, group=group, method=method,
                                        payload=payload, mode=MODES[mode],
                                        deadline_ms=deadline_ms)
        return self.stub.Invoke.future(request, timeout=deadline_ms / 1000.0 + 2,
                                       metadata=self.metadata)

    def create_group(self, group, members, ordering="", liveness="", style="", default_mode="",
                     acl=None, timeout=10.0):
        """A group on every daemon at run time (daemons with dynamic_groups). acl: a dict of
        join/invoke/admin lists of application names (or "*"), as groups[].acl; None: no acl.
        Raises grpc.RpcError: ALREADY_EXISTS, INVALID_ARGUMENT (names the bad key),
        UNAVAILABLE."""
        request = api_pb2.CreateGroupRequest(
            nso=self.nso, group=group, members=list(members), ordering=ordering,
            liveness=liveness, style=style, default_mode=default_mode)
        if acl is not None:
            request.acl.SetInParent()
            for right in ("join", "invoke", "admin"):
                getattr(request.acl, right).extend(acl.get(right, []))
        self.stub.CreateGroup(request, timeout=timeout, metadata=self.metadata)

    def delete_group(self, group, timeout=10.0):
        """Deletes a group made by create_group on every daemon (its servants end, its calls
        fail with NOT_FOUND); the name may be created again. Raises grpc.RpcError: NOT_FOUND,
        FAILED_PRECONDITION (a group of the YAML), UNAVAILABLE."""
        self.stub.DeleteGroup(api_pb2.GroupRequest(nso=self.nso, group=group), timeout=timeout,
                              metadata=self.metadata)

    def multicast(self, group, payload, timeout=5.0):
        self.stub.Multicast(api_pb2.MulticastRequest(nso=self.nso, group=group, payload=payload),
                            timeout=timeout, metadata=self.metadata)

    def status(self, timeout=5.0):
        return self.admin.Status(api_pb2.StatusRequest(), timeout=timeout, metadata=self.metadata)

    def close(self):
        self.channel.close()


class Servant:
    """A replica of `group` at one daemon. `handlers` maps method names to functions of the
    payload (bytes) returning the reply (bytes); an exception answers with an error. Multicasts
    (no method) are appended to `self.multicasts`."""

    def __init__(self, address, group, handlers, name="python-servant", timeout=5.0,
                 **connect):
        """connect: ca_file, cert_file, key_file, server_name, token, as for CohortClient."""
        self.group = group
        self.handlers = dict(handlers)
        self.multicasts = []
        self._client = CohortClient(address, name, timeout, **connect)
        self._timeout = timeout
        self._outbox = queue.Queue()
        self._events = None
        self._thread = None
        self.ended = None  # why the daemon ended the registration (its group was deleted)

    def _messages(self):
        yield api_pb2.ServantMessage(register=api_pb2.ServantMessage.Register(
            nso=self._client.nso, group=self.group))
        while True:
            message = self._outbox.get()
            if message is None:
                return
            yield message

    def start(self):
        self._events = self._client.stub.Serve(self._messages(), metadata=self._client.metadata)
        first = next(self._events)
        if not first.registered:
            raise RuntimeError("servant not registered: %r" % first)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        try:
            for event in self._events:
                if event.ended:
                    self.ended = event.ended
                    self._events.cancel()
                    return
                if not event.method:
                    self.multicasts.append(event.payload)
                    continue
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
                if not event.one_way:
                    self._outbox.put(api_pb2.ServantMessage(answer=answer))
        except grpc.RpcError:
            pass  # stream ended: stop() or the daemon went away

    def stop(self):
        self._outbox.put(None)
        if self._events is not None:
            self._events.cancel()
        if self._thread is not None:
            self._thread.join(timeout=self._timeout)
        self._client.close()
