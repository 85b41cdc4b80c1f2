"""The clients over HTTPS: `personaq api --tls-cert --tls-key` with a
certificate made for the test (PERSONAQ_TLS_CERT, PERSONAQ_TLS_KEY; the Go
harness makes a self-signed one for 127.0.0.1) and a client that trusts
exactly that certificate."""

import asyncio
import os
import ssl
import time
import unittest

from _support import APIProcessCase, task
import personaq


def tls_files():
    cert, key = os.environ.get("PERSONAQ_TLS_CERT", ""), os.environ.get("PERSONAQ_TLS_KEY", "")
    if not (cert and key):
        if os.environ.get("PERSONAQ_REQUIRE_LIVE") == "1":
            raise AssertionError("PERSONAQ_TLS_CERT and PERSONAQ_TLS_KEY must be set with PERSONAQ_REQUIRE_LIVE=1")
        raise unittest.SkipTest("PERSONAQ_TLS_CERT and PERSONAQ_TLS_KEY not set")
    return cert, key


class TLSTest(APIProcessCase):
    scheme = "https"

    def setUp(self) -> None:
        cert, key = tls_files()
        self.api_args = ("--tls-cert", cert, "--tls-key", key)
        self.ssl_context = ssl.create_default_context(cafile=cert)
        super().setUp()
        self.start_api()

    def test_sync_and_async_over_https(self):
        with personaq.Client(self.url, ssl_context=self.ssl_context) as c:
            res = c.run(persona="echo", task_id=task("py-tls"), input={"over": "tls"})
            self.assertEqual(res.output["input"], {"over": "tls"})
            self.assertEqual([e.kind for e in c.events(res.request_id)][-1], "terminal")

        async def main():
            async with personaq.AsyncClient(self.url, ssl_context=self.ssl_context) as c:
                res = await c.run(persona="echo", task_id=task("pya-tls"), input=[1])
                kinds = [e.kind async for e in c.events(res.request_id)]
                return res, kinds
        res, kinds = asyncio.run(main())
        self.assertEqual(res.output["input"], [1])
        self.assertEqual(kinds[-1], "terminal")

    def test_an_untrusted_certificate_is_refused_at_once(self):
        t0 = time.monotonic()
        with personaq.Client(self.url, timeout=10) as c, self.assertRaises(personaq.Unavailable) as cm:
            c.personas()
        self.assertIn("CERTIFICATE_VERIFY_FAILED", str(cm.exception))
        self.assertFalse(cm.exception.retryable)
        self.assertLess(time.monotonic() - t0, 5, "a certificate error is not worth retrying")


if __name__ == "__main__":
    unittest.main()
