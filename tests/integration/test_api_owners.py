"""Jobs and batches belong to the API key that created them, through the HTTP API for real (uvicorn, Postgres, Redis,
Celery workers): with FINAGENT_API_KEYS holding two keys, a job created with the first answers 404 to the second and
200 to the first; lists are per key; an admin key (FINAGENT_ADMIN_API_KEYS) sees and acts on everything."""
from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from agent.models.job import JobRequest, JobState
from agent.ownership import owner_id
from agent.persistence import jobstore
from finagent import FinagentClient, NotFound
from tests.integration.served_api import ServedApp, quick_runtime

pytestmark = pytest.mark.integration

QUESTION = "What was NVDA's revenue last quarter?"
# fresh keys per run: the session's database holds every other module's jobs, which none of these keys owns. Each
# test has a pair of its own (whatever order the tests run in, a key's list holds that test's jobs only).
PAIRS = {test: (f"{test}-a-{uuid.uuid4().hex}", f"{test}-b-{uuid.uuid4().hex}") for test in ("jobs", "cancel", "batches")}
ADMIN = f"admin-{uuid.uuid4().hex}"

Clients = tuple[FinagentClient, FinagentClient, FinagentClient]


@pytest.fixture(scope="module")
def owners_url(ctx) -> Iterator[str]:
    keys = [SecretStr(key) for pair in PAIRS.values() for key in pair]
    with ServedApp(quick_runtime(ctx.settings, api_keys=keys, admin_api_keys=[SecretStr(ADMIN)])) as served:
        yield served.url


@pytest.fixture
def clients_for(owners_url, sample_corpus, worker) -> Iterator[Callable[[str], Clients]]:
    """The clients of a test's two keys and of the admin key."""
    with ExitStack() as stack:
        def open_clients(test: str) -> Clients:
            first, second = PAIRS[test]
            return tuple(stack.enter_context(FinagentClient(owners_url, api_key=key, poll_interval=0.3))  # type: ignore[return-value]
                         for key in (first, second, ADMIN))

        yield open_clients


def _not_found(call: Callable[[], Any]) -> str:
    with pytest.raises(NotFound) as exc:
        call()
    assert exc.value.status_code == 404 and exc.value.code == "not_found"
    return exc.value.error.message  # type: ignore[union-attr]


def _job_calls(client: FinagentClient, job_id: str) -> dict[str, Callable[[], Any]]:
    return {"get": lambda: client.get(job_id), "events": lambda: list(client.events(job_id)),
            "ledger": lambda: client.ledger(job_id), "feedback": lambda: client.feedback(job_id, "use the last 3 quarters"),
            "cancel": lambda: client.cancel(job_id)}


def _queued_job(ctx, owner: str | None) -> str:
    """A job saved and never started (no first step is sent), so that it is still unfinished when it is cancelled."""
    return jobstore.create_job(ctx.pool, JobState(request=JobRequest(question=QUESTION)), owner=owner)[0]


def test_a_job_answers_404_to_another_key_and_200_to_its_own(clients_for, owners_url):
    alpha, bravo, admin = clients_for("jobs")
    bravo_key = PAIRS["jobs"][1]
    started = dt.datetime.now(dt.UTC)
    key = f"owners-{uuid.uuid4()}"
    job_id = alpha.submit(QUESTION, mode="direct", idempotency_key=key).job_id
    done = alpha.wait(job_id, timeout=120)
    assert done.status == "completed"

    # the other key learns nothing: the same 404, with the same message, as for a job that does not exist
    missing = str(uuid.uuid4())
    for name, call in _job_calls(bravo, job_id).items():
        assert _not_found(call) == f"no job {job_id}", name
        assert _not_found(_job_calls(bravo, missing)[name]) == f"no job {missing}", name
    raw = httpx.get(f"{owners_url}/v1/jobs/{job_id}", headers={"X-API-Key": bravo_key})
    assert raw.status_code == 404

    # its own key: 200 on each (cancel below, on a job still unfinished: a finished one is a 409 conflict)
    assert alpha.get(job_id).job_id == job_id
    events = list(alpha.events(job_id))
    assert events[-1].type == "job_status" and events[-1].data["status"] == "completed"
    assert alpha.ledger(job_id).job_id == job_id
    rerun = alpha.feedback(job_id, "use the last 3 quarters")
    assert rerun.created and rerun.job_id != job_id
    assert alpha.get(rerun.job_id).parent_job_id == job_id  # the re-run belongs to the same key
    _not_found(lambda: bravo.get(rerun.job_id))

    # the idempotency key is the key's own: the other key using it makes its own job, never finds this one
    theirs = bravo.submit(QUESTION, mode="direct", idempotency_key=key)
    assert theirs.created and theirs.job_id != job_id
    assert alpha.submit(QUESTION, mode="direct", idempotency_key=key).job_id == job_id
    assert bravo.submit(QUESTION, mode="direct", idempotency_key=key).job_id == theirs.job_id
    # nor can it name this job as its own job's parent
    with httpx.Client(headers={"X-API-Key": bravo_key}) as http:
        parent = http.post(f"{owners_url}/v1/jobs", json={"question": QUESTION, "parent_job_id": job_id})
    assert parent.status_code == 422 and parent.json()["error"]["details"][0]["loc"] == ["body", "parent_job_id"]

    # lists are per key; the admin key sees both keys' jobs
    assert {j.job_id for j in alpha.iter_jobs()} == {job_id, rerun.job_id}
    assert {j.job_id for j in bravo.iter_jobs()} == {theirs.job_id}
    everyone = {j.job_id for j in admin.iter_jobs(created_after=started)}
    assert {job_id, rerun.job_id, theirs.job_id} <= everyone
    assert admin.get(theirs.job_id).job_id == theirs.job_id and admin.ledger(job_id).job_id == job_id
    # an admin's re-run of a key's job still belongs to that key
    by_admin = admin.feedback(job_id, "focus on data center revenue")
    assert alpha.get(by_admin.job_id).parent_job_id == job_id
    _not_found(lambda: bravo.get(by_admin.job_id))


def test_cancel_is_the_owner_s_and_the_admin_s(clients_for, ctx):
    alpha, bravo, admin = clients_for("cancel")
    owner = owner_id(PAIRS["cancel"][0])
    mine, other = _queued_job(ctx, owner), _queued_job(ctx, owner)
    assert _not_found(lambda: bravo.cancel(mine)) == f"no job {mine}"
    assert not alpha.get(mine).cancel_requested  # the refused cancel changed nothing
    view = alpha.cancel(mine)
    assert view.job_id == mine and view.cancel_requested
    assert admin.cancel(other).cancel_requested


def test_jobs_without_an_owner_are_the_admin_s_only(clients_for, ctx):
    alpha, bravo, admin = clients_for("cancel")
    ownerless = _queued_job(ctx, None)  # as the Celery contract, the CLI or an older version made them
    for client in (alpha, bravo):
        _not_found(lambda client=client: client.get(ownerless))
        assert ownerless not in {j.job_id for j in client.iter_jobs()}
    assert admin.get(ownerless).job_id == ownerless
    assert admin.cancel(ownerless).cancel_requested


def test_a_batch_answers_404_to_another_key(clients_for, owners_url):
    alpha, bravo, admin = clients_for("batches")
    name = f"owners-batch-{uuid.uuid4().hex[:8]}"
    mine = alpha.submit_batch([QUESTION, "How did AAPL services revenue trend?"], name=name, mode="direct")
    for call in (lambda: bravo.batch(mine.batch_id), lambda: list(bravo.batch_results(mine.batch_id)),
                 lambda: bravo.cancel_batch(mine.batch_id)):
        assert _not_found(call) == f"no batch {mine.batch_id}"
    # the same upload under the same name from the other key is a batch of its own, with jobs of its own
    theirs = bravo.submit_batch([QUESTION, "How did AAPL services revenue trend?"], name=name, mode="direct")
    assert theirs.batch_id != mine.batch_id and theirs.name == name
    my_jobs = [i.job_id for i in alpha.batch_results(mine.batch_id)]
    their_jobs = [i.job_id for i in bravo.batch_results(theirs.batch_id)]
    assert len(my_jobs) == 2 and not set(my_jobs) & set(their_jobs)
    assert all(alpha.get(j).batch for j in my_jobs if j)
    _not_found(lambda: bravo.get(my_jobs[0]))  # type: ignore[arg-type]

    assert alpha.batch(mine.batch_id).total == 2
    assert {b.batch_id for b in alpha.iter_batches()} == {mine.batch_id}
    assert {b.batch_id for b in bravo.iter_batches()} == {theirs.batch_id}
    assert {mine.batch_id, theirs.batch_id} <= {b.batch_id for b in admin.iter_batches()}
    assert admin.batch(theirs.batch_id).total == 2

    # its own key may cancel it (202 while a job is unfinished, else 409: either way not the other key's 404)
    with httpx.Client(headers={"X-API-Key": PAIRS["batches"][0]}) as http:
        cancelled = http.post(f"{owners_url}/v1/batches/{mine.batch_id}/cancel")
    assert cancelled.status_code in (202, 409), cancelled.text
    with httpx.Client(headers={"X-API-Key": ADMIN}) as http:
        assert http.post(f"{owners_url}/v1/batches/{theirs.batch_id}/cancel").status_code in (202, 409)
