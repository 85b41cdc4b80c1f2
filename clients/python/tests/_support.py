"""Shared by the tests: makes the package importable from the source tree
and connects the live tests to a running personaq.

The live tests read PERSONAQ_URL and PERSONAQ_API_TOKEN. Without
PERSONAQ_URL they skip, unless PERSONAQ_REQUIRE_LIVE=1 (set by the Go
harness, clients/python_test.go), which makes a missing server a failure.
"""

import os
import sys
import unittest
import uuid

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import personaq  # noqa: E402  (after the path is set)


def live_env(name: str, what: str) -> str:
    """The variable's value; without it the test skips (fails under
    PERSONAQ_REQUIRE_LIVE=1)."""
    value = os.environ.get(name, "")
    if not value:
        if os.environ.get("PERSONAQ_REQUIRE_LIVE") == "1":
            raise AssertionError("%s is not set but PERSONAQ_REQUIRE_LIVE=1" % name)
        raise unittest.SkipTest("%s not set: no %s to test against" % (name, what))
    return value


def live_url() -> str:
    return live_env("PERSONAQ_URL", "live personaq")


def task(prefix: str) -> str:
    """A task id no other test uses."""
    return "%s-%s" % (prefix, uuid.uuid4().hex[:12])


class LiveCase(unittest.TestCase):
    """A test against the live personaq, with a Client in self.client."""

    client: personaq.Client

    @classmethod
    def setUpClass(cls) -> None:
        live_url()
        cls.client = personaq.Client(timeout=20)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.client.close()


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def api_binary():
    """The personaq binary and dev's NATS URL, for tests that start their own
    `personaq api` (PERSONAQ_BIN, PERSONAQ_NATS_URL; the Go harness sets them)."""
    bin_, nats = os.environ.get("PERSONAQ_BIN", ""), os.environ.get("PERSONAQ_NATS_URL", "")
    if not (bin_ and nats):
        if os.environ.get("PERSONAQ_REQUIRE_LIVE") == "1":
            raise AssertionError("PERSONAQ_BIN and PERSONAQ_NATS_URL must be set with PERSONAQ_REQUIRE_LIVE=1")
        raise unittest.SkipTest("PERSONAQ_BIN and PERSONAQ_NATS_URL not set: cannot start `personaq api`")
    return bin_, nats


class APIProcessCase(unittest.TestCase):
    """A test that runs `personaq api` processes of its own on self.port,
    beside the live personaq (on its NATS); they are killed when it ends."""

    scheme = "http"
    api_args: tuple = ()
    ssl_context = None

    def setUp(self) -> None:
        import tempfile

        live_url()
        self.bin, self.nats = api_binary()
        self.port = free_port()
        self.url = "%s://127.0.0.1:%d" % (self.scheme, self.port)
        self.log = tempfile.TemporaryFile()
        self.addCleanup(self.log.close)
        self.procs = []
        self.addCleanup(self.stop_all)

    def start_api(self):
        import subprocess
        import time
        import urllib.request

        p = subprocess.Popen([self.bin, "api", "--listen", "127.0.0.1:%d" % self.port, "--nats-url", self.nats,
                              *self.api_args], stdout=self.log, stderr=self.log, env=dict(os.environ))
        self.procs.append(p)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if p.poll() is not None:
                self.fail("personaq api exited (%d):\n%s" % (p.returncode, self.output()))
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=2, context=self.ssl_context) as r:
                    if r.status == 200:
                        return p
            except OSError:
                time.sleep(0.1)
        self.fail("personaq api not healthy within 30s:\n" + self.output())

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read().decode("utf-8", "replace")

    def stop_all(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()
