"""What the QA team's pages cost over a month of findings for 200 agents.

Writes a month (``--days``) of audited days as the nightly audit stores them
(each day's report with its findings and every call's scorecard answers, and
its calls in short for the trends) for ``--agents`` agents in teams of 20, each
taking ``--calls`` calls a day with about one finding a call; reviews
a share of the findings through the ledger. Then times, through the app
(``TestClient``: routing, reading the stored days, the ledger, the template; no
network), the review queue of the whole month (its first page of open findings,
and one team's), the trends page of the month by team and by agent, and the
month's exports (findings as CSV and Parquet, scorecard answers as Parquet).

    .venv/bin/python bench/qa_month.py [--agents 200] [--days 30] [--calls 20] [--runs 7] [--quick] [--json]

``--quick`` writes 10 agents, 3 days of 4 calls each, and times 3 runs. The
JSON's keys: ``agents``, ``days``, ``calls``, ``findings``, ``reviews``,
``build_s``, ``pages`` (per page: ``p50_ms``, ``p95_ms``, ``kb``), ``exports``
(per export: ``wall_s``, ``mb``, ``rows``).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path

from fastapi.testclient import TestClient
from synthetic import parse_args, print_report

from asr_tasks.audit.call_score import CallScore
from asr_tasks.audit.reports import report_json, scores_json
from asr_tasks.audit.reviews import Reviews
from asr_tasks.audit.rules import AuditResult, Finding
from asr_tasks.audit.scorecards import load_scorecard, score_of
from asr_tasks.audit.trends import write_day_calls
from asr_tasks.config import PROJECT_ROOT, load_settings
from asr_tasks.intake.stores import LocalStore
from asr_tasks.records.access_log import AccessLog
from asr_tasks.records.ledger import open_ledger
from asr_tasks.version import DayReports
from asr_tasks.web.app import create_app

QUICK = {"agents": 10, "days": 3, "calls": 4, "runs": 3}
RULES = {"promise-of-return": "high", "recording-disclosure": "medium", "pressure-selling": "medium",
         "long-hold": "low", "agent-interrupts": "low", "card-number-read-out": "high"}
FIRST = date(2026, 10, 1)


def write_month(root: Path, args: argparse.Namespace) -> tuple[int, list[Finding]]:
    """The month's stored days; how many calls, and every finding."""
    rng = random.Random(7)
    settings = load_settings(env={"ASR_STORE_ROOT": str(root), "ASR_LEDGER_URL": f"sqlite:///{root / 'l.sqlite'}"})
    store, card = LocalStore(root), load_scorecard(PROJECT_ROOT / "include" / "scorecards" / "default.yaml")
    bucket, calls, findings = settings.storage.artefacts_bucket, 0, []
    for d in range(args.days):
        day = (FIRST + timedelta(days=d)).isoformat()
        result = AuditResult(day, 0, rule_set="bench")
        short = []
        for agent in range(args.agents):
            for n in range(args.calls):
                rid, key = f"{d:03d}{agent:04d}{n:04d}".ljust(24, "0"), f"calls/{day.replace('-', '/')}/a{agent}_{n}.wav"
                fired = [r for r in RULES if rng.random() < 0.5 / len(RULES) * 2 * (0.5 + agent % 5 / 4)]
                for rule in fired:
                    start = round(rng.uniform(0, 300), 2)
                    result.findings.append(Finding(f"{rid}{rule}"[:24] + f"{len(result.findings):08d}", rule,
                                                   RULES[rule], "", rid, key, day, f"AG-{agent:04d}", "agent", start,
                                                   start + 3.0, "guaranteed return" if rule == "promise-of-return"
                                                   else ""))
                answers: dict[str, str | None] = {q.id: ("no" if rng.random() < 0.1 else "yes") if q.automatic
                                                  else None for q in card.questions}
                score = score_of(card, answers)
                result.scores.append(CallScore(rid, key, day, f"AG-{agent:04d}", card.id, answers,
                                               {q: "bench" for q in answers}, score))
                short.append({"recording_id": rid, "agent_id": f"AG-{agent:04d}", "non_talk_share": rng.random() / 2,
                              "score": score, "findings": {r: 1 for r in fired}})
                result.recordings += 1
        store.put_bytes(bucket, DayReports(day).audit("json"), json.dumps(report_json(result, [], None)).encode())
        store.put_bytes(bucket, DayReports(day).scores, json.dumps(scores_json(result)).encode())
        write_day_calls(store, settings, day, {"date": day, "calls": short})
        calls += result.recordings
        findings += result.findings
    return calls, findings


def timed(client: TestClient, url: str, params: dict[str, str], runs: int) -> dict[str, float]:
    times, size = [], 0
    for _ in range(runs):
        started = time.perf_counter()
        answer = client.get(url, params=params)
        times.append(time.perf_counter() - started)
        assert answer.status_code == 200, (url, answer.status_code, answer.text[:300])
        size = len(answer.content)
    ordered = sorted(times)
    return {"p50_ms": round(1000 * statistics.median(times), 1),
            "p95_ms": round(1000 * ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))], 1),
            "kb": round(size / 1000, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", type=int, default=200)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    args = parse_args(parser, QUICK)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        teams = root / "teams.yaml"
        teams.write_text("teams:\n" + "".join(
            f"  team-{t:02d}: {{leads: [lead{t}], agents: [{', '.join(f'AG-{a:04d}' for a in range(t * 20, min(args.agents, t * 20 + 20)))}]}}\n"
            for t in range((args.agents + 19) // 20)))
        settings = load_settings(env={"ASR_STORE_ROOT": str(root), "ASR_LEDGER_URL": f"sqlite:///{root / 'l.sqlite'}",
                                      "ASR_INDEX_PATH": str(root / "index.sqlite"), "ASR_TEAMS": str(teams)})
        started = time.perf_counter()
        calls, findings = write_month(root, args)
        ledger = open_ledger(settings.ledger)
        reviews, rng = Reviews(ledger, AccessLog(ledger)), random.Random(3)
        reviewed = rng.sample(findings, min(len(findings), 2000))
        for f in reviewed:
            reviews.review(f, "qa1", "dismissed", "rule-wrong") if rng.random() < 0.3 else reviews.review(
                f, "qa1", "confirmed")
        build = time.perf_counter() - started
        client = TestClient(create_app(settings))
        month = {"date_from": FIRST.isoformat(), "date_to": (FIRST + timedelta(days=args.days - 1)).isoformat()}
        pages = {
            "queue_month_open": timed(client, "/reviews", month, args.runs),
            "queue_month_one_team": timed(client, "/reviews", {**month, "team": "team-00", "status": ""}, args.runs),
            "trends_month_by_team": timed(client, "/trends", {**month, "by": "team"}, args.runs),
            "trends_month_by_agent": timed(client, "/trends", {**month, "by": "agent"}, args.runs),
        }
        exports = {}
        for name, url in (("findings_csv", "/api/qa/findings.csv"), ("findings_parquet", "/api/qa/findings.parquet"),
                          ("scores_parquet", "/api/qa/scores.parquet")):
            started = time.perf_counter()
            answer = client.get(url, params=month)
            wall = time.perf_counter() - started
            assert answer.status_code == 200, answer.text[:300]
            rows = int(AccessLog(ledger).entries(actions=("export",))[-1].detail.rsplit(", ", 1)[1].split()[0])
            exports[name] = {"wall_s": round(wall, 2), "mb": round(len(answer.content) / 1e6, 2), "rows": rows}
    print_report({"agents": args.agents, "days": args.days, "calls": calls, "findings": len(findings),
                  "reviews": len(reviewed), "build_s": round(build, 1), "pages": pages, "exports": exports}, args.json)


if __name__ == "__main__":
    main()
