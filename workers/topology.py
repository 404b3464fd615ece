"""The topology, defined once: queues, every task's name and queue, and the worker processes that
consume them. The coordinator's dispatch, Celery's `task_routes`, the local workers (`ops/workers.py`)
and `docker-compose.yml` (checked by tests/unit/test_topology.py) all follow it.

Queues: `coordinator` (short state-machine steps), `search` (database and embedding), `llm`
(network-bound provider calls), `batch` (every task of an overnight batch job, and bulk
embedding, so they never starve interactive work) and `celery`, Celery's default queue, where the
public `finagent.v1.*` tasks of the service contract arrive: a client with nothing but `celery` and the
broker URL calls `send_task("finagent.v1.submit_research", ...)` and its default routing just works.
"""
from __future__ import annotations

from enum import Enum

from kombu import Exchange
from kombu import Queue as KombuQueue
from pydantic import BaseModel

from agent.models.steps import TaskKind


class Queue(str, Enum):
    coordinator = "coordinator"
    search = "search"
    llm = "llm"
    batch = "batch"
    public = "celery"  # Celery's default queue: the service contract's tasks, sent by clients without our routes


class TaskSpec(BaseModel, frozen=True):
    name: str  # the registered Celery task name
    queue: Queue


# the service contract (README "Celery contract"): stable, versioned names; a v2 would sit beside them
SUBMIT_RESEARCH = TaskSpec(name="finagent.v1.submit_research", queue=Queue.public)
GET_JOB = TaskSpec(name="finagent.v1.get_job", queue=Queue.public)
JOB_EVENTS = TaskSpec(name="finagent.v1.job_events", queue=Queue.public)
CANCEL_JOB = TaskSpec(name="finagent.v1.cancel_job", queue=Queue.public)
PUBLIC_TASKS = [SUBMIT_RESEARCH, GET_JOB, JOB_EVENTS, CANCEL_JOB]

# the coordinator's own tasks and the ingestion fan-out
ADVANCE = TaskSpec(name="tasks.coordinator.advance", queue=Queue.coordinator)
RESUME_STALLED = TaskSpec(name="tasks.coordinator.resume_stalled", queue=Queue.coordinator)
RECOVER_ORPHANS = TaskSpec(name="tasks.coordinator.recover_orphans", queue=Queue.coordinator)
EMBED_BATCH = TaskSpec(name="tasks.ingest.embed_batch", queue=Queue.batch)

# one Celery task per kind of call the state machine fans out
CALL_TASKS: dict[TaskKind, TaskSpec] = {
    "plan": TaskSpec(name="tasks.llm.plan", queue=Queue.llm),
    "extract": TaskSpec(name="tasks.llm.extract", queue=Queue.llm),
    "compose": TaskSpec(name="tasks.llm.compose", queue=Queue.llm),
    "evaluate": TaskSpec(name="tasks.llm.evaluate", queue=Queue.llm),
    "news": TaskSpec(name="tasks.news.news_search", queue=Queue.llm),
    "search": TaskSpec(name="tasks.search.search_quarter", queue=Queue.search),
    "tenk_plan": TaskSpec(name="tasks.tenk.plan", queue=Queue.llm),
    "tenk_retrieve": TaskSpec(name="tasks.tenk.retrieve", queue=Queue.search),
    "tenk_answer": TaskSpec(name="tasks.tenk.answer", queue=Queue.llm),
    "tenk_evaluate": TaskSpec(name="tasks.tenk.evaluate", queue=Queue.llm),
}

ALL_TASKS: list[TaskSpec] = [*PUBLIC_TASKS, ADVANCE, RESUME_STALLED, RECOVER_ORPHANS, EMBED_BATCH, *CALL_TASKS.values()]
TASK_ROUTES = {t.name: {"queue": t.queue.value} for t in ALL_TASKS}
TASK_QUEUES = [KombuQueue(q.value, Exchange(q.value, type="direct"), routing_key=q.value) for q in Queue]


def queue_for(spec: TaskSpec, batch: bool) -> str:
    """Every task of an overnight batch job goes to the batch queue, so interactive jobs are never starved."""
    return Queue.batch.value if batch else spec.queue.value


class WorkerSpec(BaseModel, frozen=True):
    name: str
    queues: list[Queue]
    concurrency: int
    beat: bool = False  # locally, beat runs inside this worker (-B); docker-compose runs it as its own service


# One process per queue (a fan-out's CPU work then runs on every core instead of queueing behind one
# GIL), each with a thread pool: the work is I/O-bound.
WORKERS: list[WorkerSpec] = [
    WorkerSpec(name="coordinator", queues=[Queue.coordinator, Queue.public], concurrency=8, beat=True),
    WorkerSpec(name="search", queues=[Queue.search], concurrency=8),
    WorkerSpec(name="llm", queues=[Queue.llm], concurrency=16),
    WorkerSpec(name="batch", queues=[Queue.batch], concurrency=4),
]


def worker_argv(spec: WorkerSpec, node: str) -> list[str]:
    """The `celery worker` arguments of one worker process (the local workers and docker-compose)."""
    return ["-A", "workers.app", "worker", "-Q", ",".join(q.value for q in spec.queues), "-P", "threads",
            "-c", str(spec.concurrency), "-E", "-n", f"{node}@%h"]
