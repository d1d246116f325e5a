"""Offline batch transcription of call recordings: the pipeline as a plain library."""

# Bump when a change to preprocessing, stitching or indexing should reprocess recordings.
PIPELINE_VERSION = "2"
