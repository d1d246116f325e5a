"""What the command line shows of calls is in the access log before it is shown: a search's hits, a day's
findings, the review queue, a spot check's transcripts, each a row naming the operating-system account, with
what was typed (masked, and unreadable once a call it showed is erased) and how many hits it showed."""

from __future__ import annotations

import getpass
import json
import os
import pwd
import shutil
from pathlib import Path

from test_audit import CALLS, DAY, RULES, _record_day
from test_cli import asr, stores_in
from test_index_contract import _fill

from asr_tasks.audit.reports import run_audit, stored_audit
from asr_tasks.audit.rules import load_rule_set
from asr_tasks.config import Settings
from asr_tasks.index.sqlite import SqliteIndex
from asr_tasks.intake.demo_corpus import JFK
from asr_tasks.intake.stores import LocalStore
from asr_tasks.records.access_log import ERASED, AccessEntry, open_access_log


def logged(settings: Settings, action: str) -> list[tuple[object, ...]]:
    """The rows of one action as (user, query, filters, hits, detail)."""
    return [(e.user, e.query, e.filters, e.hits, e.detail) for e in open_access_log(settings).entries(actions=(action,))]


def test_asr_search_logs_the_account_the_masked_query_and_the_hits_it_shows(settings: Settings) -> None:
    _fill(SqliteIndex(settings.index.path("index_path")))
    # the account is the kernel's user id, not LOGNAME or USER, which a caller sets to anybody's name
    env = {**stores_in(settings), "LOGNAME": "somebody-else", "USER": "somebody-else"}
    me = pwd.getpwuid(os.geteuid()).pw_name
    first = asr("search", "收益 | 4111 1111 1111 1111", "--agent", "AG-1", "--limit", "1", "--json", env=env)
    assert first.returncode == 0, first.stderr
    [shown] = json.loads(first.stdout)
    after = first.stderr.split("--after ", 1)[1].strip()
    rest = asr("search", "收益 | 4111 1111 1111 1111", "--agent", "AG-1", "--limit", "1", "--after", after, env=env)
    assert rest.returncode == 0 and "收益" in rest.stdout, rest.stderr
    counts = asr("search", "收益", "--counts", env=env)
    assert counts.returncode == 0 and "AG-1" in counts.stdout, counts.stderr
    assert logged(settings, "search") == [
        (me, "收益 | [CARD ****1111]", {"agent": "AG-1"}, 1, "cli"),
        (me, "收益 | [CARD ****1111]", {"agent": "AG-1"}, 1, "cli, a later page"),
        (me, "收益", None, 2, "cli counts"),
    ]
    # the first page showed one call: erasing it makes what was typed to find it unreadable, and only that
    open_access_log(settings).forget([shown["recording_id"]])
    assert [q for _, q, *_ in logged(settings, "search")] == [ERASED, "收益 | [CARD ****1111]", "收益"]


def test_asr_search_shows_nothing_it_cannot_log(settings: Settings, tmp_path: Path) -> None:
    _fill(SqliteIndex(settings.index.path("index_path")))
    env = {**stores_in(settings), "ASR_LEDGER_URL": f"sqlite:///{tmp_path}"}  # a folder: no database opens there
    refused = asr("search", "收益", env=env)
    assert (refused.returncode, refused.stdout) == (1, "")
    assert refused.stderr.startswith("asr search: the access log could not be written, so nothing is shown")


def test_asr_audit_and_the_review_queue_log_the_findings_they_show(settings: Settings) -> None:
    store = LocalStore(settings.storage.path("store_root"))
    run_audit(DAY, load_rule_set(RULES), _record_day(settings, CALLS), store, settings)
    stored = stored_audit(DAY, store, settings)
    assert stored is not None and stored.findings
    env, me = stores_in(settings), getpass.getuser()
    shown = asr("audit", "--date", DAY, env=env)
    assert shown.returncode == 0 and "FOUND" in shown.stdout, shown.stderr
    assert asr("audit", "--date", DAY, "--json", env=env).returncode == 0
    queue = json.loads(asr("review", "--date", DAY, "--rule", "promise-of-return", "--json", env=env).stdout)
    promised = {f["recording_id"] for f in queue["findings"]}
    assert promised
    assert logged(settings, "read") == [
        (me, None, None, len(stored.findings), f"the QA audit of {DAY} (cli)"),
        (me, None, None, len(stored.findings), f"the QA audit of {DAY} (cli)"),
        (me, None, {"rule": "promise-of-return"}, len(queue["findings"]), f"the review queue of {DAY}"),
    ]
    open_access_log(settings).forget(promised)  # the queue's filter, typed, goes with the calls it listed
    assert logged(settings, "read")[-1][1:3] == (ERASED, None)


def test_asr_transcribe_logs_how_many_local_files_it_shows_never_their_names(settings: Settings, tmp_path: Path,
                                                                              model_dir: Path) -> None:
    local = tmp_path / "Jane Doe 415 555 2671.flac"
    shutil.copy(JFK, local)
    shown = asr("transcribe", str(local), "--json", env={**stores_in(settings), "ASR_MODEL_DIR": str(model_dir)})
    assert shown.returncode == 0 and "ask not what your country" in shown.stdout.lower(), shown.stderr
    [row] = open_access_log(settings).entries()
    assert row == AccessEntry(at=row.at, user=getpass.getuser(), action="read", hits=1,
                              detail="a spot check of 1 local file (cli)", id=row.id, row_hash=row.row_hash)
