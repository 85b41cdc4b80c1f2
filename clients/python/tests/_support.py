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


def live_url() -> str:
    url = os.environ.get("PERSONAQ_URL", "")
    if not url:
        if os.environ.get("PERSONAQ_REQUIRE_LIVE") == "1":
            raise AssertionError("PERSONAQ_URL is not set but PERSONAQ_REQUIRE_LIVE=1")
        raise unittest.SkipTest("PERSONAQ_URL not set: no live personaq to test against")
    return url


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
