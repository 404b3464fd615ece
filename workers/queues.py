"""Queues and routing (ARCHITECTURE: coordinator short, search DB+embedding, llm network-bound, batch low priority)."""
from kombu import Exchange, Queue

QUEUES = ("coordinator", "search", "llm", "batch")

TASK_QUEUES = [Queue(name, Exchange(name, type="direct"), routing_key=name) for name in QUEUES]

TASK_ROUTES = {
    "tasks.coordinator.*": {"queue": "coordinator"},
    "tasks.search.*": {"queue": "search"},
    "tasks.ingest.*": {"queue": "batch"},  # bulk embedding must not hold up interactive searches
    "tasks.llm.*": {"queue": "llm"},
    "tasks.news.*": {"queue": "llm"},
    "tasks.tenk.*": {"queue": "llm"},
}


def queue_for(task_queue: str, batch: bool) -> str:
    """Every task of an overnight batch job goes to the batch queue, so interactive jobs are never starved."""
    return "batch" if batch else task_queue
