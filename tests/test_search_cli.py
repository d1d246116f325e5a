"""``asr search`` as people and scripts use it: a table, JSON, pages, counts per agent and day."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from test_index_contract import EN_KEY, OLD_KEY, ZH_KEY, _fill, _recording

from asr_tasks.config import PROJECT_ROOT
from asr_tasks.index.sqlite import SqliteIndex

ASR = str(Path(sys.executable).parent / "asr")


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    path = tmp_path / "index.sqlite"
    _fill(SqliteIndex(path))
    full = {k: v for k, v in os.environ.items() if not k.startswith("ASR_")}
    full["ASR_INDEX_PATH"] = str(path)
    full["ASR_LEDGER_URL"] = f"sqlite:///{tmp_path / 'ledger.sqlite'}"  # where each search's access-log row goes
    return full


def asr(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ASR, "search", *args], env=env, capture_output=True, text=True, timeout=120,
                          cwd=PROJECT_ROOT)


def test_table_for_people_with_pages(env: dict[str, str]) -> None:
    first = asr(env, "收益 | returns", "--limit", "2")
    assert first.returncode == 0, first.stderr
    lines = first.stdout.splitlines()
    assert lines[0].split() == ["DATE", "AGENT", "SPEAKER", "TIME", "RECORDING", "QUALITY", "TEXT"]
    assert lines[0].index("TEXT") == lines[1].index(lines[1].split("  ")[-1].strip())  # columns line up
    assert len(lines) == 4 and lines[-1].startswith("more hits: add --after ")
    rest = asr(env, "收益 | returns", "--limit", "2", "--after", lines[-1].split()[-1])
    assert rest.returncode == 0, rest.stderr
    rows = lines[1:3] + [line for line in rest.stdout.splitlines()[1:] if not line.startswith("more")]
    assert len(rows) == 4
    assert any(r.split()[:4] == ["2025-12-31", "AG-1", "agent", "0:03.0-0:05.0"] and OLD_KEY in r
               and r.endswith("我们不保证**收益**，投资有风险。") for r in rows)
    assert any(r.split()[:4] == ["2026-11-28", "AG-2", "customer", "0:06.5-0:08.0"] and EN_KEY in r
               and "What **returns** did" in r for r in rows)
    assert sum(ZH_KEY in r for r in rows) == 1


def test_a_hit_found_by_sound_or_spelling_says_so(env: dict[str, str]) -> None:
    proc = asr(env, "收益 | retuns", "--sounds-like")
    assert proc.returncode == 0, proc.stderr
    rows = proc.stdout.splitlines()[1:]
    assert any("**收益**" in r and not r.endswith(")") for r in rows)  # exact: as ever
    assert any("**returns**" in r and r.endswith("  (spelt nearly like)") for r in rows), rows


def test_json_for_scripts_and_filters(env: dict[str, str]) -> None:
    proc = asr(env, '"guarantee a return" | 稳赚不赔 -您', "--json", "--speaker", "agent", "--quality", "needs_review")
    assert proc.returncode == 0, proc.stderr
    [hit] = json.loads(proc.stdout)
    assert (hit["key"], hit["speaker"], hit["start"], hit["end"]) == (EN_KEY, "agent", 0.5, 6.0)
    assert hit["quality"] == "needs_review"  # each hit carries its recording's gate outcome
    assert hit["highlight"] == "I can <em>guarantee a return</em> of twelve percent every year."
    assert proc.stderr == ""  # no further page


def test_counts_per_agent_and_day(env: dict[str, str]) -> None:
    table = asr(env, "收益 | 风险 | returns", "--counts")
    assert table.stdout.splitlines() == [
        "AGENT  DAY         SEGMENTS  CALLS",
        "AG-1   2025-12-31  1         1",
        "AG-1   2026-11-27  2         1",
        "AG-2   2026-11-28  2         1",
    ]
    as_json = json.loads(asr(env, "returns", "--counts", "--json", "--date-from", "2026-11-28").stdout)
    assert as_json == [{"agent_id": "AG-2", "call_date": "2026-11-28", "segments": 2, "recordings": 1}]


def test_tags_narrow_the_search_to_calls_with_every_one(env: dict[str, str]) -> None:
    index = SqliteIndex(Path(env["ASR_INDEX_PATH"]))
    index.replace_tags("2026-11-27", {_recording(ZH_KEY).recording_id: ["complaint", "product-mortgage"]})
    index.replace_tags("2025-12-31", {_recording(OLD_KEY).recording_id: ["complaint"]})
    one = asr(env, "收益 | returns", "--tag", "complaint", "--json")
    assert one.returncode == 0, one.stderr
    assert {h["key"] for h in json.loads(one.stdout)} == {ZH_KEY, OLD_KEY}
    both = asr(env, "收益 | returns", "--tag", "complaint", "--tag", "product-mortgage", "--json")
    assert {h["key"] for h in json.loads(both.stdout)} == {ZH_KEY}
    long = asr(env, "收益", "--tag", "x" * 201)
    assert (long.returncode, long.stderr) == (2, "asr search: --tag: longer than 200 characters\n")


def test_bad_cursor_and_nothing_found(env: dict[str, str]) -> None:
    bad = asr(env, "收益", "--after", "not-a-cursor")
    assert bad.returncode == 2 and "invalid page cursor 'not-a-cursor'" in bad.stderr
    none = asr(env, "稳赚不赔 -您")
    assert none.returncode == 0 and none.stdout.strip() == "no hits for '稳赚不赔 -您'"
    excluded = asr(env, "--", "-收益")  # "--" lets a query start with "-"
    assert excluded.returncode == 2 and excluded.stdout == ""
    assert excluded.stderr == ("asr search: query '-收益': only excludes, and exclusions alone find nothing: "
                               "add a word to look for ('premium -risk')\n")


def test_an_index_never_written_is_nothing_indexed_yet_and_stays_unwritten(env: dict[str, str],
                                                                            tmp_path: Path) -> None:
    missing = tmp_path / "never" / "index.sqlite"
    for args in (["收益"], ["收益", "--counts"], ["收益", "--json"]):
        proc = asr({**env, "ASR_INDEX_PATH": str(missing)}, *args)
        assert (proc.returncode, proc.stdout) == (1, "")
        assert proc.stderr == f"asr search: nothing is indexed yet (no index at {missing})\n"
    assert not missing.parent.exists()


def test_elasticsearch_trouble_is_reported_not_raised(env: dict[str, str]) -> None:
    down = asr({**env, "ASR_INDEX_BACKEND": "elasticsearch", "ASR_ES_URL": "http://127.0.0.1:9",
                "ASR_ES_MAX_RETRIES": "0"}, "收益")
    assert down.returncode == 1
    assert down.stderr.splitlines()[-1].startswith("asr: index error: Elasticsearch unreachable: ")
    bad = asr({**env, "ASR_INDEX_BACKEND": "elasticsearch", "ASR_ES_REFRESH": "sometimes"}, "收益")
    assert bad.returncode == 2 and ("env ASR_ES_REFRESH: bad value for es_refresh: 'sometimes': "
                                    "Input should be 'wait_for', 'true' or 'false'") in bad.stderr


def test_ui_serves_the_search_page(env: dict[str, str]) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen([ASR, "ui", "--port", str(port)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=PROJECT_ROOT)
    browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())  # keeps the page's cookie
    try:
        assert proc.stdout is not None
        address = re.search(r"http://\S+/\?token=\S+", proc.stdout.readline())  # what it printed, token and all
        assert address
        deadline = time.monotonic() + 60
        while True:
            try:
                browser.open(address.group(), timeout=5).close()
                searched = urllib.request.Request(f"http://127.0.0.1:{port}/", data=urllib.parse.urlencode(
                    {"q": "收益"}).encode())  # the page's form, posted
                with browser.open(searched, timeout=5) as answer:
                    page = answer.read().decode()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.stderr else ""
                time.sleep(0.2)
        assert page.count('class="hit"') == 2 and "保证<mark>收益</mark>" in page
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_urls_open_each_hits_call_page(env: dict[str, str]) -> None:
    proc = asr(env, "guarantee a return", "--urls")
    assert proc.returncode == 0, proc.stderr
    link = proc.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"http://localhost:8091/call/[0-9a-f]{24}\?t=0\.5", link)  # the second, never the words
