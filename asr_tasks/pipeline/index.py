"""The index stage: gated transcripts and quarantines into the search index, the ledger's final states, and
the day's quality report; and a day's index rebuilt from what is stored."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from asr_tasks.config import Settings
from asr_tasks.gate.reports import report_row, write_reports
from asr_tasks.index.base import TranscriptIndex
from asr_tasks.intake.artefacts import Artefacts
from asr_tasks.intake.stores import ObjectStore
from asr_tasks.pipeline.results import StageResult
from asr_tasks.records.access_log import AccessLog
from asr_tasks.records.holds import Hold, Holds
from asr_tasks.records.ledger import Ledger, open_ledger
from asr_tasks.records.locking import record_locks
from asr_tasks.states import FINAL_STATES, NOT_CURRENT_STATES, RecordingState
from asr_tasks.text.masking import configured_policy, remask
from asr_tasks.version import RecordingVersion

UNCHANGED = "unchanged"


def index_results(
    results: list[StageResult], store: ObjectStore, index: TranscriptIndex, settings: Settings
) -> dict[str, int]:
    """Index gated transcripts and record quarantines; what the ledger says was indexed already is left alone.

    The ledger's final state is written after the index documents, so a crash between
    the two indexes the recording again (replacing itself). A version that is not its key's
    current one (superseded, waiting behind a legal hold, erased) is not indexed: it would
    replace the current version's documents, or bring an erased call back. The day's quality
    report is written from the gated transcripts.
    """
    artefacts = Artefacts.of(store, settings)
    ledger = open_ledger(settings.ledger)
    sealing = Sealing.of(store, settings, ledger)
    counts: Counter[str] = Counter()
    rows: list[dict[str, Any]] = []
    for result in results:
        if (state := ledger.state(result.recording_id)) in NOT_CURRENT_STATES:
            counts[str(state)] += 1  # e.g. a newer version of the object was sensed: it is the view's
            continue
        final = ledger.finished(result.recording_id)
        started = time.monotonic()
        if result.state == RecordingState.QUARANTINED:
            if final:
                counts[UNCHANGED] += 1
                continue
            quarantine = artefacts.quarantine(result.version)
            index.record_quarantine(quarantine)
            ledger.advance(result.recording_id, RecordingState.QUARANTINED, reason=quarantine.reason)
            sealing.seal(result.recording_id)
            ledger.timed(result.recording_id, "index", time.monotonic() - started)
            counts[RecordingState.QUARANTINED] += 1
            continue
        transcript = artefacts.gated(result.version)
        rows.append(report_row(transcript))
        if final:
            counts[UNCHANGED] += 1
            continue
        index.replace_recording(transcript)
        sealing.seal(result.recording_id)
        ledger.advance(result.recording_id, transcript.state, reason=transcript.reason, stage="index",
                       seconds=time.monotonic() - started, segments=len(transcript.segments))
        counts[transcript.state] += 1
    if counts.keys() - {UNCHANGED, *NOT_CURRENT_STATES}:
        write_reports(rows, artefacts, settings.quality)
    return {str(state): n for state, n in counts.items()}


@dataclass
class Sealing:
    """With object locking, each recording's objects retained and held as the ledger says (``locking.py``), once
    its artefacts are all written; the holds in force read once."""

    holds: Holds
    active: list[Hold]

    @classmethod
    def of(cls, store: ObjectStore, settings: Settings, ledger: Ledger) -> Sealing:
        holds = Holds(ledger, AccessLog(ledger), record_locks(store, settings.storage))
        return cls(holds, holds.listed() if holds.locks is not None else [])

    def seal(self, recording_id: str) -> None:
        if self.holds.locks is not None:
            self.holds.seal_rows(self.holds.ledger.versions([recording_id]), self.active)


def reindex_day(call_date: str, store: ObjectStore, index: TranscriptIndex, settings: Settings) -> dict[str, int]:
    """Rebuild a day's index documents from gated transcripts and quarantine records; loads no model.

    A transcript masked by another PII policy than the configured one (or by none, when
    redaction was off) is masked again first: its raw and gated artefacts are rewritten
    and its redacted audio rendered, so a changed pattern reaches what is stored.
    A call under a legal hold is counted as ``held`` and keeps its documents and artefacts
    as they are; only where the index has none of it (an index rebuilt from nothing) are its
    documents made again, from its artefacts as they were stored, by whichever model and
    pipeline version made them.
    """
    ledger = open_ledger(settings.ledger)
    active = Holds(ledger, AccessLog(ledger)).listed()
    artefacts = Artefacts.of(store, settings)
    counts: Counter[str] = Counter()
    policy = configured_policy(settings)
    current = {row["recording_id"] for row in ledger.final_rows(call_date, artefacts.model)}
    for row in ledger.rows(call_date):
        held = row["state"] in FINAL_STATES and any(hold.covers(row) for hold in active)
        if held:
            counts["held"] += 1
            if index.recording(row["recording_id"]) is not None:
                continue
        elif row["recording_id"] not in current:
            continue
        stored = Artefacts.of(store, settings, row["model"])
        version = RecordingVersion(call_date, row["recording_id"], row["pipeline_version"])
        if row["state"] == RecordingState.QUARANTINED:
            index.record_quarantine(stored.quarantine(version))
        else:
            transcript = stored.gated(version)
            if not held and policy is not None and transcript.pii_policy != policy.identity:
                transcript = remask(transcript, policy, artefacts, settings)
                counts["masked again"] += 1
            index.replace_recording(transcript)
        if not held:
            counts[row["state"]] += 1
    return dict(counts)
