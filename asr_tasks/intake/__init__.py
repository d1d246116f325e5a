"""Intake: where recordings come from and what they are made into before any model sees them.

Object stores (a local folder, MinIO) and the artefact bucket's typed reads and
writes; the day layout (``calls/YYYY/MM/DD/``), its readiness and the sidecars;
probing and decoding with ffmpeg; the VAD that cuts speech at pauses; and the
demo corpus.
"""
