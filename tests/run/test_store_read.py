"""Reading a store back: every request once, whatever the number of models that scored it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pfr import api
from pfr.run.store import DB_NAME, Store, StoredResult, prefetch


def test_models_scoring_the_same_requests_share_one_read_of_each(tmp_path: Path, data_dir: Path) -> None:
    requests = api.build("trec", "main", data_dir=data_dir, limit=6)
    store = tmp_path / "store"
    for model in ("baseline:random", "baseline:always-fallback"):
        api.run(model, requests, store, progress=False)
    with Store(store, create=False) as st:
        results = list(st.results())
    assert len(results) == 2 * len(requests)
    by_id: dict[str, list[StoredResult]] = {}
    for r in results:
        by_id.setdefault(r.request.request_id, []).append(r)
    assert len(by_id) == len(requests)
    for pair in by_id.values():
        a, b = pair
        assert a.model != b.model
        assert a.request is b.request  # parsed once, shared
    assert [r.request for r in results[: len(requests)]] == requests  # equal to what was built, in order


@pytest.mark.skipif(not hasattr(os, "posix_fadvise"), reason="no posix_fadvise on this platform")
def test_a_read_only_open_asks_the_kernel_to_read_the_store_ahead(
    tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "store"
    api.run("baseline:random", api.build("trec", "main", data_dir=data_dir, limit=2), store, progress=False)
    seen: list[tuple[str, int, int, int]] = []
    real = os.posix_fadvise

    def spy(fd: int, offset: int, length: int, advice: int) -> None:
        seen.append((os.readlink(f"/proc/self/fd/{fd}"), offset, length, advice))
        real(fd, offset, length, advice)

    monkeypatch.setattr(os, "posix_fadvise", spy)
    with Store(store, create=False) as st:
        assert st.count() == 8
    assert seen == [(str((store / DB_NAME).resolve()), 0, 0, os.POSIX_FADV_WILLNEED)]
    seen.clear()
    with Store(store, create=True):  # a writer reads little: no read-ahead
        pass
    prefetch(tmp_path / "no-store-here")  # nothing to read: quietly nothing
    assert seen == []
