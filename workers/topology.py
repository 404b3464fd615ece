"""The topology, defined once: queues, every task's name and queue, and the worker processes that
consume them. The coordinator's dispatch, Celery's `task_routes`, the local workers (`ops/local/worker_pool.py`)
and `docker-compose.yml` (checked by tests/unit/workers/test_topology.py) all follow it.

Queues: `coordinator` (short state-machine steps), `search` (database and embedding), `llm`
(network-bound provider calls), `batch` (every task of an overnight batch job, and bulk
embedding, so they never starve interactive work) and `celery`, Celery's default queue, where the
public `finagent.v1.*` tasks of the service contract arrive: a client with nothing but `celery` and the
broker URL calls `send_task("finagent.v1.submit_research", ...)` and its default routing just works.

Every task has soft and hard time limits by what it waits on (`TaskSpec.limits`; agent/time_limits.py).
"""
from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING

from kombu import Exchange
from kombu import Queue as KombuQueue
from pydantic import BaseModel

from agent.models.steps import TaskKind
from agent.time_limits import LimitKind, TimeLimit, time_limits

if TYPE_CHECKING:
    from agent.settings import Settings


class Queue(str, Enum):
    coordinator = "coordinator"
    search = "search"
    llm = "llm"
    batch = "batch"
    public = "celery"  # Celery's default queue: the service contract's tasks, sent by clients without our routes


class TaskSpec(BaseModel, frozen=True):
    name: str  # the registered Celery task name
    queue: Queue
    limits: LimitKind  # what it waits on, which sets its time limits


# the service contract (docs/services.md, "The Celery contract"): stable, versioned names; a v2 would sit beside them
SUBMIT_RESEARCH = TaskSpec(name="finagent.v1.submit_research", queue=Queue.public, limits=LimitKind.public)
GET_JOB = TaskSpec(name="finagent.v1.get_job", queue=Queue.public, limits=LimitKind.public)
JOB_EVENTS = TaskSpec(name="finagent.v1.job_events", queue=Queue.public, limits=LimitKind.public)
CANCEL_JOB = TaskSpec(name="finagent.v1.cancel_job", queue=Queue.public, limits=LimitKind.public)
PUBLIC_TASKS = [SUBMIT_RESEARCH, GET_JOB, JOB_EVENTS, CANCEL_JOB]

# the coordinator's own tasks and the ingestion fan-out
ADVANCE = TaskSpec(name="tasks.coordinator.advance", queue=Queue.coordinator, limits=LimitKind.coordinator)
RESUME_STALLED = TaskSpec(name="tasks.coordinator.resume_stalled", queue=Queue.coordinator, limits=LimitKind.beat)
RECOVER_ORPHANS = TaskSpec(name="tasks.coordinator.recover_orphans", queue=Queue.coordinator, limits=LimitKind.beat)
EMBED_BATCH = TaskSpec(name="tasks.ingest.embed_batch", queue=Queue.batch, limits=LimitKind.embed)

# one Celery task per kind of call the state machine fans out
CALL_TASKS: dict[TaskKind, TaskSpec] = {
    "plan": TaskSpec(name="tasks.llm.plan", queue=Queue.llm, limits=LimitKind.llm),
    "extract": TaskSpec(name="tasks.llm.extract", queue=Queue.llm, limits=LimitKind.llm),
    "compose": TaskSpec(name="tasks.llm.compose", queue=Queue.llm, limits=LimitKind.llm),
    "evaluate": TaskSpec(name="tasks.llm.evaluate", queue=Queue.llm, limits=LimitKind.llm),
    "news": TaskSpec(name="tasks.news.news_search", queue=Queue.llm, limits=LimitKind.news),
    "search": TaskSpec(name="tasks.search.search_quarter", queue=Queue.search, limits=LimitKind.search),
    "tenk_plan": TaskSpec(name="tasks.tenk.plan", queue=Queue.llm, limits=LimitKind.llm),
    "tenk_retrieve": TaskSpec(name="tasks.tenk.retrieve", queue=Queue.search, limits=LimitKind.retrieve),
    "tenk_answer": TaskSpec(name="tasks.tenk.answer", queue=Queue.llm, limits=LimitKind.llm),
    "tenk_evaluate": TaskSpec(name="tasks.tenk.evaluate", queue=Queue.llm, limits=LimitKind.llm),
}

ALL_TASKS: list[TaskSpec] = [*PUBLIC_TASKS, ADVANCE, RESUME_STALLED, RECOVER_ORPHANS, EMBED_BATCH, *CALL_TASKS.values()]
TASK_ROUTES = {t.name: {"queue": t.queue.value} for t in ALL_TASKS}
TASK_QUEUES = [KombuQueue(q.value, Exchange(q.value, type="direct"), routing_key=q.value) for q in Queue]


def task_time_limits(settings: Settings) -> dict[str, TimeLimit]:
    """Every task's soft and hard time limits under these settings, by task name."""
    limits = time_limits(settings)
    return {t.name: limits[t.limits] for t in ALL_TASKS}


def queue_for(spec: TaskSpec, batch: bool) -> str:
    """Every task of an overnight batch job goes to the batch queue, so interactive jobs are never starved."""
    return Queue.batch.value if batch else spec.queue.value


class WorkerSpec(BaseModel, frozen=True):
    name: str
    queues: list[Queue]
    concurrency: int
    beat: bool = False  # locally, beat runs inside this worker (-B); docker-compose runs it as its own service
    # above 1: the pool's processes hold concurrency / this LLM calls in flight (LLM_MAX_IN_FLIGHT), and the spare
    # threads do the work around the calls (evidence reads, output writes, coordinator steps), so no LLM slot idles
    threads_per_llm_slot: int = 1
    # locally, this process's threads keep to one CPU (workers/affinity.py), the same for pools of one group: the
    # coordinator's (0) apart from the calls' (1), the pools whose hand-offs make a job's critical path
    cpu_group: int | None = None

    def env_defaults(self, settings: Settings) -> dict[str, str]:
        """The settings this pool's processes run with unless the operator set them (environment or .env)."""
        if self.threads_per_llm_slot > 1 and "llm_max_in_flight" not in settings.model_fields_set:
            return {"FINAGENT_LLM_MAX_IN_FLIGHT": str(max(1, self.concurrency // self.threads_per_llm_slot))}
        return {}


# One process per queue (a fan-out's CPU work then runs on every core instead of queueing behind one
# GIL), each with a thread pool: the work is I/O-bound.
WORKERS: list[WorkerSpec] = [
    WorkerSpec(name="coordinator", queues=[Queue.coordinator, Queue.public], concurrency=8, beat=True, cpu_group=0),
    WorkerSpec(name="search", queues=[Queue.search], concurrency=8, cpu_group=1),
    WorkerSpec(name="llm", queues=[Queue.llm], concurrency=16, cpu_group=1),
    # a batch job spends part of its time between LLM calls: 8 threads keep its 4 LLM slots busy
    # (docs/benchmarks.md, batch throughput)
    WorkerSpec(name="batch", queues=[Queue.batch], concurrency=8, threads_per_llm_slot=2),
]


def worker_cpu(spec: WorkerSpec, cpus: list[int]) -> int | None:
    """The CPU the local launcher pins `spec`'s process to: its group's, counting `cpus` in order. None for a pool
    with no group, and with one CPU (nothing to keep apart)."""
    if spec.cpu_group is None or len(cpus) < 2:
        return None
    return sorted(cpus)[spec.cpu_group % len(cpus)]


def worker_argv(spec: WorkerSpec, node: str) -> list[str]:
    """The `celery worker` arguments of one worker process (the local workers and docker-compose)."""
    return ["-A", "workers.app", "worker", "-Q", ",".join(q.value for q in spec.queues), "-P", "threads",
            "-c", str(spec.concurrency), "-E", "-n", f"{node}@%h"]
