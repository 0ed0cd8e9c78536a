"""A two-node Ray cluster in two network namespaces of this machine (made here, as root, and removed
afterwards): one node's raylet killed by its pid mid-study, and the report still equals the serial
run's. Nothing leaves the namespaces' own addresses; the machine's other Rays are never touched
(no ``ray stop``: only the processes inside these namespaces are killed)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from .test_ray import SRC, results, serial_reports, wait_for, write_study

if os.environ.get("PFR_REQUIRE_RAY") != "1":
    pytest.importorskip("ray", reason="Ray is not installed (pip install 'pfr[ray]'; make test installs it)")

RAY = Path(sys.executable).with_name("ray")
SUBNET = "10.251.77"


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


def _netns_inode(name: str) -> int:
    return os.stat(f"/run/netns/{name}").st_ino


def _processes_in(inodes: set[int]) -> list[int]:
    """The processes whose network namespace is one of ``inodes``: only what this test started."""
    pids = []
    for ns in Path("/proc").glob("[0-9]*/ns/net"):
        try:
            if os.stat(ns).st_ino in inodes:
                pids.append(int(ns.parts[2]))
        except OSError:
            continue
    return pids


@pytest.fixture
def namespaces() -> Iterator[tuple[str, str, Path]]:
    """Two namespaces joined by a veth pair (SUBNET.1 and SUBNET.2) and a folder for their Rays' files
    (short: Ray's socket paths must fit in 107 bytes); skips where namespaces cannot be made."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("the two-node Ray test makes network namespaces: it needs root and iproute2 (`ip`)")
    tag = uuid.uuid4().hex[:6]
    a, b = f"pfr-ray-a-{tag}", f"pfr-ray-b-{tag}"
    made: list[str] = []
    try:
        for ns in (a, b):
            _ip("netns", "add", ns)
            made.append(ns)
        _ip("link", "add", f"pra{tag}", "type", "veth", "peer", "name", f"prb{tag}")
        _ip("link", "set", f"pra{tag}", "netns", a)
        _ip("link", "set", f"prb{tag}", "netns", b)
        for ns, dev, host in ((a, f"pra{tag}", 1), (b, f"prb{tag}", 2)):
            _ip("-n", ns, "addr", "add", f"{SUBNET}.{host}/24", "dev", dev)
            _ip("-n", ns, "link", "set", dev, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
    except (subprocess.CalledProcessError, OSError) as exc:
        for ns in made:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        reason = exc.stderr.strip() if isinstance(exc, subprocess.CalledProcessError) else str(exc)
        pytest.skip(f"network namespaces cannot be made here ({reason}); test_ray.py's one-node tests still run")
    inodes = {_netns_inode(a), _netns_inode(b)}
    temp = Path(tempfile.mkdtemp(prefix="pfr-ray-", dir="/tmp"))
    try:
        yield a, b, temp
    finally:
        for _ in range(50):  # every process of the two namespaces (Ray's, the driver), and nothing else
            pids = _processes_in(inodes)
            if not pids:
                break
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.1)
        for ns in (a, b):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        shutil.rmtree(temp, ignore_errors=True)


def _ancestor(pid: int, name: str) -> int:
    """The nearest ancestor of ``pid`` whose command is ``name``."""
    while pid > 1:
        stat = Path(f"/proc/{pid}/stat").read_text()
        comm, rest = stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :].split()
        if comm == name:
            return pid
        pid = int(rest[1])
    raise AssertionError(f"no {name} above the blocked worker")


def test_a_killed_node_loses_nothing(
    namespaces: tuple[str, str, Path], tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b, temp = namespaces
    study = write_study(tmp_path, data_dir, replicas=2)
    flags = tmp_path / "flags"
    flags.mkdir()
    serial = serial_reports(study, flags, monkeypatch)
    # the python model blocks only on node b (its namespace), writing its pid: mid-study there
    (flags / "block").write_text(str(_netns_inode(b)))
    env = {
        **os.environ, "PYTHONPATH": SRC, "PFR_RAY_TEST_DIR": str(flags), "NO_COLOR": "1",
        "RAY_AUTH_MODE": "disabled",  # a cluster inside two private namespaces, for this test only
        "RAY_health_check_period_ms": "500", "RAY_health_check_failure_threshold": "4",  # a dead node seen in ~2 s
    }  # fmt: skip
    start = [str(RAY), "start", "--block", "--disable-usage-stats"]
    logs = {}

    def node(ns: str, host: int, *args: str) -> subprocess.Popen[bytes]:
        logs[ns] = tmp_path / f"{ns}.log"
        where = [f"--node-ip-address={SUBNET}.{host}", f"--temp-dir={temp}/r{host}"]
        cmd = ["ip", "netns", "exec", ns, *start, *where]
        return subprocess.Popen([*cmd, *args], env=env, stdout=logs[ns].open("wb"), stderr=subprocess.STDOUT)

    # three CPUs for three actors: one on the head, two on node b (which model lands where is Ray's choice;
    # either way the driver must finish — a restarted actor may wait for the CPU another model holds)
    head = node(a, 1, "--head", "--port=6379", "--num-cpus=1", "--include-dashboard=false")
    wait_for_line(logs[a], "Ray runtime started", head)
    worker = node(b, 2, f"--address={SUBNET}.1:6379", "--num-cpus=2")
    wait_for_line(logs[b], "Ray runtime started", worker)
    args = ["study", str(study), "--store", "ray", "--unit-texts", "4", "--no-progress", "--executor", "ray",
            "--address", f"{SUBNET}.1:6379"]  # fmt: skip
    driver = subprocess.Popen(
        ["ip", "netns", "exec", a, sys.executable, "-c", "from pfr.cli import main; main()", *args],
        cwd=tmp_path, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    blocked = int(wait_for(flags / "pid", driver))
    os.kill(_ancestor(blocked, "raylet"), signal.SIGKILL)  # node b is gone, its workers with it
    _, err = driver.communicate(timeout=300)
    assert driver.returncode == 0, err
    for name, data in serial.items():
        assert (tmp_path / "ray" / name).read_bytes() == data, name
    assert results(tmp_path / "ray") == results(tmp_path / "serial")


def wait_for_line(log: Path, text: str, proc: subprocess.Popen[bytes], limit: float = 180) -> None:
    deadline = time.monotonic() + limit
    while text not in log.read_text(errors="replace"):
        assert proc.poll() is None, log.read_text(errors="replace")[-2000:]
        assert time.monotonic() < deadline, f"{log.name}: no {text!r}"
        time.sleep(0.1)
