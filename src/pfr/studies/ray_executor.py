"""``pfr study --executor ray``: a study's work spread over Ray actors and merged exactly into its store.

One process scores a study's cells one after another; on Ray the work is cut into *units* — model ×
dataset/panel × design × shard of texts (:func:`split_by_text`: a text's requests are always in one
unit, so a quad never splits). Each model gets one actor per replica (its
``num-cpus``/``num-gpus`` from the study file) that loads the model once; the driver hands an idle
actor the next unit of its model. A unit scores into its own shard store under ``STORE/.units/``
(a shared filesystem on a cluster) and is merged into the study store as soon as it finishes; its id
then goes to ``STORE/.units/merged``, so a rerun after the driver died scores only what is missing.

Faults: a killed worker or node — Ray restarts the actor and retries the call, which resumes the
unit's shard store (results are keyed, nothing is doubled). A unit that raises fails alone; the rest
is merged and the failures are named at the end (exit 1). Once its model's queue is empty, a unit
running longer than ``straggler`` × the median unit time gets a copy on an idle actor of its model; the
first copy to finish is merged (scores are deterministic and keyed, so the merge is idempotent). The
test is per model, not "all queues empty": when a node dies, its actors restart only where CPUs are
free, and those may be held by another model's actor whose own queue still has work — with a global
test the driver would wait for each other's work forever.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import queue
import shutil
import statistics
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pfr.design.types import Request
from pfr.errors import PfrError
from pfr.models.registry import safe_spec
from pfr.run.merge import merge_stores
from pfr.run.session import close_backend, run_model
from pfr.studies.execute import build_request_sets, load_study_model, write_reports
from pfr.studies.schema import Study

#: the folder of shard stores and the merged-units ledger, inside the study store
UNITS_DIR = ".units"
#: a unit is scored again after this many failed calls on a killed worker (its partial store is kept)
TASK_RETRIES = 3


class UnitsFailed(PfrError):
    """Some units raised; the others are merged. Exit 1, like a failed check: the input was read."""

    exit_code = 1


@dataclass(frozen=True)
class Unit:
    """One piece of work: ``requests`` (whole texts) of one model, scored into ``dest`` when merged."""

    uid: str
    model: int  # index into study.models
    setting: int  # the model × request set, numbered in the order a one-process run scores them
    label: str
    requests: tuple[Request, ...]
    dest: Path


def plan_units(study: Study, unit_texts: int) -> list[Unit]:
    """Every unit of ``study``, about ``unit_texts`` texts each; ids are content hashes (model, options,
    template, destination, requests), so a changed study file never reuses a stale unit."""
    units: list[Unit] = []
    request_sets = build_request_sets(study)
    setting = -1
    for i, m in enumerate(study.models):
        ident = json.dumps([m.spec, dict(m.options), repr(study.template)], sort_keys=True, default=str)
        for d, panel, design, reqs, dest in request_sets:
            setting += 1
            shards = split_by_text(reqs, unit_texts)
            count = len(shards)
            for k, shard in enumerate(shards):
                h = hashlib.sha256(f"{ident}\0{dest}".encode())
                for r in shard:
                    h.update(json.dumps(r.to_dict(), sort_keys=True, default=str).encode())
                label = f"{safe_spec(m.spec)} · {d.name}/{panel} · {design.name} · shard {k + 1}/{count}"
                units.append(Unit(h.hexdigest()[:20], i, setting, label, tuple(shard), dest))
    return units


def split_by_text(requests: Sequence[Request], size: int) -> list[list[Request]]:
    """``requests`` in units of whole texts, about ``size`` texts each and as even as can be (a hash of
    the text id, as ``pfr run --shard`` uses, leaves small units several times apart: slow tails)."""
    texts = list(dict.fromkeys(r.text_id for r in requests))
    count = max(1, -(-len(texts) // size))
    place = {t: i * count // len(texts) for i, t in enumerate(texts)}
    units: list[list[Request]] = [[] for _ in range(count)]
    for r in requests:
        units[place[r.text_id]].append(r)
    return units


class Ledger:
    """The ids of the units merged into the study store (one per line, appended after each merge)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.path = folder / "merged"
        self.done = set(self.path.read_text(encoding="utf-8").split()) if self.path.is_file() else set()

    def add(self, uid: str) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as f:
            f.write(uid + "\n")
            f.flush()
            os.fsync(f.fileno())
        self.done.add(uid)


class Scorer:
    """A Ray actor's body: one model of the study, loaded once, scoring units into shard stores."""

    def __init__(self, study: Study, index: int) -> None:
        self.backend = load_study_model(study, study.models[index])

    def score(self, requests: Sequence[Request], shard: str) -> tuple[int, int]:
        summary = run_model(self.backend, list(requests), shard, progress=False)
        return summary.scored, summary.cached

    def pid(self) -> int:
        return os.getpid()

    def close(self) -> None:
        close_backend(self.backend)


def check_executor(executor: str, address: str | None, shard: object) -> None:
    """``--executor``, ``--address`` and ``--shard`` that do not go together: one line, exit 2."""
    if executor not in ("local", "ray"):
        raise PfrError(f"--executor {executor}: expected local or ray")
    if address is not None and executor != "ray":
        raise PfrError("--address needs --executor ray")
    if shard is not None and executor == "ray":
        raise PfrError("--shard and --executor ray: a Ray run spreads the whole study itself; give one")


def run_study_ray(
    study: Study,
    *,
    address: str | None = None,
    unit_texts: int = 64,
    straggler: float = 3.0,
    log: bool = True,
) -> list[Path]:
    """Score ``study`` on Ray (a local, 127.0.0.1-only Ray without ``address``), then write its reports:
    units of about ``unit_texts`` texts; once its model's queue is empty, a unit running longer than
    ``straggler`` × the median unit time gets a copy."""
    units = plan_units(study, unit_texts)
    ledger = Ledger((study.store / UNITS_DIR).absolute())  # a worker's working folder is not the driver's
    pending = [u for u in units if u.uid not in ledger.done]
    if log and len(pending) < len(units):
        print(f"{len(units) - len(pending)} of {len(units)} units already merged", flush=True)
    if pending:
        failed = _Driver(study, ledger, straggler, log).run(units, pending, address)
        if failed:
            names = "; ".join(f"{u.label}: {why}" for u, why in failed)
            raise UnitsFailed(
                f"{len(failed)} of {len(units)} units failed (the others are merged into {study.store}; "
                f"rerun to retry them): {names}"
            )
    return write_reports(study)


def connect(address: str | None) -> bool:
    """Join the Ray at ``address``, or start a local one that talks over 127.0.0.1 only; returns
    whether this call started Ray (and so must shut it down)."""
    if address is None:
        # By default Ray replaces 127.0.0.1 with the machine's interface address (its agents then
        # listen there); a Ray told that it is no cluster stays on loopback, reachable from nowhere
        # else. Ray reads the switch when it is imported, and its processes inherit it.
        os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    try:
        import ray
        from ray._private import ray_constants
    except ImportError:
        raise PfrError("--executor ray needs Ray: pip install 'pfr[ray]'") from None
    if ray.is_initialized():
        return False
    quiet: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.ERROR, "configure_logging": False}
    if address is None:
        ray_constants.ENABLE_RAY_CLUSTER = False  # Ray imported before this call read the switch unset
        # "local": a Ray of its own, never one that `ray start` left on this machine
        ray.init(address="local", _node_ip_address="127.0.0.1", include_dashboard=False, **quiet)
    else:
        try:
            ray.init(address=address, **quiet)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise PfrError(f"--address {address}: cannot join the Ray cluster ({exc})") from None
    return True


class _Driver:
    """The queue, the actors, the merges: state of one ``run_study_ray`` call."""

    def __init__(self, study: Study, ledger: Ledger, straggler: float, log: bool) -> None:
        self.study, self.ledger, self.k, self.log = study, ledger, straggler, log
        self.durations: list[float] = []
        self.failed: list[tuple[Unit, str]] = []

    def run(self, units: list[Unit], pending: list[Unit], address: str | None) -> list[tuple[Unit, str]]:
        import ray

        started = connect(address)
        self.merger = Merger(self.ledger, self.log, units)
        try:
            self._check_resources(ray.cluster_resources(), {u.model for u in pending})
            self._loop(ray, pending)
        finally:
            self.failed += self.merger.close()  # what was scored is merged, also on Ctrl-C
            if started:
                ray.shutdown()
            for uid in self.ledger.done:  # a straggler's losing copy, stopped by the shutdown
                for path in (self.ledger.folder / uid, self.ledger.folder / f"{uid}.copy"):
                    shutil.rmtree(path, ignore_errors=True)
        return self.failed

    def _check_resources(self, cluster: dict[str, float], models: set[int]) -> None:
        for i in sorted(models):
            m = self.study.models[i]
            for key, need in (("CPU", m.num_cpus), ("GPU", m.num_gpus)):
                if need > cluster.get(key, 0.0):
                    raise PfrError(
                        f"{self.study.source}: models[{i}] ({safe_spec(m.spec)}): num-{key.lower()}s = {need:g} "
                        f"but the Ray cluster has {cluster.get(key, 0.0):g} {key}s in all"
                    )

    def _loop(self, ray: Any, pending: list[Unit]) -> None:
        remote = ray.remote(max_restarts=-1, max_task_retries=TASK_RETRIES)(Scorer)
        queues: dict[int, deque[Unit]] = {}
        for u in pending:
            queues.setdefault(u.model, deque()).append(u)
        idle: dict[int, list[Any]] = {}
        for i in queues:
            m = self.study.models[i]
            opts = {"num_cpus": m.num_cpus, "num_gpus": m.num_gpus, "scheduling_strategy": "SPREAD"}
            idle[i] = [remote.options(**opts).remote(self.study, i) for _ in range(m.replicas)]
        running: dict[Any, tuple[Unit, Any, float, Path]] = {}
        finished: set[str] = set()
        copied: set[str] = set()

        def start(u: Unit, actor: Any, copy: bool) -> None:
            shard = self.ledger.folder / (u.uid + (".copy" if copy else ""))
            running[actor.score.remote(u.requests, str(shard))] = (u, actor, time.monotonic(), shard)

        while any(queues.values()) or any(u.uid not in finished for u, *_ in running.values()):
            for i, q in queues.items():
                while q and idle[i]:
                    start(q.popleft(), idle[i].pop(), False)
                if not q and not any(u.model == i and u.uid not in finished for u, *_ in running.values()):
                    # frees the model's CPUs/GPUs for the next model's actors; a copy's loser still
                    # running (or waiting for its actor's restart) is stopped with its actor, once
                    losers = [ref for ref, (u, *_) in running.items() if u.model == i]
                    idle[i] += [running.pop(ref)[1] for ref in losers]
                    self._retire(ray, idle[i])
            if self.durations:  # per model: a dead node's actor may wait for CPUs that another model holds
                limit = self.k * statistics.median(self.durations)
                now = time.monotonic()
                for u, _, t0, _ in list(running.values()):
                    if not queues[u.model] and u.uid not in finished | copied and now - t0 > limit and idle[u.model]:
                        copied.add(u.uid)
                        if self.log:
                            print(f"copy of {u.label} (running {now - t0:.1f} s > {limit:.1f} s)", flush=True)
                        start(u, idle[u.model].pop(), True)
            ready, _ = ray.wait(list(running), num_returns=1, timeout=1.0)
            for ref in ready:
                u, actor, t0, shard = running.pop(ref)
                idle[u.model].append(actor)
                if u.uid in finished:
                    continue  # a straggler's other copy already won
                self._finish(ray, ref, u, shard, time.monotonic() - t0, finished, running)
        for actors in idle.values():
            self._retire(ray, actors)

    def _finish(
        self, ray: Any, ref: Any, u: Unit, shard: Path, seconds: float, finished: set[str], running: dict[Any, Any]
    ) -> None:
        try:
            scored, cached = ray.get(ref)
        except Exception as exc:  # a unit fails alone: named at the end, the rest goes on
            if any(v[0].uid == u.uid for v in running.values()):
                return  # its other copy may still succeed
            finished.add(u.uid)
            self.failed.append((u, _reason(exc)))
            self.merger.fail(u)
            return
        finished.add(u.uid)
        self.durations.append(seconds)
        self.merger.put(u, shard, f"{u.label}: {scored} scored, {cached} stored")

    @staticmethod
    def _retire(ray: Any, actors: list[Any]) -> None:
        for a in actors:
            ray.kill(a)
        actors.clear()


class Merger:
    """Merges finished units into their stores in a thread of its own, so the actors get their next
    unit while the study store grows (a merge reads the whole destination).

    A report lists models, datasets, panels and designs in the order their first results were stored,
    so a unit is merged only once every setting before its own (in the one-process run's order) has a
    unit merged or has no unit left to run: the merged store then reads back as that run's. A unit
    held back when the run is interrupted keeps its shard store; the rerun merges it without scoring."""

    def __init__(self, ledger: Ledger, log: bool, units: Sequence[Unit]) -> None:
        self.ledger, self.log = ledger, log
        self.failed: list[tuple[Unit, str]] = []
        self._left: dict[int, int] = {}
        self._merged = {u.setting for u in units if u.uid in ledger.done}
        for u in units:
            self._left[u.setting] = self._left.get(u.setting, 0) + (u.uid not in ledger.done)
        self._settings = max((u.setting for u in units), default=-1) + 1
        self._frontier = 0
        self._waiting: list[tuple[Unit, Path, str]] = []
        self._queue: queue.Queue[tuple[Unit, Path | None, str] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._work, name="pfr-merge", daemon=True)
        self._thread.start()

    def put(self, unit: Unit, shard: Path, line: str) -> None:
        self._queue.put((unit, shard, line))

    def fail(self, unit: Unit) -> None:
        self._queue.put((unit, None, ""))

    def close(self) -> list[tuple[Unit, str]]:
        """Merge what may be merged, stop; the units whose merge was refused."""
        self._queue.put(None)
        self._thread.join()
        return self.failed

    def _work(self) -> None:
        done = False
        while not done:
            batch = [self._queue.get()]
            while not self._queue.empty():
                batch.append(self._queue.get())
            for item in batch:
                if item is None:
                    done = True
                elif item[1] is None:
                    self._left[item[0].setting] -= 1
                else:
                    self._waiting.append((item[0], item[1], item[2]))
            self._merge_ready()

    def _merge_ready(self) -> None:
        while True:
            while self._frontier < self._settings and (
                self._frontier in self._merged or self._left.get(self._frontier, 0) == 0
            ):
                self._frontier += 1
            ready = [w for w in self._waiting if w[0].setting <= self._frontier]
            if not ready:
                return
            self._waiting = [w for w in self._waiting if w[0].setting > self._frontier]
            by_dest: dict[Path, list[tuple[Unit, Path, str]]] = {}
            for item in sorted(ready, key=lambda w: w[0].setting):
                by_dest.setdefault(item[0].dest, []).append(item)
            for dest, items in by_dest.items():
                try:
                    merge_stores(dest, [shard for _, shard, _ in items])
                except Exception as exc:  # e.g. a clash with the store: these units are named, the rest goes on
                    self.failed += [(u, _reason(exc)) for u, _, _ in items]
                    for u, _, _ in items:
                        self._left[u.setting] -= 1
                    continue
                for u, shard, line in items:
                    self.ledger.add(u.uid)
                    self._merged.add(u.setting)
                    self._left[u.setting] -= 1
                    shutil.rmtree(shard, ignore_errors=True)
                    if self.log:
                        print(line, flush=True)


def _reason(exc: BaseException) -> str:
    """One line for a failed unit: the user's error message where there is one."""
    cause = getattr(exc, "cause", None) or exc
    text = " ".join(str(cause).split()) or type(cause).__name__
    return text if isinstance(cause, PfrError) else f"{type(cause).__name__}: {text}"[:300]
