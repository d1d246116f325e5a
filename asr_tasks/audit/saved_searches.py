"""Saved searches that watch: an auditor's search (its words, filters, and whether it sounds like), kept in the
ledger's database and run by the nightly audit over each new day.

What no rule names yet an auditor can watch for by a search: its hits of the day
become findings of a rule of its own, ``watch:<owner>/<name>``, in the day's
findings, report and call pages like any rule's, and re-scoring a day runs the
searches saved then. A day's hits are bounded (``MAX_HITS_PER_DAY`` per search,
the best first). The hits are the index's, so what they quote is masked as
everything the index holds.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from typing import Any, Sequence

from rapidfuzz import fuzz
from sqlalchemy import delete, insert, select
from sqlalchemy.exc import IntegrityError

from asr_tasks.audit.rules import SEVERITIES, Finding
from asr_tasks.index.base import TranscriptIndex
from asr_tasks.index.query import Filters, blank, check_query, checked_filters, parse, terms
from asr_tasks.inputs import InputError
from asr_tasks.models import SearchHit
from asr_tasks.records.ledger import Ledger
from asr_tasks.records.tables import saved_searches
from asr_tasks.records.teams import Teams
from asr_tasks.text.pii import find, mask_text
from asr_tasks.text.pii_policy import Policy
from asr_tasks.text.spoken import read

WATCH_PREFIX = "watch:"
MAX_HITS_PER_DAY = 200
MAX_NAME_CHARS = 64
MAX_NAME_DIGITS = 4  # a name is a label, never a number of someone's
_NAME = re.compile(r"[^\W_][\w .-]*")
_MARKED = re.compile(r"<em>(.*?)</em>")


class SavedSearchError(ValueError):
    """A search that cannot be saved or removed; the message says why."""


@dataclass(frozen=True)
class SavedSearch:
    """One saved search: whose, its name, and the search it runs over each day."""

    id: int
    owner: str
    name: str
    query: str
    filters: Filters
    severity: str
    created_at: str
    within_teams: bool = False  # a Team Lead's: over the calls of the teams its owner leads

    @property
    def rule_id(self) -> str:
        """The rule its findings carry: one per owner and name."""
        return f"{WATCH_PREFIX}{self.owner}/{self.name}"

    def describe(self) -> str:
        return f"saved search {self.name} of {self.owner}: “{self.query}”" + (
            ", sounds like" if self.filters.sounds_like else "")

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "owner": self.owner, "name": self.name, "query": self.query,
                "filters": stored_filters(self.filters), "sounds_like": self.filters.sounds_like,
                "severity": self.severity, "created_at": self.created_at, "rule_id": self.rule_id,
                "within_teams": self.within_teams}


def stored_filters(filters: Filters) -> dict[str, Any]:
    """The filters a saved search keeps: those set, tags a list (no days: it runs over each new one)."""
    return {k: (list(v) if k == "tags" else v) for k, v in asdict(filters).items()
            if v is not False and v not in (None, "", ()) and k not in ("date_from", "date_to")}


def _filters(stored: str) -> Filters:
    data: dict[str, Any] = json.loads(stored)
    data["tags"] = tuple(data.get("tags") or ())
    return Filters(**data)


class SavedSearches:
    """The saved searches of one ledger database; with a PII policy, a search whose words or filters hold personal
    data is refused (a card number searched for is never stored in clear, and the index holds it masked)."""

    def __init__(self, ledger: Ledger, policy: Policy | None = None) -> None:
        self.engine = ledger.engine
        self.policy = policy

    def add(self, owner: str, name: str, query: str, filters: Filters, speakers: Sequence[str],
            severity: str = "medium", within_teams: bool = False) -> SavedSearch:
        """Save a search under the owner's name for it, checked as a search from the page or the CLI is; refused
        (``SavedSearchError``) where it has no words or could find nothing, names days, or the name is taken.
        ``within_teams``: a Team Lead's, which runs over their teams' calls only."""
        name = " ".join(name.split())  # one space between words: "risk  talk" is "risk talk"
        if personal := personal_in_name(name, self.policy):  # first: a refusal quoting the name would repeat it
            raise SavedSearchError(f"the name holds personal data ({personal}); it is kept in clear in its rule, "
                                   "findings and reports, so it says what the search looks for, with at most "
                                   f"{MAX_NAME_DIGITS} digits, written or said")
        if not _NAME.fullmatch(name) or len(name) > MAX_NAME_CHARS:
            raise SavedSearchError(f"name {name!r}: letters, digits, spaces, '.', '-' and '_', at most "
                                   f"{MAX_NAME_CHARS} characters, starting with a letter or digit")
        if severity not in SEVERITIES:
            raise SavedSearchError(f"severity {severity!r}: one of {', '.join(SEVERITIES)}")
        if filters.date_from or filters.date_to:
            raise SavedSearchError("a saved search runs over each new day: it takes no dates")
        try:
            check_query(query, "query")
            checked_filters(filters, speakers)
        except InputError as exc:
            raise SavedSearchError(str(exc)) from exc
        if blank(query):
            raise SavedSearchError("a saved search needs words to look for (its filters narrow where)")
        typed = {"query": query, "agent": filters.agent or "", "rule": filters.rule or "", "tag": " ".join(filters.tags)}
        held = [field for field, value in typed.items()
                if self.policy is not None and mask_text(value, self.policy) != value]
        if held:
            raise SavedSearchError(f"the {' and '.join(held)} holds personal data (a card, phone or account "
                                   "number...), which the index holds masked: a search for it finds nothing, and "
                                   "a saved search does not keep it")
        if any(s.name.casefold() == name.casefold() for s in self.listed(owner)):  # one rule, however spelt
            raise SavedSearchError(f"{owner} has a saved search named {name!r} already")
        row = {"owner": owner, "name": name, "query": query,
               "filters": json.dumps(stored_filters(filters), ensure_ascii=False, sort_keys=True),
               "severity": severity, "created_at": datetime.now(timezone.utc), "within_teams": within_teams}
        try:
            with self.engine.begin() as db:
                new_id = db.execute(insert(saved_searches).values(**row).returning(saved_searches.c.id)).scalar_one()
        except IntegrityError as exc:
            raise SavedSearchError(f"{owner} has a saved search named {name!r} already") from exc
        return self._one(int(new_id))

    def listed(self, owner: str | None = None) -> list[SavedSearch]:
        """Every saved search (one owner's: ``owner``), by owner and name."""
        t = saved_searches
        query = select(t).order_by(t.c.owner, t.c.name)
        if owner is not None:
            query = query.where(t.c.owner == owner)
        with self.engine.connect() as db:
            return [_saved(dict(row._mapping)) for row in db.execute(query)]

    def remove(self, owner: str, name: str) -> SavedSearch:
        """Remove one of the owner's saved searches; the findings it made stay with their days' audits."""
        t, name = saved_searches, " ".join(name.split())
        found = [s for s in self.listed(owner) if s.name.casefold() == name.casefold()]
        if not found:
            raise SavedSearchError(f"{owner} has no saved search named {name!r}")
        with self.engine.begin() as db:
            db.execute(delete(t).where(t.c.id == found[0].id))
        return found[0]

    def _one(self, search_id: int) -> SavedSearch:
        with self.engine.connect() as db:
            row = db.execute(select(saved_searches).where(saved_searches.c.id == search_id)).one()
        return _saved(dict(row._mapping))


def _saved(row: dict[str, Any]) -> SavedSearch:
    created = row["created_at"]
    return SavedSearch(int(row["id"]), row["owner"], row["name"], row["query"], _filters(row["filters"]),
                       row["severity"], created.isoformat(timespec="seconds") if created else "",
                       bool(row["within_teams"]))


def personal_in_name(name: str, policy: Policy | None) -> str:
    """What personal data a search's name holds, in words ("" for none): the kinds the policy finds in it, or more
    digits than a label needs, as written or as said ("four one five ..." reads as digits, as the policy reads
    speech)."""
    kinds = sorted({kind for _, _, kind, _ in find(name, policy)}) if policy is not None else []
    said = sum(ch.isdigit() for ch in (read(name, policy.spoken).text if policy is not None else name))
    return ", ".join(kinds) or (f"{said} digits" if said > MAX_NAME_DIGITS else "")


def counted_by_id(by_rule: dict[str, int], searches: Sequence[SavedSearch]) -> dict[str, int]:
    """Findings per rule as Airflow may keep them (XCom, which every viewer of the DAG reads): a saved search's
    under its id (``watch:#12``), never its owner, name or words; one removed since it ran as ``watch:removed``."""
    ids = {s.rule_id: f"{WATCH_PREFIX}#{s.id}" for s in searches}
    counted: Counter[str] = Counter()
    for rule, n in by_rule.items():
        counted[ids.get(rule, f"{WATCH_PREFIX}removed") if rule.startswith(WATCH_PREFIX) else rule] += n
    return dict(sorted(counted.items()))


def _finding(search: SavedSearch, hit: SearchHit) -> Finding:
    marked = " … ".join(_MARKED.findall(hit.highlight)) or hit.text
    asked = " ".join(t.text for t in terms(parse(search.query)))
    # what sounds as asked is as sure as what was written so; a spelling nearly alike is as sure as it is alike
    alike = 1.0 if hit.match in (None, "exact", "sound") else round(fuzz.ratio(marked.lower(), asked.lower()) / 100, 2)
    digest = hashlib.sha256(f"{search.rule_id}\x00{hit.recording_id}\x00{hit.speaker}\x00{hit.start:.3f}".encode())
    return Finding(finding_id=digest.hexdigest()[:24], rule_id=search.rule_id, severity=search.severity,
                   description=search.describe(), recording_id=hit.recording_id, key=hit.key,
                   call_date=hit.call_date, agent_id=hit.agent_id, speaker=hit.speaker, start=round(hit.start, 3),
                   end=round(hit.end, 3), matched_text=marked, confidence=min(alike, 1.0))


def watch_findings(call_date: str, searches: Sequence[SavedSearch], index: TranscriptIndex,
                   teams: Teams) -> list[Finding]:
    """Each saved search over one day: its hits (at most ``MAX_HITS_PER_DAY``) as findings of its rule; a Team
    Lead's over the calls of the teams its owner leads now."""
    found: list[Finding] = []
    for search in searches:
        agents = teams.led_by(search.owner) if search.within_teams else None
        page = index.search_page(search.query, replace(search.filters, date_from=call_date, date_to=call_date,
                                                       agents=agents), size=MAX_HITS_PER_DAY)
        found += [_finding(search, hit) for hit in page.hits]
    return found
