"""Tasks of the nightly (and manually triggered) runs go ahead of a backfill's; inside a run, later stages first.

Airflow's scheduler hands out pool slots and worker slots by priority weight,
then by logical date, oldest first. A backfill of years is all older than last
night, so with equal weights it would hold the nightly run back until the whole
backfill drained: the day's calls would wait weeks. This strategy lifts every
task of a run that is not a backfill above all backfill tasks.

Inside a run a task weighs itself plus everything upstream of it (Airflow's
"upstream" rule), so a shard that is ready to be transcribed goes ahead of the
next shard's preprocessing when both wait for one worker slot: the transcription
starts after the first shard, not after the whole day's preprocessing (which
Airflow's default, downstream rule would run first on one machine's
LocalExecutor), and a backfill finishes the days it started before it opens more.

The scheduler computes the weight when it creates a task instance, from the
run id; backfill runs are the ones Airflow names ``backfill__...``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow.plugins_manager import AirflowPlugin
from airflow.task.priority_strategy import PriorityWeightStrategy
from airflow.utils.types import DagRunType

if TYPE_CHECKING:
    from airflow.models.taskinstance import TaskInstance

# Above any run's own weights (a task's weight is at most the number of tasks in the DAG).
AHEAD_OF_BACKFILLS = 10_000


def is_backfill(run_id: str) -> bool:
    """Whether the run id is one Airflow gave a backfill run."""
    return DagRunType.from_run_id(run_id) is DagRunType.BACKFILL_JOB


class NightlyRunsFirst(PriorityWeightStrategy):
    """The upstream weight of the task, plus ``AHEAD_OF_BACKFILLS`` unless its run is a backfill's."""

    def get_weight(self, ti: TaskInstance) -> int:
        task = ti.task
        assert task is not None, "the scheduler weighs task instances with their task"
        weight = task.priority_weight
        dag = task.get_dag()
        if dag is not None:
            weight += sum(dag.task_dict[t].priority_weight for t in task.get_flat_relative_ids(upstream=True))
        return weight if is_backfill(ti.run_id) else weight + AHEAD_OF_BACKFILLS


class RunPriorityPlugin(AirflowPlugin):
    """Registers the strategy, which Airflow looks up by its import path when it loads a serialized DAG."""

    name = "run_priority"
    priority_weight_strategies = [NightlyRunsFirst]
