"""One check per input, shared by ``asr search`` and the JSON API: the same values refused with the same words, the
command with exit status 2 and one line naming its option, the API with 422 naming its parameter."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from test_index_contract import _fill

from asr_tasks.cli.options import option
from asr_tasks.config import PROJECT_ROOT, Settings
from asr_tasks.index.query import check_query
from asr_tasks.index.sqlite import SqliteIndex
from asr_tasks.inputs import InputError, calendar_day, day_range
from asr_tasks.web.app import create_app

ASR = str(Path(sys.executable).parent / "asr")
FIELDS = ("date_from", "date_to", "agent", "speaker", "quality", "min_non_talk_share", "min_agent_interruptions")
API_NAMES = {"q": "q", "size": "size", **{f: f for f in FIELDS}}
CLI_NAMES = {"q": "query", "size": "--limit", **{f: option(f) for f in FIELDS}}

# (the API's parameters, what both answer with the parameter's name left open)
REFUSED = [
    ({"date_from": "2026-13-01"}, "{date_from} '2026-13-01': not a calendar date (YYYY-MM-DD)"),
    ({"date_to": "yesterday"}, "{date_to} 'yesterday': not a calendar date (YYYY-MM-DD)"),
    ({"date_from": "20261101"}, "{date_from} '20261101': not a calendar date (YYYY-MM-DD)"),
    ({"date_from": "2026-11-02", "date_to": "2026-11-01"}, "{date_from} 2026-11-02 is after {date_to} 2026-11-01"),
    ({"date_from": "0001-01-01", "date_to": "9999-12-31"},
     "{date_from} 0001-01-01 to {date_to} 9999-12-31: at most 100 years at once"),
    ({"speaker": "boss"}, "{speaker} 'boss': not one of agent, customer, mixed"),
    ({"quality": "great"}, "{quality} 'great': not one of pass, needs_review"),
    ({"agent": "A" * 201}, "{agent}: longer than 200 characters"),
    ({"min_non_talk_share": "1.5"}, "{min_non_talk_share} 1.5: not from 0.0 to 1.0"),
    ({"min_agent_interruptions": "-1"}, "{min_agent_interruptions} -1: not from 0 to 1000000"),
    ({"size": "0"}, "{size} 0: not from 1 to 500"),
    ({"size": "-1"}, "{size} -1: not from 1 to 500"),
    ({"size": "501"}, "{size} 501: not from 1 to 500"),
    ({"q": "-risk"}, "{q} '-risk': only excludes, and exclusions alone find nothing: add a word to look for "
                     "('premium -risk')"),
    ({"q": "a" * 1001}, "{q}: longer than 1000 characters"),
    ({"q": "(" * 17 + "risk" + ")" * 17}, "{q}: parentheses nested deeper than 16 levels"),
]


@pytest.fixture
def client(settings: Settings) -> TestClient:
    _fill(SqliteIndex(settings.index.path("index_path")))
    return TestClient(create_app(settings))


@pytest.fixture
def env(settings: Settings) -> dict[str, str]:
    _fill(SqliteIndex(settings.index.path("index_path")))
    full = {k: v for k, v in os.environ.items() if not k.startswith("ASR_")}
    full.update(ASR_INDEX_PATH=str(settings.index.path("index_path")), ASR_LEDGER_URL=settings.ledger.ledger_url)
    return full


def search_args(params: dict[str, str]) -> list[str]:
    """``asr search`` with the API's parameters as its options, the query last (after ``--``: it may start with -)."""
    options = [part for name, value in params.items() if name != "q" for part in (CLI_NAMES[name], value)]
    return ["search", *options, "--", params.get("q", "returns")]


@pytest.mark.parametrize(("params", "message"), REFUSED, ids=[m.split(":")[0][:40] for _, m in REFUSED])
def test_the_command_line_and_the_api_refuse_alike(client: TestClient, env: dict[str, str], params: dict[str, str],
                                                  message: str) -> None:
    answer = client.post("/api/search", json={"q": "returns", **params})
    assert answer.status_code == 422 and answer.json()["detail"] == message.format(**API_NAMES), answer.text
    proc = subprocess.run([ASR, *search_args(params)], env=env, capture_output=True, text=True, timeout=120,
                          cwd=PROJECT_ROOT)
    assert (proc.returncode, proc.stderr, proc.stdout) == (2, f"asr search: {message.format(**CLI_NAMES)}\n", "")


@pytest.mark.parametrize("route", ["/api/search", "/api/counts", "/api/export"])
def test_every_search_route_checks_what_it_is_given(client: TestClient, route: str) -> None:
    bad = client.post(route, json={"q": "returns", "date_from": "bad"})
    assert bad.status_code == 422 and bad.json()["detail"] == "date_from 'bad': not a calendar date (YYYY-MM-DD)"
    nothing = client.post(route, data={"q": "-risk"})
    assert nothing.status_code == 422 and "only excludes" in nothing.json()["detail"]
    good = client.post(route, json={"q": "returns", "date_from": "2026-11-01", "date_to": "2026-11-30",
                                    "speaker": "customer", "quality": "pass", "min_non_talk_share": "0.0"})
    assert good.status_code == 200, good.text


def test_a_calendar_date_is_written_yyyy_mm_dd_and_exists() -> None:
    assert calendar_day("2028-02-29", "d") == "2028-02-29"
    for value in ("2027-02-29", "2026-11-27T00:00", "2026-W48-5", "26-11-27", " 2026-11-27"):
        with pytest.raises(InputError, match="not a calendar date"):
            calendar_day(value, "d")
    day_range("2026-11-01", None, "a", "b")  # an open end passes
    day_range("2026-11-01", "2026-11-01", "a", "b")


def test_a_query_with_something_to_find_passes() -> None:
    for query in ("risk", "premium -risk", "a | -b", "(" * 16 + "risk" + ")" * 16, '"((((((((((((((((((("', ""):
        assert check_query(query, "q") == query
