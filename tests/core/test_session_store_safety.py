"""SessionStore against a second writer, a full disk and a corrupted file: a clear plait error, no
silent loss, and memory that never holds a turn the file lacks."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from plait.agents import Agent
from plait.exceptions import SessionConflictError, SessionStoreError
from plait.memory import SessionStore
from plait.testing import FunctionLLM

SRC = str(Path(__file__).resolve().parents[2] / "src")
ENV = {"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin:/usr/sbin:/sbin"}

WRITER = textwrap.dedent(
    """
    import json, sys, time
    from plait.agents import Agent
    from plait.memory import SessionStore
    from plait.testing import FunctionLLM

    db, name, turns = sys.argv[1], sys.argv[2], int(sys.argv[3])

    def reply(messages, params):
        time.sleep(0.001)  # a model that takes a moment: the two writers' turns interleave
        return "re: " + messages[-1]["content"]

    agent = SessionStore(db).attach(Agent(FunctionLLM(reply)))
    print("ready", flush=True)
    sys.stdin.readline()  # both processes start together
    acked, errors, message = [], {}, ""
    for n in range(turns):
        text = f"{name} {n}"
        try:
            agent(text, session_id="shared")
        except Exception as exc:
            errors[type(exc).__name__] = errors.get(type(exc).__name__, 0) + 1
            message = str(exc)
        else:
            acked.append(text)  # the call returned: this turn is stored
    print(json.dumps({"acked": acked, "errors": errors, "message": message}), flush=True)
    """
)


def test_two_processes_writing_one_session_get_a_clear_error_and_lose_no_turn(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    turns = 150
    children = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(db), name, str(turns)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=ENV,
        )
        for name in ("A", "B")
    ]
    for child in children:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    for child in children:
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
    results = []
    for child in children:
        out, _ = child.communicate(timeout=300)
        assert child.returncode == 0
        results.append(json.loads(out.strip().splitlines()[-1]))
    acked = [text for result in results for text in result["acked"]]
    errors: dict[str, int] = {}
    for result in results:
        for kind, count in result["errors"].items():
            errors[kind] = errors.get(kind, 0) + count
    with SessionStore(db) as store:
        stored = store.read("memory", "shared") or []
    users = [m["content"] for m in stored if m["sender"] == "user"]
    lost = set(acked) - set(users)
    print(
        f"2 writers x {turns} turns on one session: {len(acked)} acknowledged, {len(users)} in the file, "
        f"{len(lost)} lost, errors {errors}"
    )
    assert not lost  # every turn a call acknowledged is in the file
    assert sorted(users) == sorted(acked)  # and only those: a refused turn left nothing behind
    assert [m["content"] for m in stored] == [x for text in users for x in (text, f"re: {text}")]  # whole turns
    assert set(errors) == {"SessionConflictError"} and errors["SessionConflictError"] > 0  # detected, not silent
    message = next(result["message"] for result in results if result["message"])
    assert "'shared'" in message and str(db) in message  # names the session and the file
    assert len(acked) + errors["SessionConflictError"] == 2 * turns


def test_a_second_store_in_the_same_process_is_a_second_writer(tmp_path: Path) -> None:
    db = tmp_path / "twice.db"
    echo = FunctionLLM(lambda messages, params: f"{len(messages)}")
    first = SessionStore(db).attach(Agent(echo))
    second = SessionStore(db).attach(Agent(echo))
    first("a", session_id="s")
    assert second.memory.get_memory("s")[-1].content == "1"  # read after the first turn
    first("b", session_id="s")  # the first writer goes on: the second one's copy is now old
    with pytest.raises(SessionConflictError, match="another writer wrote to it") as caught:
        second("c", session_id="s")
    assert caught.value.session_id == "s" and caught.value.path == str(db)
    assert [m.content for m in second.memory.get_memory("s")] == ["a", "1", "b", "3"]  # read again from the file
    assert second("d", session_id="s").content == "5"  # and it goes on from there
    with pytest.raises(SessionConflictError):  # now the first one's copy is old
        first("e", session_id="s")
    with SessionStore(db) as store:
        assert [m["content"] for m in store.read("memory", "s") or []] == ["a", "1", "b", "3", "d", "5"]


def test_a_session_deleted_under_a_live_agent_is_a_conflict_then_starts_afresh(tmp_path: Path) -> None:
    with SessionStore(tmp_path / "deleted.db") as store:
        agent = store.attach(Agent(FunctionLLM(lambda messages, params: f"{len(messages)}")))
        agent("a", session_id="s")
        store.delete("s")
        with pytest.raises(SessionConflictError, match="another writer deleted it"):
            agent("b", session_id="s")  # its copy would have come back with holes in it
        assert agent.memory.get_memory("s") == []  # read again: gone
        assert agent("c", session_id="s").content == "1"
        assert [m["content"] for m in store.read("memory", "s") or []] == ["c", "1"]


FULL_DISK = textwrap.dedent(
    """
    import json, os, sqlite3, subprocess, sys
    from plait.agents import Agent
    from plait.memory import SessionStore
    from plait.testing import FunctionLLM

    folder, how = sys.argv[1], sys.argv[2]
    if how == "tmpfs":  # a real disk that fills up (in this process's own mount namespace)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=320k", "tmpfs", folder], check=True)
        with open(os.path.join(folder, "filler"), "wb") as fh:  # freed later, to make room again
            fh.write(b"x" * 96 * 1024)
    db = os.path.join(folder, "s.db")
    sent = []  # what the model was sent, call by call

    def reply(messages, params):
        sent.append([m["content"] for m in messages])
        return "answer " + "y" * 3000

    store = SessionStore(db)
    agent = store.attach(Agent(FunctionLLM(reply)))
    if how == "pages":  # SQLite's own limit on the file's size
        store._writer.call(lambda c: c.execute("PRAGMA max_page_count = 40"))

    def in_file():
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as raw:
            (cut,) = raw.execute("SELECT COALESCE(MAX(open_from), 1 << 62) FROM sessions").fetchone()
            rows = raw.execute("SELECT message FROM messages WHERE position < ? ORDER BY position", (cut,))
            return [json.loads(row[0])["content"] for row in rows]

    acked, error = 0, None
    for n in range(500):
        try:
            agent(f"turn {n} " + "x" * 3000, session_id="s")
        except Exception as exc:
            error = exc
            break
        acked += 1
    live = [m.content for m in agent.memory.memory_map["s"].memory]  # the copy the failed call left
    file_now = in_file()
    memory_now = [m.content for m in agent.memory.get_memory("s")]
    try:
        agent("after the failure", session_id="s")
        again = None
    except Exception as exc:
        again = type(exc).__name__
    next_sent = sent[-1]
    if how == "tmpfs":
        os.remove(os.path.join(folder, "filler"))
    else:
        store._writer.call(lambda c: c.execute("PRAGMA max_page_count = 100000"))
    agent("room again", session_id="s")
    store.close()
    with SessionStore(db) as fresh:
        final = [m["content"] for m in fresh.read("memory", "s") or []]
    print(json.dumps({
        "acked": acked, "error": type(error).__name__, "message": str(error),
        "live": live, "file": file_now, "memory": memory_now, "again": again,
        "next_sent": next_sent, "final": final,
    }))
    """
)


def _full_disk_command(how: str, folder: Path) -> list[str]:
    command = [sys.executable, "-c", FULL_DISK, str(folder), how]
    if how == "pages":
        return command
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("a tmpfs that fills up needs root and unshare(1) (the 'pages' case covers the rest)")
    return ["unshare", "--mount", "--propagation", "private", *command]  # the mount dies with the process


@pytest.mark.parametrize("how", ["tmpfs", "pages"])
def test_a_full_disk_rolls_the_failed_turn_back_from_memory(how: str, tmp_path: Path) -> None:
    folder = tmp_path / "disk"
    folder.mkdir()
    run = subprocess.run(
        _full_disk_command(how, folder), capture_output=True, text=True, timeout=300, env=ENV, check=False
    )
    assert run.returncode == 0, run.stderr[-3000:]
    result: dict[str, Any] = json.loads(run.stdout.strip().splitlines()[-1])
    print(
        f"full disk ({how}): {result['acked']} turns stored, then {result['error']}; messages in memory "
        f"{len(result['live'])} vs in the file {len(result['file'])}"
    )
    kept = [x for n in range(result["acked"]) for x in (f"turn {n} " + "x" * 3000, "answer " + "y" * 3000)]
    assert result["acked"] > 0 and result["live"] == result["file"] == result["memory"] == kept  # memory = file
    assert result["error"] == "SessionStoreError"
    assert "database or disk is full" in result["message"] or "disk I/O error" in result["message"]
    assert str(folder / "s.db") in result["message"]  # the file is named
    assert result["next_sent"] == [*kept, "after the failure"]  # the failed turn is never sent again
    stored_after = kept if result["again"] else [*kept, "after the failure", "answer " + "y" * 3000]
    assert result["final"] == [*stored_after, "room again", "answer " + "y" * 3000]  # once there is room


def test_a_file_that_is_not_a_database_raises_plait_s_error_naming_it(tmp_path: Path) -> None:
    db = tmp_path / "garbage.db"
    db.write_bytes(b"this is not a SQLite database\n" * 200)
    with pytest.raises(SessionStoreError, match="file is not a database") as caught:
        SessionStore(db)
    assert str(db) in str(caught.value) and caught.value.path == str(db)
    assert isinstance(caught.value.__cause__, sqlite3.DatabaseError)


def test_a_file_corrupted_after_writing_raises_plait_s_error_naming_it(tmp_path: Path) -> None:
    db = tmp_path / "corrupt.db"
    with SessionStore(db) as store:
        agent = store.attach(Agent(FunctionLLM(lambda messages, params: "ok " + "z" * 500)))
        for n in range(40):
            agent(f"turn {n}", session_id="s")
    with sqlite3.connect(db) as raw:
        raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(db.read_bytes())
    page = 4096
    for start in range(page, len(data), page):  # every page after the header's: scrambled
        data[start : start + page] = bytes((start // page + i) % 251 for i in range(page))
    db.write_bytes(bytes(data))
    restarted = SessionStore(db).attach(Agent(FunctionLLM(lambda messages, params: "ok")))
    with pytest.raises(SessionStoreError) as caught:
        restarted("hello", session_id="s")
    assert str(db) in str(caught.value) and not isinstance(caught.value, sqlite3.Error)
    assert isinstance(caught.value.__cause__, sqlite3.DatabaseError)


TODAYS_FILE = """
CREATE TABLE messages (keypath TEXT NOT NULL, session TEXT NOT NULL, position INTEGER NOT NULL,
    message TEXT NOT NULL, PRIMARY KEY (keypath, session, position)) WITHOUT ROWID;
CREATE TABLE sessions (keypath TEXT NOT NULL, session TEXT NOT NULL, updated REAL NOT NULL,
    open_from INTEGER, PRIMARY KEY (keypath, session)) WITHOUT ROWID;
CREATE TABLE runs (keypath TEXT NOT NULL, session TEXT NOT NULL, state TEXT NOT NULL,
    PRIMARY KEY (keypath, session)) WITHOUT ROWID;
CREATE TABLE summaries (keypath TEXT NOT NULL, session TEXT NOT NULL, summary TEXT NOT NULL,
    PRIMARY KEY (keypath, session)) WITHOUT ROWID;
INSERT INTO messages VALUES ('memory', '"u"', 0, '{"content": "kept", "sender": "user"}');
INSERT INTO messages VALUES ('memory', '"u"', 1, '{"content": "1:kept", "sender": "Agent"}');
INSERT INTO sessions VALUES ('memory', '"u"', 1.0, NULL);
INSERT INTO messages VALUES ('memory', '"v"', 0, '{"content": "done", "sender": "user"}');
INSERT INTO messages VALUES ('memory', '"v"', 1, '{"content": "1:done", "sender": "Agent"}');
INSERT INTO messages VALUES ('memory', '"v"', 2, '{"content": "cut off", "sender": "user"}');
INSERT INTO sessions VALUES ('memory', '"v"', 2.0, 2);
INSERT INTO messages VALUES ('memory', '"w"', 0, '{"content": "only an interrupted call", "sender": "user"}');
INSERT INTO sessions VALUES ('memory', '"w"', 3.0, 0);
"""


def test_a_file_written_before_sessions_had_generations_is_upgraded_in_place(tmp_path: Path) -> None:
    db = tmp_path / "today.db"
    with sqlite3.connect(db) as raw:
        raw.executescript(TODAYS_FILE)  # the tables as plait wrote them before this change
    echo = FunctionLLM(lambda messages, params: f"{len(messages)}:{messages[-1]['content']}")
    with SessionStore(db) as store:
        agent = store.attach(Agent(echo))
        assert agent("next", session_id="u").content == "3:next"  # the model saw the old history
        assert agent("again", session_id="v").content == "3:again"  # without the interrupted call
        assert agent("first", session_id="w").content == "1:first"  # a session that held only such a call
    with sqlite3.connect(db) as raw:
        columns = [row[1] for row in raw.execute("PRAGMA table_info(sessions)")]
        rows = raw.execute("SELECT session, open_from, generation FROM sessions ORDER BY session").fetchall()
    assert columns == ["keypath", "session", "updated", "open_from", "generation"]
    assert [(session, open_from) for session, open_from, _ in rows] == [('"u"', None), ('"v"', None), ('"w"', None)]
    assert all(generation != 0 for _, _, generation in rows)  # both written since, each with a generation
    with SessionStore(db) as store:
        assert [m["content"] for m in store.read("memory", "u") or []] == ["kept", "1:kept", "next", "3:next"]
        assert [m["content"] for m in store.read("memory", "v") or []] == ["done", "1:done", "again", "3:again"]
        assert [m["content"] for m in store.read("memory", "w") or []] == ["first", "1:first"]
