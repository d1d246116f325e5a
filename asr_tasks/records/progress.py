"""How far the nightly runs and backfills are, how fast they go, when they will end, and what fails.

Everything comes from the ledger: states by period, the audio's seconds (known
once a recording is decoded; before that, estimated from its bytes at the rate
of the decoded ones), the rows that reached a final state in the last hour and
day (their ``updated_at``), and the reasons of failures. The queries group in
the database, so a ledger of millions of rows answers in one pass over the range.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import date, datetime, timedelta, timezone
from typing import Any, Literal

from sqlalchemy import and_, func, select

from asr_tasks.records.ledger import Ledger
from asr_tasks.records.tables import recordings
from asr_tasks.states import FAILED_STATES, FINAL_STATES, NOT_CURRENT_STATES, RecordingState

By = Literal["month", "day"]
FAILURE_GROUPS = 20


@dataclass
class Period:
    """One month (or day) of calls: recordings by state, audio done and left."""

    period: str
    recordings: int
    states: dict[str, int]
    audio_hours_done: float
    audio_hours_left: float | None  # None: nothing decoded yet to estimate from

    @property
    def share_done(self) -> float:
        finished = sum(n for state, n in self.states.items() if state in FINAL_STATES)
        return finished / self.recordings if self.recordings else 0.0


@dataclass
class Throughput:
    """Recordings that reached a final state in a window ending now."""

    window: str
    recordings: int
    audio_hours: float
    audio_hours_per_hour: float
    recordings_per_hour: float


@dataclass
class Failure:
    state: str
    reason: str
    count: int
    example_key: str


@dataclass
class Progress:
    date_from: str
    date_to: str
    by: str
    periods: list[Period] = field(default_factory=list)
    throughput: list[Throughput] = field(default_factory=list)
    eta_hours: float | None = None
    eta_at: str | None = None
    failures: list[Failure] = field(default_factory=list)
    days_without_recordings: list[str] = field(default_factory=list)
    message: str | None = None

    @property
    def recordings(self) -> int:
        return sum(p.recordings for p in self.periods)

    @property
    def audio_hours_done(self) -> float:
        return round(sum(p.audio_hours_done for p in self.periods), 3)

    @property
    def audio_hours_left(self) -> float | None:
        left = [p.audio_hours_left for p in self.periods]
        return None if any(v is None for v in left) else round(sum(v or 0.0 for v in left), 3)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for period, row in zip(self.periods, data["periods"]):
            row["share_done"] = round(period.share_done, 4)
        return {**data, "recordings": self.recordings, "audio_hours_done": self.audio_hours_done,
                "audio_hours_left": self.audio_hours_left}


def progress(ledger: Ledger, date_from: str, date_to: str, by: By = "month",
             now: datetime | None = None) -> Progress:
    """The range's progress; ``now`` fixes the clock (tests)."""
    now = now or datetime.now(timezone.utc)
    report = Progress(date_from, date_to, by)
    t = recordings
    live = and_(t.c.call_date >= date_from, t.c.call_date <= date_to,
                t.c.state.not_in(NOT_CURRENT_STATES))  # a waiting version is not work left: its hold decides
    decoded, undecoded = and_(t.c.audio_seconds.is_not(None), t.c.size > 0), t.c.audio_seconds.is_(None)
    with ledger.engine.connect() as db:
        # One pass over the range: per day and state, what the periods, the bytes-to-seconds rate and the days
        # with recordings all come from; the throughput and failures read only their own rows through indexes.
        cells = db.execute(select(t.c.call_date, t.c.state, func.count(), func.sum(t.c.audio_seconds),
                                  func.sum(t.c.audio_seconds).filter(decoded), func.sum(t.c.size).filter(decoded),
                                  func.sum(t.c.size).filter(undecoded), func.count().filter(undecoded))
                           .where(live).group_by(t.c.call_date, t.c.state)).all()
        for window, hours in (("last hour", 1), ("last day", 24)):
            since = now - timedelta(hours=hours)
            n, audio = db.execute(select(func.count(), func.sum(t.c.audio_seconds)).where(
                live, t.c.state.in_(FINAL_STATES), t.c.updated_at >= since, t.c.updated_at <= now)).one()
            report.throughput.append(Throughput(window, int(n), round((audio or 0.0) / 3600, 3),
                                                round((audio or 0.0) / 3600 / hours, 3), round(n / hours, 2)))
        failures = db.execute(select(t.c.state, t.c.reason, func.count(), func.min(t.c.key))
                              .where(live, t.c.state.in_(FAILED_STATES))
                              .group_by(t.c.state, t.c.reason).order_by(func.count().desc(), t.c.reason)
                              .limit(FAILURE_GROUPS)).all()
    decoded_seconds = sum(float(c[4] or 0) for c in cells)  # PostgreSQL sums are numeric
    decoded_bytes = sum(float(c[5] or 0) for c in cells)
    seconds_per_byte = decoded_seconds / decoded_bytes if decoded_seconds and decoded_bytes else None
    width = 7 if by == "month" else 10
    rows: dict[tuple[str, str], list[float]] = {}
    for call_date, state, n, audio, _, _, unsized_bytes, unsized in cells:
        row = rows.setdefault((call_date[:width], state), [0, 0.0, 0.0, 0])
        row[0] += n
        row[1] += float(audio or 0)
        row[2] += float(unsized_bytes or 0)
        row[3] += unsized
    days = {c[0] for c in cells}
    periods: dict[str, Period] = {}
    for (key, state), (n, audio, unsized_bytes, unsized) in sorted(rows.items()):
        p = periods.setdefault(key, Period(key, 0, {}, 0.0, 0.0))
        p.recordings += int(n)
        p.states[state] = int(n)
        if state in FINAL_STATES:
            p.audio_hours_done += audio / 3600
            continue
        estimate = unsized_bytes * seconds_per_byte if seconds_per_byte else (None if unsized else 0.0)
        if p.audio_hours_left is not None:
            p.audio_hours_left = None if estimate is None else p.audio_hours_left + (audio + estimate) / 3600
    for p in periods.values():
        p.audio_hours_done = round(p.audio_hours_done, 3)
        p.audio_hours_left = None if p.audio_hours_left is None else round(p.audio_hours_left, 3)
    report.periods = list(periods.values())
    report.failures = [Failure(state, reason or "", int(n), key) for state, reason, n, key in failures]
    first, last = date.fromisoformat(date_from), min(date.fromisoformat(date_to), now.date())
    report.days_without_recordings = [d.isoformat() for d in _days(first, last) if d.isoformat() not in days]
    rate_per_hour = next((r.audio_hours_per_hour for r in reversed(report.throughput) if r.recordings), 0.0)
    left = report.audio_hours_left
    if left and rate_per_hour:
        report.eta_hours = round(left / rate_per_hour, 2)
        report.eta_at = (now + timedelta(hours=report.eta_hours)).isoformat(timespec="minutes")
    if date.fromisoformat(date_from) > now.date():
        report.message = f"{date_from} is after today: no recordings of that range can have arrived yet"
    elif not report.periods:
        report.message = f"no recordings sensed for {date_from} to {date_to}"
    elif not any(p.states.get(s) for p in report.periods for s in (RecordingState.INDEXED,)) and report.failures:
        report.message = "nothing of this range was indexed: every finished recording failed (see the reasons)"
    return report


def first_day(ledger: Ledger) -> str | None:
    """The earliest call date in the ledger: where a range without a start begins."""
    with ledger.engine.connect() as db:
        return db.execute(select(func.min(recordings.c.call_date))).scalar()


def _days(first: date, last: date) -> list[date]:
    return [first + timedelta(days=n) for n in range((last - first).days + 1)] if last >= first else []


def finished_per_hour(ledger: Ledger, now: datetime, hours: int = 48) -> list[tuple[str, int, float]]:
    """(hour, recordings, audio hours) that reached a final state in each of the last ``hours`` hours, oldest first."""
    t = recordings
    since = now - timedelta(hours=hours)
    if ledger.engine.dialect.name == "postgresql":
        hour = func.to_char(func.timezone("UTC", t.c.updated_at), 'YYYY-MM-DD"T"HH24')
    else:
        hour = func.strftime("%Y-%m-%dT%H", t.c.updated_at)
    query = (select(hour.label("hour"), func.count(), func.sum(t.c.audio_seconds))
             .where(t.c.state.in_(FINAL_STATES), t.c.updated_at >= since, t.c.updated_at <= now)
             .group_by("hour"))
    with ledger.engine.connect() as db:
        found = {h: (int(n), (audio or 0.0) / 3600) for h, n, audio in db.execute(query)}
    slots = [(since + timedelta(hours=k + 1)).strftime("%Y-%m-%dT%H") for k in range(hours)]
    return [(h, *found.get(h, (0, 0.0))) for h in slots]

