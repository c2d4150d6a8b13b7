#!/usr/bin/env python3
"""The Python client example (clients/python) against three real cohortd processes with Python
servants: Attach, GroupDetails, Invoke in every waiting mode, Multicast, errors, Admin.Status.

Then TLS: client certificates naming applications in a group's ACL, a token that must agree.

    python_client_test.py COHORTD MAKE_TEST_CA   (PYTHONPATH: the generated stubs and clients/python)
"""
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import grpc

import api_pb2
import api_pb2_grpc
import cohort_client
from cohort_client import CohortClient, Servant, read_kept_state, write_kept_state
from local_cluster import LocalCluster

COHORTD = None
MAKE_TEST_CA = None


class PythonClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        cls.cluster = LocalCluster(COHORTD, "echo", cls.dir)
        cls.client_ports = cls.cluster.client_ports
        cls.servants = []
        for i, port in enumerate(cls.client_ports):
            name = "n%d" % (i + 1)
            servant = Servant("127.0.0.1:%d" % port, "echo", {
                "echo": lambda payload, name=name: name.encode() + b":" + payload,
                "fail": lambda payload: 1 / 0,
                "over": lambda payload: b"o" * (12 * 1024 * 1024),
            })
            servant.start()
            cls.servants.append(servant)
        cls.client = CohortClient("127.0.0.1:%d" % cls.client_ports[0], "python-test")

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        for servant in cls.servants:
            servant.stop()
        cls.cluster.stop()

    def test_close_detaches_the_nso(self):
        address = "127.0.0.1:%d" % self.client_ports[1]
        channel = grpc.insecure_channel(address)
        admin = api_pb2_grpc.AdminStub(channel)
        before = admin.Status(api_pb2.StatusRequest(), timeout=5).nsos
        client = CohortClient(address, "python-short-lived")
        self.assertEqual(admin.Status(api_pb2.StatusRequest(), timeout=5).nsos, before + 1)
        client.invoke("echo", "echo", b"once", mode="one_way")
        nso = client.nso
        client.close()
        self.assertEqual(admin.Status(api_pb2.StatusRequest(), timeout=5).nsos, before)
        with self.assertRaises(grpc.RpcError) as gone:
            api_pb2_grpc.CohortStub(channel).Detach(api_pb2.DetachRequest(nso=nso), timeout=5)
        self.assertEqual(gone.exception.code(), grpc.StatusCode.NOT_FOUND)
        channel.close()

    def test_attach_gives_an_nso(self):
        self.assertGreater(self.client.nso, 0)
        self.assertEqual(self.client.node_name, "n1")

    def test_group_details(self):
        until = time.time() + 10
        while True:
            view = self.client.group_details("echo")
            if not any(m.suspected for m in view.members) or time.time() > until:
                break
            time.sleep(0.05)
        self.assertEqual(view.group, "echo")
        self.assertGreaterEqual(view.view_id, 1)
        self.assertEqual(sorted(m.name for m in view.members), ["n1", "n2", "n3"])
        self.assertFalse(any(m.suspected for m in view.members))
        self.assertEqual(view.ordering, "consensus")

    def test_invoke_all_majority_first(self):
        reply = self.client.invoke("echo", "echo", b"hi", mode="all")
        self.assertEqual(reply.wanted, 3)
        self.assertEqual(sorted(r.payload for r in reply.replies), [b"n1:hi", b"n2:hi", b"n3:hi"])
        self.assertTrue(all(r.status_code == 0 for r in reply.replies))
        reply = self.client.invoke("echo", "echo", b"m", mode="majority")
        self.assertEqual(reply.wanted, 2)
        self.assertGreaterEqual(len(reply.replies), 2)
        reply = self.client.invoke("echo", "echo", b"f", mode="first")
        self.assertGreaterEqual(len(reply.replies), 1)
        self.assertTrue(reply.replies[0].payload.endswith(b":f"))
        reply = self.client.invoke("echo", "echo", b"w", mode="one_way")
        self.assertEqual(len(reply.replies), 0)
        # Through a request manager (open) and to every member (closed), per call.
        reply = self.client.invoke("echo", "echo", b"o", mode="all", style="open")
        self.assertEqual(sorted(r.payload for r in reply.replies), [b"n1:o", b"n2:o", b"n3:o"])
        reply = self.client.invoke("echo", "echo", b"c", mode="all", style="closed")
        self.assertEqual(sorted(r.payload for r in reply.replies), [b"n1:c", b"n2:c", b"n3:c"])
        with self.assertRaises(ValueError) as bad:
            self.client.invoke("echo", "echo", b"x", style="sideways")
        self.assertIn("style 'sideways'", str(bad.exception))

    def test_full_size_replies_from_every_member(self):
        # Payloads up to limits.max_payload_bytes (4 MiB): each servant gets one and answers
        # with one, and the result holds three (12 MiB). grpcio's 4 MiB receive bound refused
        # the delivery and the result, and the daemon's send bound (9 MiB) the result, until
        # session 52.
        payload = b"p" * (4 * 1024 * 1024 - 8)
        reply = self.client.invoke("echo", "echo", payload, mode="all", deadline_ms=30000)
        self.assertEqual(sorted(r.payload for r in reply.replies),
                         [b"n%d:" % i + payload for i in (1, 2, 3)])

    def test_a_reply_over_the_limit_is_an_error(self):
        # 12 MiB, over limits.max_payload_bytes (4 MiB) and past what the daemon reads in one
        # message (9 MiB): the library answers with the error the daemon would make of it (its
        # registration said the bound: ServantEvent.max_reply_bytes), and the servant's stream
        # lives on (sent, the reply broke it until session 52).
        reply = self.client.invoke("echo", "over", b"", mode="all", deadline_ms=30000)
        self.assertEqual(len(reply.replies), 3)
        for r in reply.replies:
            self.assertEqual(r.status_code, grpc.StatusCode.RESOURCE_EXHAUSTED.value[0])
            self.assertIn("limits.max_payload_bytes (4194304)", r.error)
            self.assertEqual(r.payload, b"")
        reply = self.client.invoke("echo", "echo", b"after", mode="all")
        self.assertEqual(sorted(r.payload for r in reply.replies),
                         [b"n1:after", b"n2:after", b"n3:after"])

    def test_invoke_future_many_in_flight(self):
        futures = [self.client.invoke_future("echo", "echo", b"f%d" % k, mode="all")
                   for k in range(50)]
        for k, future in enumerate(futures):
            reply = future.result()
            self.assertEqual(sorted(r.payload for r in reply.replies),
                             [b"n%d:f%d" % (i, k) for i in (1, 2, 3)])
        with self.assertRaises(grpc.RpcError) as caught:
            self.client.invoke_future("nope", "echo", b"", mode="first").result()
        self.assertEqual(caught.exception.code(), grpc.StatusCode.NOT_FOUND)
        # grpc.Future's other methods: a done callback (given the future) and exception().
        done = threading.Event()
        seen = []
        future = self.client.invoke_future("echo", "echo", b"cb", mode="all")
        future.add_done_callback(lambda f: (seen.append(f), done.set()))
        self.assertTrue(done.wait(10))
        self.assertIs(seen[0], future)
        self.assertTrue(future.done())
        self.assertIsNone(future.exception())
        self.assertEqual(len(future.result().replies), 3)
        missing = self.client.invoke_future("nope", "echo", b"", mode="first")
        self.assertEqual(missing.exception().code(), grpc.StatusCode.NOT_FOUND)

    def test_servant_errors_come_back_per_member(self):
        reply = self.client.invoke("echo", "fail", b"", mode="all")
        self.assertEqual(len(reply.replies), 3)
        self.assertTrue(all(r.status_code == grpc.StatusCode.UNKNOWN.value[0]
                            for r in reply.replies))
        self.assertIn("division", reply.replies[0].error)
        reply = self.client.invoke("echo", "nope", b"", mode="first")
        self.assertEqual(reply.replies[0].status_code, grpc.StatusCode.UNIMPLEMENTED.value[0])

    def test_unknown_group_is_not_found(self):
        with self.assertRaises(grpc.RpcError) as caught:
            self.client.invoke("nope", "echo", b"", mode="first")
        self.assertEqual(caught.exception.code(), grpc.StatusCode.NOT_FOUND)

    def test_multicast_reaches_every_servant(self):
        self.client.multicast("echo", b"to-all")
        until = time.time() + 10
        while time.time() < until and not all(b"to-all" in s.multicasts for s in self.servants):
            time.sleep(0.05)
        for servant in self.servants:
            self.assertIn(b"to-all", servant.multicasts)

    def test_admin_status(self):
        status = self.client.status()
        self.assertEqual(status.node_name, "n1")
        self.assertEqual(status.groups, 1)


class PythonTlsTest(unittest.TestCase):
    """TLS, client certificates naming applications (auth.client_certificates) and tokens."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        cls.ca = os.path.join(cls.dir, "ca")
        subprocess.run([MAKE_TEST_CA, cls.ca], check=True, stdout=subprocess.DEVNULL)
        tls = ("tls: {ca_file: %s/ca.pem, cert_file: %s/daemon.pem, key_file: %s/daemon.key}\n"
               "auth:\n  client_certificates: true\n  tokens:\n"
               "    - {name: app1, token: token-one}\n"
               "dynamic_groups: {create: [app1]}\n" % (cls.ca, cls.ca, cls.ca))
        cls.cluster = LocalCluster(COHORTD, "locked", cls.dir, n=1, extra_yaml=tls,
                                   group_options='acl: {join: ["*"], invoke: [app1]}')
        cls.address = "127.0.0.1:%d" % cls.cluster.client_ports[0]
        cls.servant = Servant(cls.address, "locked", {"echo": lambda payload: payload},
                              **cls.identity("app1"))
        cls.servant.start()

    @classmethod
    def identity(cls, name):
        return {"ca_file": cls.ca + "/ca.pem", "cert_file": "%s/%s.pem" % (cls.ca, name),
                "key_file": "%s/%s.key" % (cls.ca, name)}

    @classmethod
    def tearDownClass(cls):
        cls.servant.stop()
        cls.cluster.stop()

    def test_certificate_names_the_caller(self):
        app1 = CohortClient(self.address, "app1", **self.identity("app1"))
        reply = app1.invoke("locked", "echo", b"hi", mode="all")
        self.assertEqual([r.payload for r in reply.replies], [b"hi"])
        app1.close()
        app2 = CohortClient(self.address, "app2", **self.identity("app2"))
        with self.assertRaises(grpc.RpcError) as denied:
            app2.invoke("locked", "echo", b"hi", mode="all")
        self.assertEqual(denied.exception.code(), grpc.StatusCode.PERMISSION_DENIED)
        self.assertIn('"app2" may not invoke group "locked"', denied.exception.details())
        app2.close()

    def test_no_certificate_is_unauthenticated(self):
        with self.assertRaises(grpc.RpcError) as refused:
            CohortClient(self.address, "anonymous", ca_file=self.ca + "/ca.pem")
        self.assertEqual(refused.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
        self.assertIn("client certificate", refused.exception.details())

    def test_token_must_agree_with_certificate(self):
        agreeing = CohortClient(self.address, "app1", token="token-one", **self.identity("app1"))
        self.assertEqual(len(agreeing.invoke("locked", "echo", b"x", mode="all").replies), 1)
        agreeing.close()
        with self.assertRaises(grpc.RpcError) as refused:
            CohortClient(self.address, "app2", token="token-one", **self.identity("app2"))
        self.assertEqual(refused.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
        self.assertIn("the bearer token names", refused.exception.details())

    def test_create_group_at_run_time(self):
        app1 = CohortClient(self.address, "app1", **self.identity("app1"))
        app1.create_group("made", ["n1"], ordering="sequencer")
        self.assertEqual([m.name for m in app1.group_details("made").members], ["n1"])
        with self.assertRaises(grpc.RpcError) as again:
            app1.create_group("made", ["n1"])
        self.assertEqual(again.exception.code(), grpc.StatusCode.ALREADY_EXISTS)
        app1.create_group("mine", ["n1"], acl={"invoke": ["app1"]})
        # durable: this daemon has no incarnation_file, so it cannot promise it.
        with self.assertRaises(grpc.RpcError) as not_durable:
            app1.create_group("kept", ["n1"], durable=True)
        self.assertEqual(not_durable.exception.code(), grpc.StatusCode.FAILED_PRECONDITION)
        self.assertIn("needs incarnation_file", not_durable.exception.details())
        app1.close()
        app2 = CohortClient(self.address, "app2", **self.identity("app2"))
        with self.assertRaises(grpc.RpcError) as kept_out:
            app2.group_details("mine")  # GroupDetails needs the invoke right
        self.assertEqual(kept_out.exception.code(), grpc.StatusCode.PERMISSION_DENIED)
        self.assertEqual([m.name for m in app2.group_details("made").members], ["n1"])
        with self.assertRaises(grpc.RpcError) as denied:
            app2.create_group("other", ["n1"])
        self.assertEqual(denied.exception.code(), grpc.StatusCode.PERMISSION_DENIED)
        app2.close()

    def test_delete_group(self):
        app1 = CohortClient(self.address, "app1", **self.identity("app1"))
        app1.create_group("doomed", ["n1"])
        servant = Servant(self.address, "doomed", {"echo": lambda payload: payload},
                          **self.identity("app1"))
        servant.start()
        try:
            reply = app1.invoke("doomed", "echo", b"before", mode="all")
            self.assertEqual([r.payload for r in reply.replies], [b"before"])
            app2 = CohortClient(self.address, "app2", **self.identity("app2"))
            with self.assertRaises(grpc.RpcError) as denied:
                app2.delete_group("doomed")  # not in dynamic_groups.create
            self.assertEqual(denied.exception.code(), grpc.StatusCode.PERMISSION_DENIED)
            app2.close()
            app1.delete_group("doomed")
            deadline = time.time() + 10
            while servant.ended is None and time.time() < deadline:
                time.sleep(0.02)
            self.assertIn('group "doomed" was deleted', servant.ended or "")
            with self.assertRaises(grpc.RpcError) as gone:
                app1.invoke("doomed", "echo", b"after", mode="all")
            self.assertEqual(gone.exception.code(), grpc.StatusCode.NOT_FOUND)
            with self.assertRaises(grpc.RpcError) as again:
                app1.delete_group("doomed")
            self.assertEqual(again.exception.code(), grpc.StatusCode.NOT_FOUND)
            with self.assertRaises(grpc.RpcError) as yaml_group:
                app1.delete_group("locked")  # the YAML's acl names no admin: checked first
            self.assertEqual(yaml_group.exception.code(), grpc.StatusCode.PERMISSION_DENIED)
            self.assertIn("may not admin", yaml_group.exception.details())
            # The acl of a created group names its admins: app1 is not one of "guarded"'s.
            app1.create_group("guarded", ["n1"], acl={"invoke": ["app1"], "admin": ["ops"]})
            with self.assertRaises(grpc.RpcError) as not_admin:
                app1.delete_group("guarded")
            self.assertEqual(not_admin.exception.code(), grpc.StatusCode.PERMISSION_DENIED)
            # The name is free again: a new group.
            app1.create_group("doomed", ["n1"])
            reborn = Servant(self.address, "doomed", {"echo": lambda payload: payload + b"!"},
                             **self.identity("app1"))
            reborn.start()
            reply = app1.invoke("doomed", "echo", b"again", mode="all")
            self.assertEqual([r.payload for r in reply.replies], [b"again!"])
            reborn.stop()
        finally:
            servant.stop()
            app1.close()

    def test_plaintext_to_a_tls_daemon_fails(self):
        with self.assertRaises(grpc.FutureTimeoutError):
            CohortClient(self.address, "plaintext", timeout=0.5)


def eventually(check, seconds):
    """check() until it is true (exceptions count as false) or `seconds` passed."""
    until = time.time() + seconds
    while True:
        try:
            if check():
                return True
        except grpc.RpcError:
            pass
        if time.time() > until:
            return False
        time.sleep(0.1)


def _until_cancelled(stream):
    """The replies of a stream until it is cancelled (its end)."""
    try:
        for reply in stream:
            yield reply
    except grpc.RpcError as error:
        if error.code() != grpc.StatusCode.CANCELLED:
            raise


class Counter:
    """A replicated counter in Python with its state hooks (state: the value as ASCII)."""

    def __init__(self):
        self.value = 0
        self.installs = 0
        self.views = []  # (GroupView, value then, installs then): Servant(on_view=...)

    def on_view(self, view):
        self.views.append((view, self.value, self.installs))

    def handlers(self):
        return {"add": self.add, "get": lambda payload: b"%d" % self.value}

    def add(self, payload):
        self.value += int(payload)
        return b"%d" % self.value

    def get_state(self):
        return b"%d" % self.value

    def set_state(self, state):
        self.value = int(state)
        self.installs += 1


class PythonRestartTest(unittest.TestCase):
    """State transfer between Python servants; a daemon killed -9 and restarted: its Python
    servant registers again and gets the state, a client attached to it attaches again."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        self.cluster = LocalCluster(COHORTD, "counter", self.dir)
        self.addresses = self.cluster.client_addresses
        self.counters = [Counter() for _ in self.addresses]
        self.servants = []
        for address, counter in zip(self.addresses, self.counters):
            servant = Servant(address, "counter", counter.handlers(),
                              get_state=counter.get_state, set_state=counter.set_state,
                              rejoin_after_daemon_restart=True, on_view=counter.on_view)
            servant.start()
            self.servants.append(servant)
        self.client = CohortClient(self.addresses[0], "python-restart")
        self.assertTrue(eventually(lambda: len(self.client.invoke(
            "counter", "get", b"", mode="all", deadline_ms=2000).replies) == 3, 20))
        self.client.invoke("counter", "add", b"5", mode="all")

    def tearDown(self):
        self.client.close()
        for servant in self.servants:
            servant.stop()
        self.cluster.stop()

    def all_answer(self, value):
        reply = self.client.invoke("counter", "get", b"", mode="all", deadline_ms=2000)
        return sorted(r.payload for r in reply.replies) == [value] * 3

    def test_a_new_servant_gets_the_state_of_python_servants(self):
        # A client watching the group (watch_group) is told of each view as it comes.
        watch = self.client.watch_group("counter")
        pushed = []
        reader = threading.Thread(target=lambda: pushed.extend(
            (reply.view_id, [m.name for m in reply.members]) for reply in _until_cancelled(watch)))
        reader.start()
        # The watch's first push is the view it starts in: waited for, or n2's leave below may
        # come first (tools/test on a clean clone, session 49: pushed[0] was view 2).
        self.assertTrue(eventually(lambda: len(pushed) > 0, 10))
        self.servants[1].stop()  # the application at n2 goes; n2 leaves the view
        fresh = Counter()
        servant = Servant(self.addresses[1], "counter", fresh.handlers(),
                          get_state=fresh.get_state, set_state=fresh.set_state,
                          on_view=fresh.on_view)
        servant.start()
        self.servants[1] = servant
        self.assertTrue(eventually(lambda: self.all_answer(b"5"), 30))
        self.assertEqual(fresh.installs, 1)
        # The views (on_view), in the delivery order: view 1 before the add, the view without
        # n2, and the one with it again, which the new servant gets after the state.
        names = lambda view: [name for name, _ in view.members]
        first = [(view.view_id, names(view), view.in_view, value)
                 for view, value, _ in self.counters[0].views]
        self.assertEqual(first, [(1, ["n1", "n2", "n3"], True, 0), (2, ["n1", "n3"], True, 5),
                                 (3, ["n1", "n2", "n3"], True, 5)])
        joined, value, installs = fresh.views[-1]
        self.assertEqual((joined.view_id, names(joined), value, installs),
                         (3, ["n1", "n2", "n3"], 5, 1))
        self.assertEqual(joined.position, self.counters[0].views[2][0].position)
        self.assertEqual(joined.group, "counter")
        self.assertTrue(eventually(lambda: (3, ["n1", "n2", "n3"]) in pushed, 10))
        watch.cancel()
        reader.join(10)
        self.assertEqual(pushed[0], (1, ["n1", "n2", "n3"]))
        self.assertIn((2, ["n1", "n3"]), pushed)
        with self.assertRaises(grpc.RpcError) as unknown:
            next(self.client.watch_group("nope"))
        self.assertEqual(unknown.exception.code(), grpc.StatusCode.NOT_FOUND)

    def test_servant_and_client_outlive_their_daemons_restart(self):
        at_n3 = CohortClient(self.addresses[2], "python-at-n3")
        first_nso = at_n3.nso
        # A watch of n3 follows it through the restart (on_lost, then n3's views again).
        losses = []
        watch = at_n3.watch_group("counter", on_lost=losses.append)
        pushed = []
        reader = threading.Thread(target=lambda: pushed.extend(
            (reply.view_id, [m.name for m in reply.members if not m.suspected])
            for reply in watch))
        reader.start()
        self.assertTrue(eventually(lambda: (1, ["n1", "n2", "n3"]) in pushed, 10))
        self.cluster.kill(2)
        self.assertTrue(eventually(lambda: self.client.invoke(
            "counter", "add", b"2", mode="majority", deadline_ms=2000) is not None, 20))
        self.cluster.restart(2)
        # The same Servant object serves again at n3 with the group's state (7).
        self.assertTrue(eventually(lambda: self.all_answer(b"7"), 60))
        self.assertEqual(self.servants[2].rejoins, 1)
        self.assertFalse(self.servants[2].done.is_set())
        self.assertGreaterEqual(self.counters[2].installs, 1)
        # The client attached to n3 before its restart: its NSO is unknown there; it attaches
        # again and the call goes through.
        self.assertTrue(eventually(lambda: len(at_n3.invoke(
            "counter", "get", b"", mode="all", deadline_ms=2000).replies) == 3, 30))
        self.assertNotEqual(at_n3.nso, first_nso)
        self.assertTrue(eventually(lambda: any(
            view_id > 1 and names == ["n1", "n2", "n3"] for view_id, names in pushed), 30))
        self.assertGreaterEqual(len(losses), 1)
        self.assertEqual(losses[0].code(), grpc.StatusCode.UNAVAILABLE)
        watch.cancel()
        reader.join(10)
        self.assertFalse(reader.is_alive())  # the iteration stopped
        at_n3.close()
        # Stopped while trying to register again, a servant ends at once.
        self.cluster.kill(1)
        time.sleep(0.5)
        self.servants[1].stop()
        self.assertEqual(self.servants[1].wait(5), "stopped")


class PythonDurableTest(unittest.TestCase):
    """A durable group of Python servants that keep their state (keep_state_in): every daemon
    killed -9 with its servant and started again, the group resumes from the kept counter."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        self.cluster = LocalCluster(
            COHORTD, "counter", self.dir,
            extra_yaml="incarnation_file: %s/{node}.incarnation\n" % self.dir,
            group_options="durable: true")
        self.addresses = self.cluster.client_addresses
        self.servants = []

    def tearDown(self):
        for servant in self.servants:
            servant.stop()
        self.cluster.stop()

    def start_servants(self):
        counters = [Counter() for _ in self.addresses]
        servants = []
        for i, (address, counter) in enumerate(zip(self.addresses, counters)):
            servant = Servant(address, "counter", counter.handlers(),
                              get_state=counter.get_state, set_state=counter.set_state,
                              keep_state_in=os.path.join(self.dir, "s%d.kept" % i))
            servant.start()
            servants.append(servant)
        self.servants += servants
        return counters

    def test_every_daemon_and_servant_killed_resumes_from_the_kept_state(self):
        self.start_servants()
        client = CohortClient(self.addresses[0], "python-durable")
        self.assertTrue(eventually(lambda: len(client.invoke(
            "counter", "get", b"", mode="all", deadline_ms=2000).replies) == 3, 20))
        client.invoke("counter", "add", b"5", mode="all")
        client.close()
        for i in range(3):
            self.cluster.kill(i)
        for servant in self.servants:
            self.assertIsNotNone(servant.wait(10))  # each ends with its daemon
        for i in range(3):
            position, state, calls, view = read_kept_state(
                os.path.join(self.dir, "s%d.kept" % i), "counter")
            self.assertEqual(state, b"5")
            self.assertGreater(position, 0)
            self.assertEqual(view, 1)  # the view of the deliveries kept
            # The calls' answers are kept with the state: "add 5" answered "5".
            kept = api_pb2.KeptCalls.FromString(calls)
            self.assertIn(b"5", [call.payload for call in kept.calls if call.call])
        for i in range(3):
            self.cluster.restart(i)
        counters = self.start_servants()
        client = CohortClient(self.addresses[1], "python-durable-2")
        self.assertTrue(eventually(lambda: sorted(r.payload for r in client.invoke(
            "counter", "get", b"", mode="all", deadline_ms=2000).replies) == [b"5"] * 3, 60))
        reply = client.invoke("counter", "add", b"1", mode="all", deadline_ms=5000)
        self.assertEqual(sorted(r.payload for r in reply.replies), [b"6"] * 3)
        # The re-founder's took its kept state back, the others got it by transfer.
        self.assertEqual([c.installs for c in counters], [1, 1, 1])
        client.close()

    def test_group_commit_answers_only_after_the_write(self):
        # What each servant's thread does, in order: ("write", value) once a kept state is on
        # disk, ("answer", value) when an answer is made to be sent.
        done = {}
        lock = threading.Lock()
        real_write, real_message = cohort_client.write_kept_state, api_pb2.ServantMessage

        def recording_write(path, group, position, state, calls=b"", view=0):
            real_write(path, group, position, state, calls, view)
            with lock:
                done.setdefault(threading.get_ident(), []).append(("write", int(state)))

        def recording_message(*args, **kwargs):
            answer = kwargs.get("answer")
            if answer is not None and answer.payload.isdigit():
                with lock:
                    done.setdefault(threading.get_ident(), []).append(
                        ("answer", int(answer.payload)))
            return real_message(*args, **kwargs)

        for name in ("Answer", "Register", "SerializeToString", "FromString"):
            setattr(recording_message, name, getattr(real_message, name))
        cohort_client.write_kept_state = recording_write
        api_pb2.ServantMessage = recording_message
        try:
            self.start_servants()
            client = CohortClient(self.addresses[0], "python-group-commit")
            self.assertTrue(eventually(lambda: len(client.invoke(
                "counter", "get", b"", mode="all", deadline_ms=2000).replies) == 3, 20))
            futures = [client.invoke_future("counter", "add", b"1", mode="all")
                       for _ in range(200)]
            for future in futures:
                self.assertEqual(len(future.result().replies), 3)
            client.close()
        finally:
            cohort_client.write_kept_state = real_write
            api_pb2.ServantMessage = real_message
        with lock:
            threads = [events for events in done.values() if ("answer", 200) in events]
        self.assertEqual(len(threads), 3)  # each servant answered the 200th add
        for events in threads:
            kept, writes = 0, 0
            for kind, value in events:
                if kind == "write":
                    kept, writes = max(kept, value), writes + 1
                elif value > 0:  # an add's answer: its value was on disk before
                    self.assertGreaterEqual(kept, value)
            self.assertEqual(kept, 200)
            # Deliveries read together share a write.
            self.assertLess(writes, 200)

    def test_the_kept_state_file(self):
        path = os.path.join(self.dir, "x.kept")
        self.assertIsNone(read_kept_state(path, "counter"))
        write_kept_state(path, "counter", 42, b"a\nb", b"\x0a\x00", view=6)
        with open(path, "rb") as f:  # the C++ library's format (invocation/kept_state.h)
            self.assertEqual(f.read(), b"cohort-kept-state 3\ngroup counter\nposition 42\nview 6\n"
                                       b"size 3\ncalls 2\na\nb\x0a\x00")
        self.assertEqual(read_kept_state(path, "counter"), (42, b"a\nb", b"\x0a\x00", 6))
        with open(path, "wb") as f:  # version 2: no view
            f.write(b"cohort-kept-state 2\ngroup counter\nposition 7\nsize 2\ncalls 1\nabc")
        self.assertEqual(read_kept_state(path, "counter"), (7, b"ab", b"c", 0))
        with open(path, "wb") as f:  # version 1: no view, no calls
            f.write(b"cohort-kept-state 1\ngroup counter\nposition 7\nsize 2\nab")
        self.assertEqual(read_kept_state(path, "counter"), (7, b"ab", b"", 0))
        with open(path, "wb") as f:
            f.write(b"cohort-kept-state 2\ngroup counter\nposition 7\nsize 2\ncalls 5\nab")
        with self.assertRaisesRegex(ValueError, "holds 2 bytes of state and calls"):
            read_kept_state(path, "counter")
        write_kept_state(path, "counter", 42, b"a\nb")
        with self.assertRaisesRegex(ValueError, "not 'orders'"):
            read_kept_state(path, "orders")
        with self.assertRaises(ValueError):
            Servant(self.addresses[0], "counter", {}, keep_state_in=path).start()


class PythonBackpressureTest(unittest.TestCase):
    """A client refused for backpressure (limits.max_unordered_requests) waits for room and
    sends again (backpressure_wait), or with backpressure_wait=0 gets RESOURCE_EXHAUSTED at
    once; n2 and n3 frozen (SIGSTOP), so that n1 orders nothing until they go on."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        self.cluster = LocalCluster(
            COHORTD, "counter", self.dir,
            extra_yaml="limits: {max_unordered_requests: 8}\n"
                       "failure_detector: {fail_fast_after_ms: 8000}\n")
        self.addresses = self.cluster.client_addresses
        self.counters = [Counter() for _ in self.addresses]
        self.servants = [Servant(address, "counter", counter.handlers())
                         for address, counter in zip(self.addresses, self.counters)]
        for servant in self.servants:
            servant.start()
        self.client = CohortClient(self.addresses[0], "python-waits")
        self.no_wait = CohortClient(self.addresses[0], "python-no-wait", backpressure_wait=0)
        self.assertTrue(eventually(lambda: len(self.client.invoke(
            "counter", "get", b"", mode="all", deadline_ms=2000).replies) == 3, 20))

    def tearDown(self):
        for proc in self.cluster.procs:
            os.kill(proc.pid, signal.SIGCONT)
        self.client.close()
        self.no_wait.close()
        for servant in self.servants:
            servant.stop()
        self.cluster.stop()

    def freeze_others(self, sig):
        for proc in self.cluster.procs[1:]:
            os.kill(proc.pid, sig)
        time.sleep(0.2)

    def test_a_full_backlog_waits_or_is_refused(self):
        self.freeze_others(signal.SIGSTOP)
        for _ in range(8):
            self.no_wait.invoke("counter", "add", b"1", mode="one_way")
        with self.assertRaises(grpc.RpcError) as refused:
            self.no_wait.invoke("counter", "add", b"1", mode="one_way")
        self.assertEqual(refused.exception.code(), grpc.StatusCode.RESOURCE_EXHAUSTED)
        self.assertIn("limits.max_unordered_requests", refused.exception.details())
        for _ in range(8):
            self.client.invoke("counter", "add", b"1", mode="one_way")
        outcome = {}

        def ninth():
            try:
                self.client.invoke("counter", "add", b"1", mode="one_way")
                outcome["sent"] = time.monotonic()
            except grpc.RpcError as error:
                outcome["error"] = error
        waiter = threading.Thread(target=ninth)
        waiter.start()
        waiter.join(0.6)
        self.assertTrue(waiter.is_alive())  # waiting for room
        self.freeze_others(signal.SIGCONT)
        waiter.join(10)
        self.assertFalse(waiter.is_alive())
        self.assertNotIn("error", outcome)
        # 8 from no_wait, 9 from client, each applied once at every replica.
        self.assertTrue(eventually(lambda: sorted(r.payload for r in self.client.invoke(
            "counter", "get", b"", mode="all", deadline_ms=2000).replies) == [b"17"] * 3, 20))


if __name__ == "__main__":
    COHORTD = sys.argv.pop(1)
    MAKE_TEST_CA = sys.argv.pop(1)
    unittest.main(verbosity=2)
