"""A recording version's work products in the artefact bucket, read and written as the objects they hold.

The keys come from ``RecordingVersion``; this adds the store, the bucket and the
model tag, so a stage says ``artefacts.gated(version)`` instead of spelling a key
and a JSON round trip.
"""

from __future__ import annotations

from dataclasses import dataclass

from asr_tasks.config import Settings
from asr_tasks.intake.stores import ObjectStore, get_json, put_json
from asr_tasks.models import Preprocessed, Quarantine, Transcript
from asr_tasks.version import RecordingVersion, model_tag


@dataclass(frozen=True)
class Artefacts:
    store: ObjectStore
    bucket: str
    model: str  # the model tag: which transcripts of a version are this configuration's

    @classmethod
    def of(cls, store: ObjectStore, settings: Settings, model: str | None = None) -> Artefacts:
        """The configured artefact bucket, for the configured model (or ``model``: a call indexed by another)."""
        return cls(store, settings.storage.artefacts_bucket, model or model_tag(settings.asr))

    def exists(self, key: str) -> bool:
        return self.store.exists(self.bucket, key)

    def manifest(self, version: RecordingVersion) -> Preprocessed:
        return Preprocessed.from_dict(get_json(self.store, self.bucket, version.manifest))

    def quarantine(self, version: RecordingVersion) -> Quarantine:
        return Quarantine.from_dict(get_json(self.store, self.bucket, version.quarantine))

    def transcript(self, version: RecordingVersion) -> Transcript:
        return Transcript.from_dict(get_json(self.store, self.bucket, version.transcript(self.model)))

    def gated(self, version: RecordingVersion) -> Transcript:
        return Transcript.from_dict(get_json(self.store, self.bucket, version.gated(self.model)))

    def unredacted(self, version: RecordingVersion) -> Transcript:
        return Transcript.from_dict(get_json(self.store, self.bucket, version.unredacted(self.model)))

    def put(self, key: str, item: Preprocessed | Quarantine | Transcript) -> None:
        put_json(self.store, self.bucket, key, item.to_dict())
