"""The ``asr`` command: each subcommand a thin wrapper over a library function, and the Airflow commands it
shells out to."""
