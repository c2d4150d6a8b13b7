#!/usr/bin/env python3
"""The Python client example (clients/python) against three real cohortd processes with Python
servants: Attach, GroupDetails, Invoke in every waiting mode, Multicast, errors, Admin.Status.

    python_client_test.py COHORTD_BINARY     (PYTHONPATH: the generated stubs and clients/python)
"""
import os
import sys
import tempfile
import time
import unittest

import grpc

from cohort_client import CohortClient, Servant
from local_cluster import LocalCluster

COHORTD = None


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


if __name__ == "__main__":
    COHORTD = sys.argv.pop(1)
    unittest.main(verbosity=2)
