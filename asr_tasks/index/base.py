"""What every index backend does (``TranscriptIndex``), and the document fields all backends share."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Iterable

from asr_tasks.index.query import AgentDayCount, CallsPage, Filters, SearchPage
from asr_tasks.models import Quarantine, Recording, SearchHit, Segment, Transcript


class TranscriptIndex(ABC):
    """What the pipeline, the CLI and the search page need from an index; every backend answers alike."""

    @abstractmethod
    def replace_recording(self, transcript: Transcript) -> int: ...

    @abstractmethod
    def record_quarantine(self, quarantine: Quarantine) -> None: ...

    @abstractmethod
    def delete_recording(self, bucket: str, key: str) -> int:
        """Take every version of the object out of the view; how many recordings went (0 or 1)."""

    @abstractmethod
    def purge_deleted(self) -> None:
        """Rewrite what deletions left in the backend's own files (a full-text index keeps deleted words in its
        pages or segments until they are merged): after an erasure, none of its words may remain anywhere."""

    @abstractmethod
    def segments(self, recording_id: str) -> list[Segment]:
        """One recording's segments in the order they were said."""

    def search(
        self,
        query: str,
        date_from: str | None = None,
        date_to: str | None = None,
        agent: str | None = None,
        speaker: str | None = None,
        quality: str | None = None,
        limit: int = 20,
    ) -> list[SearchHit]:
        """The best ``limit`` hits; ``search_page`` pages further."""
        return self.search_page(query, Filters(date_from, date_to, agent, speaker, quality), size=limit).hits

    @abstractmethod
    def search_page(
        self,
        query: str,
        filters: Filters = Filters(),
        size: int = 20,
        after: str | None = None,
        open_tag: str = "<em>",
        close_tag: str = "</em>",
    ) -> SearchPage:
        """One page of hits; a query with no word and a filter finds every segment the filters let through."""

    @abstractmethod
    def calls(self, query: str, filters: Filters = Filters(), size: int = 20, after: str | None = None) -> CallsPage:
        """The calls with a matching segment (a blank query: every call the filters let through), by day, key
        and id, each once; what a search by filters alone lists."""

    @abstractmethod
    def counts(self, query: str, filters: Filters = Filters()) -> list[AgentDayCount]: ...

    @abstractmethod
    def rule_counts(self, query: str, filters: Filters = Filters()) -> dict[str, int]:
        """For the calls the search matches: how many have a QA finding of each rule."""

    @abstractmethod
    def tag_counts(self, query: str, filters: Filters = Filters()) -> dict[str, int]:
        """For the calls the search matches: how many carry each QA tag (the search's own calls only, so that a
        facet names no call the search did not let through)."""

    @abstractmethod
    def score_counts(self, query: str, filters: Filters = Filters()) -> dict[str, int]:
        """For the calls the search matches: how many scored in each band of ``SCORE_BANDS`` (calls with no
        score are in none)."""

    @abstractmethod
    def recording(self, recording_id: str) -> dict[str, Any] | None:
        """The recording's document, its QA ``tags`` a list (empty before an audit tagged it) and its scorecard
        ``score`` (None before an audit scored it)."""

    @abstractmethod
    def recordings(self, call_date: str | None = None) -> list[dict[str, Any]]:
        """The recording documents of a day (of every day: None) in key order, as the view shows them."""

    @abstractmethod
    def replace_findings(self, call_date: str, findings: list[dict[str, Any]]) -> None: ...

    @abstractmethod
    def findings(self, call_date: str) -> list[dict[str, Any]]: ...

    @abstractmethod
    def replace_tags(self, call_date: str, tags: dict[str, list[str]]) -> None:
        """The day's audit tags, by recording id: every recording of the day gets its own (sorted, each once) and
        one left out gets none, replacing any earlier audit of that day as ``replace_findings`` does. Rewriting a
        recording's version (``asr reindex``) keeps its tags; a new version of its object has none until the
        next audit."""


    @abstractmethod
    def replace_scores(self, call_date: str, scores: dict[str, float | None]) -> None:
        """The day's scorecard scores, by recording id, replacing any earlier audit of that day as
        ``replace_tags`` does (one left out has none); a reindex keeps a version's score."""


def tag_list(tags: Iterable[str]) -> list[str]:
    """Tags as both backends store them: sorted, each once."""
    return sorted(set(tags))


RECORDING_FIELDS = ("recording_id", "bucket", "key", "etag", "size", "call_id", "call_date", "agent_id", "customer_id",
                    "direction", "started_at")


def recording_fields(rec: Recording) -> dict[str, Any]:
    """A recording's own fields as both backends store them (no call date: None)."""
    fields = {name: getattr(rec, name) for name in RECORDING_FIELDS}
    fields["call_date"] = fields["call_date"] or None
    return fields


def transcript_summary(transcript: Transcript) -> dict[str, Any]:
    """A transcript's recording-level fields, as both backends store them beside the recording's own."""
    return {
        "duration": transcript.duration,
        "speech_seconds": transcript.speech_seconds,
        "language": transcript.language,
        "model": transcript.model,
        "pipeline_version": transcript.pipeline_version,
        "state": transcript.state,
        "reason": transcript.reason,
        "quality": transcript.quality,
        "quality_failures": list(transcript.quality_failures),
        "segments": len(transcript.segments),
        **analytics_fields(transcript.analytics),
    }


FILTERED_SPEAKERS = ("agent", "customer")  # whose interruptions searches filter on (the channels' usual roles)


def analytics_fields(analytics: dict[str, Any]) -> dict[str, Any]:
    """The call's analytics as stored with its recording, and the figures searches filter on beside it."""
    speakers = analytics.get("speakers") or {}
    return {
        "analytics": analytics or None,
        "non_talk_share": analytics.get("non_talk_share"),
        **{f"{name}_interruptions": (speakers.get(name) or {}).get("interruptions") for name in FILTERED_SPEAKERS},
    }

