"""The README's code blocks, run as they are against the live personaq
(each in its own interpreter, as a reader would paste it), and the
package's pyproject.toml built by its declared backend."""

import os
import re
import subprocess
import sys
import tempfile
import unittest
import zipfile

import _support

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def blocks():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        return FENCE.findall(f.read())


class ReadmeTest(unittest.TestCase):
    def test_every_block_is_python(self):
        langs = [lang for lang, _ in blocks()]
        self.assertGreaterEqual(len(langs), 3)
        # A block in another language would not be run by the test below.
        self.assertEqual(set(langs), {"python"})

    def test_python_blocks_run(self):
        _support.live_url()
        env = dict(os.environ, PYTHONPATH=ROOT)
        for i, (_, code) in enumerate(blocks()):
            with self.subTest(block=i, first_line=code.splitlines()[0]):
                p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                   timeout=120)
                self.assertEqual(p.returncode, 0, "stdout:\n%s\nstderr:\n%s" % (p.stdout, p.stderr))
                self.assertTrue(p.stdout.strip(), "the block printed nothing")
                self.assertNotIn("blocked:", p.stdout)
                self.assertNotIn("stopped:", p.stdout)


class PackagingTest(unittest.TestCase):
    def test_package_builds_with_the_declared_backend(self):
        try:
            import setuptools
            from setuptools import build_meta
        except ImportError:
            raise unittest.SkipTest("setuptools is not installed: cannot build the package offline")
        import contextlib
        import importlib.util
        import io
        import shutil
        import tarfile
        version = tuple(int(x) for x in setuptools.__version__.split(".")[:2])
        if version < (61, 0):
            raise unittest.SkipTest("setuptools %s is older than the 61 pyproject.toml requires" % setuptools.__version__)
        wheel = importlib.util.find_spec("wheel") is not None or version >= (70, 1)
        with tempfile.TemporaryDirectory() as tmp:
            src, out = os.path.join(tmp, "src"), os.path.join(tmp, "out")
            shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns("tests", "__pycache__", "build", "*.egg-info"))
            cwd = os.getcwd()
            os.chdir(src)
            try:
                with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                    name = build_meta.build_wheel(out) if wheel else build_meta.build_sdist(out)
            finally:
                os.chdir(cwd)
            path = os.path.join(out, name)
            if wheel:
                with zipfile.ZipFile(path) as whl:
                    files = set(whl.namelist())
            else:
                with tarfile.open(path) as sdist:
                    files = {n.split("/", 1)[1] for n in sdist.getnames() if "/" in n}
        self.assertIn("personaq/__init__.py", files)
        self.assertIn("personaq/py.typed", files)

if __name__ == "__main__":
    unittest.main()
