"""A fake Hugging Face hub on localhost serving local folders as model repos (test helper).

It answers the calls ``huggingface_hub.snapshot_download`` makes against ``HF_ENDPOINT``: the repo's info at a
revision, its recursive file tree, and each file's HEAD (commit, ETag, size) and GET. Enough to download a repo with
the library's own code and progress bars, without the network.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

COMMIT = "feedfacefeedfacefeedfacefeedfacefeedface"


class FakeHub:
    """``FakeHub({"Org/Name": folder})`` serves each folder as the repo at every revision; ``.url`` is the
    endpoint; ``.requests`` the paths asked for."""

    def __init__(self, repos: dict[str, str]) -> None:
        self.repos = {k: os.path.abspath(v) for k, v in repos.items()}
        self.requests: list[str] = []
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_HEAD(self):
                hub._answer(self, head=True)

            def do_GET(self):
                hub._answer(self, head=False)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> "FakeHub":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def _files(self, repo: str) -> list[str]:
        root = self.repos[repo]
        out = []
        for d, _, names in os.walk(root):
            out += [os.path.relpath(os.path.join(d, n), root) for n in names]
        return sorted(out)

    def _answer(self, h: BaseHTTPRequestHandler, head: bool) -> None:
        path = unquote(urlsplit(h.path).path)
        self.requests.append(path)
        for repo, root in self.repos.items():
            if path.startswith(f"/api/models/{repo}/revision/"):
                siblings = [{"rfilename": f} for f in self._files(repo)]
                return self._json(h, {"id": repo, "modelId": repo, "sha": COMMIT, "siblings": siblings})
            if path.startswith(f"/api/models/{repo}/tree/"):
                tree = [{"type": "file", "path": f, "size": os.path.getsize(os.path.join(root, f)),
                         "oid": hashlib.sha1(f.encode()).hexdigest()} for f in self._files(repo)]
                return self._json(h, tree)
            prefix = f"/{repo}/resolve/"
            if path.startswith(prefix):
                name = path[len(prefix):].split("/", 1)[1]
                full = os.path.join(root, name)
                if not os.path.isfile(full):
                    break
                with open(full, "rb") as f:
                    data = f.read()
                h.send_response(200)
                h.send_header("X-Repo-Commit", COMMIT)
                h.send_header("ETag", '"' + hashlib.sha256(data).hexdigest() + '"')
                h.send_header("Content-Length", str(len(data)))
                h.send_header("Content-Type", "application/octet-stream")
                h.end_headers()
                if not head:
                    h.wfile.write(data)
                return
        h.send_response(404)
        h.send_header("X-Error-Code", "RepoNotFound")
        h.send_header("Content-Length", "2")
        h.end_headers()
        if not head:
            h.wfile.write(b"{}")

    @staticmethod
    def _json(h: BaseHTTPRequestHandler, obj) -> None:
        data = json.dumps(obj).encode()
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)
