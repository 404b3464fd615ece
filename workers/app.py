"""The Celery app. `celery -A workers.app worker -Q coordinator,search,llm,batch -P threads` runs a worker.

Importing this module has no side effects: the broker URL is resolved (agent/services.py: the configured URL, or
the one the embedded stack recorded) the first time Celery reads its configuration, i.e. when a worker starts or a
message is sent.
"""
from __future__ import annotations

from typing import Any

from kombu import pools

from agent.infra.liveness import WATCHDOG_PERIOD_S
from agent.services import celery_broker_url, service_urls
from agent.settings import get_settings
from workers import affinity, keyword_sync, signals, telemetry  # noqa: F401  (CPU pinning; BM25 index sync; metrics, liveness; logs, traces)
from workers.pipelined_publish import BatchingCelery
from workers.topology import RECOVER_ORPHANS, RESUME_STALLED, TASK_QUEUES, TASK_ROUTES, Queue, task_time_limits

# task names are explicit (workers/topology.py): a module's name is not on the wire
TASK_MODULES = ["tasks.public", "tasks.ingest", "tasks.quarter_search", "tasks.llm", "tasks.coordinator", "tasks.recovery",
                "tasks.news_search", "tasks.tenk_agent"]


def _config() -> dict[str, Any]:
    settings = get_settings()
    broker = celery_broker_url(service_urls(settings).redis_url)
    return dict(
        broker_url=broker,
        result_backend=broker,
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        task_queues=TASK_QUEUES,
        task_default_queue=Queue.coordinator.value,
        task_routes=TASK_ROUTES,
        # never lose a job: ack after the work is done, and hand the task back if the worker dies
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        # longer than every hard time limit below (settings.py checks it): a slow task is never handed out twice
        broker_transport_options={"visibility_timeout": settings.broker_visibility_timeout_s},
        # prefork enforces these itself, the threads pool through workers/deadlines.py; Flower shows them
        task_annotations={name: {"time_limit": limit.hard_s, "soft_time_limit": limit.soft_s}
                          for name, limit in task_time_limits(settings).items()},
        result_expires=24 * 3600,
        worker_send_task_events=True,
        task_send_sent_event=True,
        task_track_started=True,
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
        # no BM25 index sync: a beat task reaches one worker on one host; each node that searches syncs its own
        # host's index (workers/keyword_sync.py)
        beat_schedule={"resume-stalled-jobs": {"task": RESUME_STALLED.name, "schedule": 60.0,
                                               "kwargs": {"stalled_after_s": settings.stalled_job_after_s}},
                       # a job whose worker died moves again within a heartbeat TTL plus this period
                       "recover-orphaned-tasks": {"task": RECOVER_ORPHANS.name, "schedule": WATCHDOG_PERIOD_S,
                                                  "options": {"expires": WATCHDOG_PERIOD_S}}},
    )


app = BatchingCelery("finagent", include=TASK_MODULES)  # a fan-out is sent in one round trip
app.add_defaults(_config)  # evaluated lazily, on the first read of app.conf



def renew_broker_connections() -> None:
    """Drop every pooled broker connection and start fresh pools, after the broker restarted under them.
    A pool's `force_close_all` alone leaves it closed for good ("Acquire on closed pool") and kombu hands the same
    pool back for the same URL, so the registry is cleared too and the app forgets its pools, as after a fork."""
    pools.reset()
    app._after_fork()
    app.control._after_fork()  # the broadcast mailbox caches the old producer pool
