"""A scripted OpenAI-compatible completions server on 127.0.0.1 for the tests of generating backends
(``openai:… decide=generate|choice``): a real HTTP server, only its answers are scripted."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Completions:
    """A scripted OpenAI-compatible completions server: answers each prompt with ``reply(prompt)``."""

    def __init__(self, reply: Any) -> None:
        self.prompts: list[dict[str, Any]] = []
        outer = self

        class Handle(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                outer.prompts.append(body)
                text = reply(body.get("prompt") or body["messages"][0]["content"])
                choice = {"message": {"role": "assistant", "content": text}} if "messages" in body else {"text": text}
                out = json.dumps({"choices": [choice]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handle)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
