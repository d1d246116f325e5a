"""What a records officer types to erase or hold calls is typed, by the page's API and by ``asr`` alike: a day is a
day, a key is a key as the store writes it; an erasure is a plan with a token first, and the token erases only
what the plan showed; a hold is what was asked for or nothing.

The app and the command (``asr``'s ``main``, in this process) run against one embedded ledger, store and index
(SQLite, a folder, SQLite FTS5), with three calls of two days (``test_records.day``): a.flac (CU-1) and b.flac (CU-2)
on the 27th, c.flac (CU-2) on the 28th, all of agent AG-1.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from test_cli import stores_in
from test_records import day, recording  # noqa: F401  (fixture)

from asr_tasks.cli.main import main
from asr_tasks.config import Settings, get_settings
from asr_tasks.index.sqlite import SqliteIndex
from asr_tasks.intake.stores import LocalStore
from asr_tasks.models import Recording
from asr_tasks.records.access_log import AccessLog
from asr_tasks.records.ledger import open_ledger
from asr_tasks.states import RecordingState
from asr_tasks.web.app import create_app

Day = tuple[LocalStore, SqliteIndex, list[Recording]]
ODD_DAYS = ["9999-12-31' OR 1=1 --", "31/12/2020", "z", "2026-11-27T00:00"]
Asr = Callable[..., "subprocess.CompletedProcess[str]"]


@pytest.fixture
def asr(settings: Settings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Iterator[Asr]:
    """``asr ARGS`` as the command runs them (its parser, its refusals, its exit status), in this process and on
    the test's ledger, store and index."""
    for name in [name for name in os.environ if name.startswith("ASR_")]:
        monkeypatch.delenv(name)
    for name, value in stores_in(settings).items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        capsys.readouterr()
        try:
            code = main(list(args))
        except SystemExit as exit:
            code = int(exit.code or 0)
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(list(args), code, out, err)

    yield run
    get_settings.cache_clear()


def signed_in(user: str) -> Callable[[str], Callable[..., str]]:
    """Every permission, for ``user``."""
    return lambda permission: lambda: user


def app(settings: Settings, found: Day, user: str = "officer") -> TestClient:
    store, index, _ = found
    return TestClient(create_app(settings, index=index, store=store, authorize=signed_in(user)))


def states(settings: Settings) -> dict[str, str]:
    return {row["recording_id"]: row["state"] for row in open_ledger(settings.ledger).rows()}


def erase_rows(settings: Settings) -> list[str]:
    return [str(e.detail) for e in AccessLog(open_ledger(settings.ledger)).entries(actions=("erase",))]


@pytest.mark.parametrize("before", ODD_DAYS)
def test_an_erasure_before_a_day_that_is_no_day_is_refused_naming_before_and_erases_nothing(
        settings: Settings, day: Day, asr: Asr, before: str) -> None:  # noqa: F811
    """The probe: a `before` compared as text chose every call (or a day too many); it is a day or a 422."""
    client = app(settings, day)
    ledger_before, index_before = states(settings), [h.key for h in day[1].search("secret")]
    answer = client.post("/api/erase", json={"before": before, "reason": "customer-request"})
    assert answer.status_code == 422, answer.text
    [error] = answer.json()["detail"]
    assert error["loc"] == ["body", "before"] and "not a calendar date" in error["msg"]
    proc = asr("erase", "--before", before, "--reason", "customer-request")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == f"asr erase: --before {before!r}: not a calendar date (YYYY-MM-DD)\n"
    assert states(settings) == ledger_before and RecordingState.ERASED not in ledger_before.values()
    assert [h.key for h in day[1].search("secret")] == index_before
    assert erase_rows(settings) == []


def test_a_bulk_erasure_is_a_plan_and_then_the_token_of_exactly_that_plan(settings: Settings, day: Day) -> None:  # noqa: F811
    store, index, recs = day
    client, ask = app(settings, day), {"customer": "CU-2", "reason": "customer-request"}
    plan = client.post("/api/erase", json=ask)
    assert plan.status_code == 200, plan.text
    shown = plan.json()
    assert (shown["dry_run"], shown["keys"], shown["versions"], shown["held"]) == (True, 2, 2, 0)
    assert shown["days"] == ["2026-11-27", "2026-11-28"] and shown["first_keys"] == [recs[1].key, recs[2].key]
    assert RecordingState.ERASED not in states(settings).values()  # the plan erased nothing
    assert client.post("/api/erase", json={**ask, "dry_run": True}).json()["token"] == shown["token"]

    # A token is for its own selection and user: another customer, an agent, another officer erase nothing.
    for other, user in (({"customer": "CU-1"}, "officer"), ({"agent": "AG-1"}, "officer"), ({}, "someone")):
        body = {**ask, **other, "confirm": shown["token"]}
        if "agent" in other:
            del body["customer"]
        refused = app(settings, day, user).post("/api/erase", json=body)
        assert refused.status_code == 409 and "nothing erased" in refused.json()["detail"]["message"], other
    assert RecordingState.ERASED not in states(settings).values()

    # A call of the customer's arrives after the plan: its token erases nothing, and the refusal has the new count.
    late = recording("d.flac", customer="CU-2", day="2026-11-29")
    open_ledger(settings.ledger).sensed([late], "m", "2")
    stale = client.post("/api/erase", json={**ask, "confirm": shown["token"]})
    assert stale.status_code == 409 and (stale.json()["detail"]["keys"], stale.json()["detail"]["versions"]) == (3, 3)
    assert "token" not in stale.json()["detail"]
    assert RecordingState.ERASED not in states(settings).values()

    again = client.post("/api/erase", json=ask).json()
    assert again["keys"] == 3 and again["token"] != shown["token"]
    done = client.post("/api/erase", json={**ask, "confirm": again["token"]})
    assert done.status_code == 200 and sorted(done.json()["erased"]) == sorted([recs[1].key, recs[2].key, late.key])
    gone = {rid for rid, state in states(settings).items() if state == RecordingState.ERASED}
    assert gone == {recs[1].recording_id, recs[2].recording_id, late.recording_id}
    assert [h.key for h in index.search("secret")] == [recs[0].key]

    # The access log counts each step and says what kind of selection it was, never whose calls or which keys.
    rows = erase_rows(settings)
    summary = [row for row in rows if not row.startswith("every version")]
    assert summary[0] == summary[1] == ("dry run, nothing erased: a customer's calls (customer-request): 2 keys "
                                        "(2 versions) of 2 days, 0 of them held")
    assert "agent's calls" in summary[3] and summary[2].startswith("refused, nothing erased")
    assert summary[-1] == ("confirmed: a customer's calls (customer-request): 3 keys erased (3 versions chosen), "
                           "0 held, 0 interrupted erasures finished")
    assert not [row for row in rows if "CU-2" in row or "AG-1" in row or "calls/" in row]


def test_asr_erase_prints_the_plan_and_the_command_and_erases_only_with_its_token(
        settings: Settings, day: Day, asr: Asr) -> None:  # noqa: F811
    """By agent (a bulk erasure the command and the API both take), through the command's two steps."""
    store, index, recs = day
    proc = asr("erase", "--agent", "AG-1", "--reason", "legal-order")
    assert proc.returncode == 0, proc.stderr
    assert "would erase 3 keys (3 versions chosen) of 2 days; 0 held keys left as they are" in proc.stdout
    assert all(f"  {rec.key}\n" in proc.stdout for rec in recs)
    command = shlex.split(proc.stdout.splitlines()[-1])
    assert command[:-1] == ["asr", "erase", "--agent", "AG-1", "--reason", "legal-order", "--confirm"]
    assert RecordingState.ERASED not in states(settings).values()

    late = recording("d.flac", agent="AG-1", day="2026-11-29")
    open_ledger(settings.ledger).sensed([late], "m", "2")
    stale = asr(*command[1:])
    assert (stale.returncode, stale.stdout) == (1, "") and "nothing erased" in stale.stderr
    assert "it now takes 4 keys (4 versions)" in stale.stderr
    assert RecordingState.ERASED not in states(settings).values()

    plan = json.loads(asr("erase", "--agent", "AG-1", "--reason", "legal-order", "--json").stdout)
    assert (plan["keys"], plan["versions"], plan["held"]) == (4, 4, 0)
    done = asr("erase", "--agent", "AG-1", "--reason", "legal-order", "--confirm", plan["token"])
    assert done.returncode == 0 and done.stdout.count("erased   ") == 4, done.stderr
    assert set(states(settings).values()) == {RecordingState.ERASED}
    bad = asr("erase", "--agent", "AG-1", "--reason", "legal-order", "--confirm", "not-a-token")
    assert bad.returncode == 2 and bad.stderr.startswith("asr erase: --confirm 'not-a-token': not a confirmation")


def test_even_one_key_is_erased_in_two_steps(settings: Settings, day: Day) -> None:  # noqa: F811
    store, index, recs = day
    client, ask = app(settings, day), {"key": recs[0].key, "reason": "mistaken-upload"}
    plan = client.post("/api/erase", json=ask).json()
    assert (plan["keys"], plan["first_keys"]) == (1, [recs[0].key])
    assert states(settings)[recs[0].recording_id] != RecordingState.ERASED
    assert client.post("/api/erase", json={**ask, "confirm": plan["token"]}).json()["erased"] == [recs[0].key]
    assert states(settings)[recs[0].recording_id] == RecordingState.ERASED


def holds_of(client: TestClient) -> list[dict[str, Any]]:
    return client.get("/api/holds").json()  # type: ignore[no-any-return]


@pytest.mark.parametrize("scope", ["agent", "customer", "key"])
def test_a_hold_on_a_party_or_a_key_with_a_range_of_days_is_refused_not_widened(
        settings: Settings, day: Day, asr: Asr, scope: str) -> None:  # noqa: F811
    """The probe: `asr hold --agent A --from D1 --to D2` held every call of the agent, the dates dropped."""
    value = {"agent": "AG-1", "customer": "CU-1", "key": day[2][0].key}[scope]
    client = app(settings, day)
    answer = client.post("/api/holds", json={"scope": scope, "value": value, "date_from": "2026-11-27",
                                             "date_to": "2026-11-27", "why": "case 12"})
    assert answer.status_code == 422, answer.text
    assert answer.json()["detail"][0]["loc"] == ["body", "date_from"]
    assert "covers every call of it, whatever its day" in answer.json()["detail"][0]["msg"]
    proc = asr("hold", f"--{scope}", value, "--from", "2026-11-27", "--to", "2026-11-27", "--why", "case 12")
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout
    assert proc.stderr.startswith("asr hold: --from: a hold on a")
    assert holds_of(client) == []


def test_a_key_with_a_trailing_space_is_refused_by_the_hold_and_the_erasure(
        settings: Settings, day: Day, asr: Asr) -> None:  # noqa: F811
    """The probe: a hold on `key ` answered 201 and covered nothing (no call has that key)."""
    client, key = app(settings, day), day[2][0].key + " "
    held = client.post("/api/holds", json={"scope": "key", "value": key, "why": "case 12"})
    assert held.status_code == 422 and held.json()["detail"][0]["loc"] == ["body", "value"]
    assert "begins or ends with a space" in held.json()["detail"][0]["msg"]
    erased = client.post("/api/erase", json={"key": key, "reason": "customer-request"})
    assert erased.status_code == 422 and erased.json()["detail"][0]["loc"] == ["body", "key"]
    for command in (["hold", "--key", key, "--why", "case 12"], ["erase", "--key", key, "--reason", "legal-order"]):
        proc = asr(*command)
        assert proc.returncode == 2 and proc.stderr.startswith(f"asr {command[0]}: --key {key!r}: begins or ends")
    assert holds_of(client) == [] and erase_rows(settings) == []


def test_a_hold_on_a_key_no_call_has_is_refused_unless_it_is_asked_for_as_a_future_one(
        settings: Settings, day: Day, asr: Asr) -> None:  # noqa: F811
    """The probe: a hold on an unknown key answered 201 and covered nothing; a future hold says it is one."""
    client = app(settings, day)
    coming = "calls/2026/11/30/still-to-come.wav"
    refused = client.post("/api/holds", json={"scope": "key", "value": coming, "why": "case 12"})
    assert refused.status_code == 400 and "no recording has the key" in refused.json()["detail"]
    proc = asr("hold", "--key", coming, "--why", "case 12")
    assert proc.returncode == 2 and "no recording has the key" in proc.stderr and "--future" in proc.stderr
    assert holds_of(client) == []

    placed = client.post("/api/holds", json={"scope": "key", "value": coming, "why": "case 12", "future": True})
    assert placed.status_code == 201 and placed.json()["future"] is True, placed.text
    proc = asr("hold", "--key", coming + ".flac", "--why", "case 13", "--future")
    assert proc.returncode == 0 and "(future: no recording had it when placed)" in proc.stdout, proc.stderr
    listed = asr("hold", "--list").stdout
    assert listed.count("(future: no recording had it when placed)") == 2
    assert [(h["value"], h["future"]) for h in holds_of(client)] == [(coming, True), (coming + ".flac", True)]

    known = day[2][0].key  # a key with calls is held as it is, not as a future one
    assert client.post("/api/holds", json={"scope": "key", "value": known, "why": "c", "future": True}
                       ).status_code == 400
    assert client.post("/api/holds", json={"scope": "agent", "value": "AG-9", "why": "c", "future": True}
                       ).status_code == 422
    held = client.post("/api/holds", json={"scope": "key", "value": known, "why": "case 14"})
    assert held.status_code == 201 and held.json()["future"] is False

    late = recording("still-to-come.wav", day="2026-11-30")  # the call arrives: the future hold covers it
    open_ledger(settings.ledger).sensed([late], "m", "2")
    plan = client.post("/api/erase", json={"key": late.key, "reason": "customer-request"}).json()
    assert plan["held"] == 1 and "legal hold 1 on key" in plan["first_held"][0]["hold"]


def test_typed_values_are_the_same_check_for_the_command_and_the_api() -> None:
    """Controls, an empty id and an id that is no recording's are refused by both; a party id is stripped."""
    from pydantic import ValidationError

    from asr_tasks.inputs import InputError, calendar_day, party_id
    from asr_tasks.records.erasure import ErasureSelection

    assert party_id(" AG-1 ", "--agent") == "AG-1"
    assert ErasureSelection(agent=" AG-1 ", reason="retention").agent == "AG-1"
    for bad in ({"agent": "AG\n1"}, {"customer": "  "}, {"recording_id": "R" * 24}, {"key": "calls/\u202ex.wav"},
                {"before": "2026-02-30"}, {}, {"agent": "AG-1", "customer": "CU-1"}):
        with pytest.raises(ValidationError):
            ErasureSelection(reason="retention", **bad)
    with pytest.raises(InputError, match="not a calendar date"):
        calendar_day("2026-11-27T00:00", "--before")


def test_a_named_erasure_key_that_is_missing_is_an_error_never_a_new_key(settings: Settings, tmp_path: Path) -> None:
    """A mounted secret that is not there would otherwise become a key of this process's own: the page and
    ``asr`` would sign with different keys, and no token would confirm."""
    from asr_tasks.records.erasure import ErasureKeyError, erasure_key

    named = tmp_path / "secrets" / "erasure.key"
    ledger = open_ledger(settings.ledger)
    with pytest.raises(ErasureKeyError, match="erasure_key_file"):
        erasure_key(ledger, settings.override(erasure_key_file=str(named)))
    assert not named.exists()
    named.parent.mkdir()
    named.write_bytes(os.urandom(32))
    assert erasure_key(ledger, settings.override(erasure_key_file=str(named))) == named.read_bytes()
    default = erasure_key(ledger, settings)  # the embedded default: made beside the SQLite ledger, owner only
    assert (tmp_path / "erasure.key").read_bytes() == default and (tmp_path / "erasure.key").stat().st_mode & 0o077 == 0


def test_a_refused_value_is_never_sent_back(settings: Settings, day: Day) -> None:  # noqa: F811
    """A 422 names the field and what it takes, not what was typed: a card number pasted into a customer's field
    would otherwise come back in the answer, for a proxy or the browser's tools to keep."""
    client = app(settings, day)
    answer = client.post("/api/erase", json={"customer": "4111 1111 1111 1111\u0007", "reason": "customer-request"})
    assert answer.status_code == 422 and "4111" not in answer.text, answer.text
    [error] = answer.json()["detail"]
    assert error["loc"] == ["body", "customer"] and "control character" in error["msg"]
