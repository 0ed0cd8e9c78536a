"""Downloads from a real HTTP server on 127.0.0.1: sha256-verified, cached once, never half-kept."""

from __future__ import annotations

import functools
import shutil
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from pfr.data.sources import SOURCES, SourceFile, fetch, locate, sha256_file
from pfr.errors import DataError

TREC_TEST = next(s for s in SOURCES["trec"] if s.name == "TREC_10.label")
CLINC = SOURCES["clinc150"][0]


class _Server:
    """A static file server over ``root`` that counts the GET requests it answers per path."""

    def __init__(self, root: Path) -> None:
        self.hits: list[str] = []
        server = self

        class Handler(SimpleHTTPRequestHandler):
            def do_GET(self) -> None:
                server.hits.append(self.path)
                super().do_GET()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(root)))
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def url(self, relpath: str) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/{relpath}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv("PFR_CACHE_DIR", str(root))
    monkeypatch.delenv("PFR_DATA_DIR", raising=False)
    return root


@pytest.fixture
def server(data_dir: Path) -> Iterator[_Server]:
    srv = _Server(data_dir)
    yield srv
    srv.close()


@pytest.fixture
def corrupt_server(tmp_path: Path, data_dir: Path) -> Iterator[_Server]:
    root = tmp_path / "served"
    (root / "trec").mkdir(parents=True)
    data = bytearray((data_dir / TREC_TEST.relpath).read_bytes())
    data[100] ^= 0x01  # one flipped bit, same size
    (root / TREC_TEST.relpath).write_bytes(bytes(data))
    srv = _Server(root)
    yield srv
    srv.close()


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


@pytest.mark.parametrize("src", [TREC_TEST, CLINC], ids=lambda s: s.relpath)
def test_download_verifies_and_caches_once(src: SourceFile, cache: Path, server: _Server, data_dir: Path) -> None:
    url = server.url(src.relpath)
    path = fetch(src, None, urls=[url])
    assert path == cache / "data" / src.relpath
    assert sha256_file(path) == src.sha256
    assert path.read_bytes() == (data_dir / src.relpath).read_bytes()
    assert server.hits == [f"/{src.relpath}"]
    assert _files(cache) == [path]  # no temporary file left beside it

    again = fetch(src, None, urls=[url])
    assert again == path
    assert server.hits == [f"/{src.relpath}"]  # the second call did not download
    assert locate(src, None) == path


def test_data_dir_wins_over_download(cache: Path, server: _Server, data_dir: Path) -> None:
    path = fetch(TREC_TEST, data_dir, urls=[server.url(TREC_TEST.relpath)])
    assert path == data_dir / TREC_TEST.relpath
    assert server.hits == []
    assert _files(cache) == []


def test_corrupt_download_is_rejected_and_not_kept(cache: Path, corrupt_server: _Server) -> None:
    url = corrupt_server.url(TREC_TEST.relpath)
    with pytest.raises(DataError) as info:
        fetch(TREC_TEST, None, urls=[url])
    message = str(info.value)
    assert "\n" not in message
    assert TREC_TEST.relpath in message and url in message and "sha256" in message
    assert corrupt_server.hits == [f"/{TREC_TEST.relpath}"]
    assert _files(cache) == []


def test_corrupt_mirror_falls_back_to_a_good_one(cache: Path, corrupt_server: _Server, server: _Server) -> None:
    urls = [corrupt_server.url(TREC_TEST.relpath), server.url(TREC_TEST.relpath)]
    path = fetch(TREC_TEST, None, urls=urls)
    assert sha256_file(path) == TREC_TEST.sha256
    assert len(corrupt_server.hits) == 1 and len(server.hits) == 1
    assert _files(cache) == [path]


def test_http_404_is_a_data_error(cache: Path, server: _Server) -> None:
    url = server.url("trec/no_such_file.label")
    with pytest.raises(DataError, match="HTTP 404") as info:
        fetch(TREC_TEST, None, urls=[url])
    assert TREC_TEST.relpath in str(info.value) and url in str(info.value)
    assert _files(cache) == []


def test_unreachable_server_is_a_data_error(cache: Path, server: _Server) -> None:
    url = server.url(TREC_TEST.relpath)
    server.close()
    with pytest.raises(DataError, match=TREC_TEST.relpath):
        fetch(TREC_TEST, None, urls=[url], timeout=5.0)
    assert _files(cache) == []


def test_wrong_sha256_in_data_dir_names_the_path(tmp_path: Path, cache: Path, data_dir: Path) -> None:
    folder = tmp_path / "data"
    (folder / "trec").mkdir(parents=True)
    bad = folder / TREC_TEST.relpath
    shutil.copyfile(data_dir / TREC_TEST.relpath, bad)
    with bad.open("ab") as f:
        f.write(b"x")
    with pytest.raises(DataError, match="does not match the original release") as info:
        fetch(TREC_TEST, folder, urls=[])
    assert str(bad) in str(info.value)


def test_wrong_sha256_in_cache_is_not_trusted(cache: Path, data_dir: Path) -> None:
    cached = cache / "data" / TREC_TEST.relpath
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"not the file")
    with pytest.raises(DataError, match="does not match") as info:
        fetch(TREC_TEST, None, urls=[])
    assert str(cached) in str(info.value)
