"""The stages of one day's run, as plain functions that Airflow tasks and the CLI both call.

Where each fact lives: the ledger alone says where a recording version stands
(its state and reason); object storage holds what each stage made of it (chunks,
raw transcript, gated transcript; their keys in ``asr_tasks.version``), each
stage reading one artefact and writing the next; the index is a search view
rebuilt from gated transcripts (``pipeline.index.reindex_day``) and decides nothing.

sense -> preprocess (manifest, PCM) -> transcribe (raw transcript) -> gate
(gated transcript) -> index (documents, the day's quality report, the ledger's
final state). Large data goes to the artefact bucket; what the functions return
is small (keys, ids, states). Every stage first looks for its own artefact, so a
retry or a re-run of the day redoes nothing that finished. What a task returns
(Airflow's XCom) and what it logs name a recording by its id, never by its key
or a party: both outlive an erasure in Airflow's database and log folder, where
an id no longer leads to anyone once the ledger's tombstone has forgotten the key.
"""
