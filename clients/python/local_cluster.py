"""Three cohortd daemons on 127.0.0.1 with one group of n1..n3, for Python tests and benches.

    cluster = LocalCluster(cohortd_binary, "echo", work_dir)   # started; ports picked here
    cluster.client_addresses                                   # ["127.0.0.1:P1", ...]
    cluster.kill(2); cluster.restart(2)                       # kill -9 and start n3 again
    cluster.stop()                                             # kills the daemons
"""
import os
import random
import socket
import subprocess
import time


_claims = []  # the abstract Unix sockets claiming this process's ports (_claim)


def _claim(port):
    """Claims `port` for as long as this process lives, as tools/subprocess.cc ClaimPort does
    (the abstract Unix socket "cohort-port-<port>"): no other test picking ports this way takes
    it meanwhile. False if another process holds it."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.bind("\0cohort-port-%d" % port)
    except OSError:
        s.close()
        return False
    _claims.append(s)
    return True


def _bind_once(port):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return 0
        return s.getsockname()[1]


def free_port():
    """A port free now on 127.0.0.1 and claimed (_claim), at random below the kernel's ephemeral
    range where it leaves room (outgoing connections take ports of that range, so a daemon
    restarted on its port would find it taken: tools/subprocess.cc PickPort)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 0
    below = low > 11000
    for attempt in range(2000):  # the kernel's pick when that range is too small, or taken
        port = _bind_once(random.randrange(10000, low) if below and attempt < 1000 else 0)
        if port and _claim(port):
            return port
    return _bind_once(0)


def wait_port(port, seconds=10):
    until = time.time() + seconds
    while time.time() < until:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return True
        time.sleep(0.05)
    return False


class LocalCluster:
    def __init__(self, cohortd, group, work_dir, n=3, extra_yaml="", group_options=""):
        """extra_yaml: more top-level keys (tls:, auth:; without tls: the daemons run with
        tls: {insecure: true}; "{node}" is replaced by the daemon's name); group_options: more
        keys of the group, e.g. "acl: {...}" or "durable: true"."""
        peer = [free_port() for _ in range(n)]
        self.client_ports = [free_port() for _ in range(n)]
        self.client_addresses = ["127.0.0.1:%d" % port for port in self.client_ports]
        peers = "".join("  - {name: n%d, id: %d, address: 127.0.0.1:%d}\n" % (i + 1, i + 1, p)
                        for i, p in enumerate(peer))
        members = ", ".join("n%d" % (i + 1) for i in range(n))
        self.procs = []
        self._commands = []  # (argv, log path) per daemon
        for i in range(n):
            path = os.path.join(work_dir, "n%d.yaml" % (i + 1))
            with open(path, "w") as f:
                tls = "" if "tls:" in extra_yaml else "tls: {insecure: true}\n"
                f.write("node: n%d\nlog_level: warn\nlisten: {peer: 127.0.0.1:%d, "
                        "client: 127.0.0.1:%d}\n%s%speers:\n%sgroups:\n"
                        "  - {name: %s, members: [%s]%s}\n"
                        % (i + 1, peer[i], self.client_ports[i], tls,
                           extra_yaml.replace("{node}", "n%d" % (i + 1)), peers, group,
                           members, ", " + group_options if group_options else ""))
            self._commands.append(([cohortd, "--config", path],
                                   os.path.join(work_dir, "n%d.log" % (i + 1))))
            self.procs.append(self._spawn(i))
        for port in self.client_ports:
            if not wait_port(port):
                self.stop()
                raise RuntimeError("cohortd did not start (its client port %d)" % port)

    def _spawn(self, i):
        command, log_path = self._commands[i]
        with open(log_path, "a") as log:
            # The daemon keeps its own descriptor of the log.
            return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log)

    def kill(self, i):
        """kill -9 of daemon n(i+1)."""
        self.procs[i].kill()
        self.procs[i].wait()

    def restart(self, i):
        """Starts daemon n(i+1) again (after kill), with the same configuration."""
        self.procs[i] = self._spawn(i)
        if not wait_port(self.client_ports[i]):
            raise RuntimeError("cohortd n%d did not start again" % (i + 1))

    def stop(self):
        for proc in self.procs:
            proc.kill()
            proc.wait()
        self.procs = []
