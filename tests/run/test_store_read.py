"""Reading a store back: every request once, whatever the number of models that scored it."""

from __future__ import annotations

from pathlib import Path

from pfr import api
from pfr.run.store import Store, StoredResult


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
