"""The Celery app. `celery -A workers.app worker -Q coordinator,search,llm,batch -P threads` runs a worker."""
from __future__ import annotations

import os
import threading

from celery import Celery

from agent.settings import get_settings
from ops.stack import celery_broker_url, ensure_stack
from workers.queues import TASK_QUEUES, TASK_ROUTES


def _urls():
    settings = get_settings()
    if settings.database_url and settings.redis_url:
        return settings.database_url, settings.redis_url
    urls = ensure_stack(settings)
    # children (and anything they spawn) must agree with us on the servers
    os.environ["FINAGENT_DATABASE_URL"] = urls.database_url
    os.environ["FINAGENT_REDIS_URL"] = urls.redis_url
    get_settings.cache_clear()
    return urls.database_url, urls.redis_url


DATABASE_URL, REDIS_URL = _urls()

app = Celery("finagent", include=["tasks.ingest", "tasks.search", "tasks.llm", "tasks.coordinator", "tasks.news", "tasks.tenk"])
app.conf.update(
    broker_url=celery_broker_url(REDIS_URL),
    result_backend=celery_broker_url(REDIS_URL),
    task_serializer="json",
    result_serializer="json",
    accept_content=["json"],
    task_queues=TASK_QUEUES,
    task_default_queue="coordinator",
    task_routes=TASK_ROUTES,
    # never lose a job: ack after the work is done, and hand the task back if the worker dies
    task_acks_late=True,
    task_reject_on_worker_lost=True,
    worker_prefetch_multiplier=1,
    broker_transport_options={"visibility_timeout": get_settings().broker_visibility_timeout_s},
    result_expires=24 * 3600,
    worker_send_task_events=True,
    task_send_sent_event=True,
    task_track_started=True,
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=False,
    beat_schedule={"resume-stalled-jobs": {"task": "tasks.coordinator.resume_stalled", "schedule": 60.0,
                                           "kwargs": {"stalled_after_s": get_settings().stalled_job_after_s}}},
)


_ctx = None
_ctx_lock = threading.Lock()


def context():
    """The process-wide Context that tasks use."""
    global _ctx
    with _ctx_lock:
        if _ctx is None:
            from agent.context import Context

            _ctx = Context(get_settings(), DATABASE_URL, REDIS_URL)
        return _ctx
