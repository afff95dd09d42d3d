"""The test bed of the Python suite: the same six-node cluster (3 masters, 3 replicas)
as the Rust tests, started by the Rust side of the mixed tests (`examples/interop.rs
testbed`) and removed at the end of the session. `CLUSTER_SERVER=valkey` runs it on
Valkey 9.1, `CLUSTER_TLS=1` over TLS (every client of the suite, Python and Rust, then
trusts the test bed's CA, which the children of the tests find in CLUSTER_RWLOCK_CA);
`CLUSTER_RWLOCK_URL=redis://host:port` uses a running cluster instead (with
`CLUSTER_RWLOCK_CA=ca.pem` for a `rediss://` one): then nothing is started, and the Rust
peer is built only for the mixed tests, which are skipped when there is no cargo.
"""

import os
import pathlib
import shutil
import subprocess
import sys
import threading
import time
import uuid

import pytest

import cluster_rwlock

ROOT = pathlib.Path(__file__).resolve().parents[2]
STARTUP_TIMEOUT = 300.0


def tls():
    """The keyword arguments of connect() that trust the test bed's CA, if it has one."""
    ca = os.environ.get("CLUSTER_RWLOCK_CA")
    return {"tls_ca_pem": pathlib.Path(ca).read_bytes()} if ca else {}


# The same, for the Python code of a child process (one line: `TLS` is its keywords).
CHILD_TLS = ('import os, pathlib; ca = os.environ.get("CLUSTER_RWLOCK_CA"); '
             'TLS = {"tls_ca_pem": pathlib.Path(ca).read_bytes()} if ca else {}')


def rust_tls():
    """The same for the Rust peer's command line."""
    ca = os.environ.get("CLUSTER_RWLOCK_CA")
    return ["--ca", ca] if ca else []


def queued(lock, who="waiting_writers", within=10.0):
    """Waits until `lock` has someone in `who` (its waiting writers, or readers)."""
    deadline = time.monotonic() + within
    while not lock.state()[who] and time.monotonic() < deadline:
        time.sleep(0.02)
    assert lock.state()[who], "the waiter never queued"


def waiter_for_write(lock, timeout):
    """A thread that waits to write `lock` (and gives the hold back): its outcome,
    "granted" or the LockError it raised, goes into the list returned with it."""
    outcome = []

    def wait():
        try:
            lock.write(timeout=timeout).release()
            outcome.append("granted")
        except cluster_rwlock.LockError as e:
            outcome.append(e)

    thread = threading.Thread(target=wait)
    thread.start()
    return thread, outcome


def pytest_report_header(config):
    """Which cluster_rwlock runs: an installed wheel or a build of the working tree."""
    return "cluster_rwlock: " + cluster_rwlock.__file__


_built = {}


def _interop_binary():
    """The Rust peer (`examples/interop.rs`), built once (cargo reuses what `cargo test`
    built); None when there is no cargo on the PATH."""
    if "path" not in _built:
        if shutil.which("cargo") is None:
            _built["path"] = None
        else:
            subprocess.run(
                ["cargo", "build", "--quiet", "--features", "tls", "--example", "interop"],
                cwd=ROOT, check=True,
            )
            target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
            _built["path"] = target / "debug" / "examples" / "interop"
    return _built["path"]


@pytest.fixture(scope="session")
def interop() -> pathlib.Path:
    """The Rust peer of the mixed tests."""
    path = _interop_binary()
    if path is None:
        pytest.skip("the Rust peer (examples/interop.rs) is built by cargo, and there is "
                    "no cargo on the PATH")
    return path


@pytest.fixture(scope="session")
def seeds():
    """The seed URLs of the session's cluster: CLUSTER_RWLOCK_URL's, or the test bed's,
    started by the Rust peer (which builds the server's image if there is none)."""
    url = os.environ.get("CLUSTER_RWLOCK_URL")
    if url:
        yield [url]
        return
    interop = _interop_binary()
    if interop is None:
        pytest.fail("the test bed is started by the Rust peer (examples/interop.rs), built "
                    "by cargo, and there is no cargo on the PATH: install the Rust "
                    "toolchain, or set CLUSTER_RWLOCK_URL to a running cluster")
    proc = subprocess.Popen(
        [str(interop), "testbed"], cwd=ROOT, stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, text=True,
    )
    urls, lines = [], []
    deadline = time.monotonic() + STARTUP_TIMEOUT
    timer = threading.Timer(STARTUP_TIMEOUT, proc.kill)
    timer.start()
    try:
        for line in proc.stdout:
            lines.append(line.strip())
            if line.startswith("URL "):
                urls.append(line.split()[1])
            elif line.startswith("CA "):
                os.environ["CLUSTER_RWLOCK_CA"] = line.split(" ", 1)[1].strip()
            elif line.startswith("SERVER "):
                print("test bed:", line.strip(), file=sys.stderr)
            elif line.strip() == "READY" or line.startswith("ERROR"):
                break
    finally:
        timer.cancel()
    if not urls or time.monotonic() > deadline or lines[-1:] != ["READY"]:
        proc.kill()
        pytest.fail("the test bed did not start: " + " | ".join(lines[-5:]))
    try:
        yield urls
    finally:
        proc.stdin.close()  # the test bed removes the cluster
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture
def client(seeds):
    c = cluster_rwlock.connect(seeds, client_name="pytest", **tls())
    yield c
    c.close()


@pytest.fixture
def name():
    """A lock name of this test's own, with a hashtag for its keys."""
    return "py-%s:{%s}" % (os.getpid(), uuid.uuid4().hex[:12])
