"""The search page: search, the call page (transcript, audio, timeline), access log, progress and records
actions, behind Airflow's sign-in and the roles in ``records.permissions``."""
