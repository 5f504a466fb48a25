"""The micro-batcher: concurrent requests share model calls of at most max_batch_size texts, each
request gets back exactly its own rows, and a failing batch fails only its own requests."""

import asyncio
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from trainer.serving.batching import MicroBatcher


class FakeModel:
    """Row i of a call's output encodes its text, so a misrouted row is visible."""

    def __init__(self, fail_on=None):
        self.calls = []
        self.fail_on = fail_on

    def __call__(self, texts):
        self.calls.append(list(texts))
        if self.fail_on in texts:
            raise RuntimeError("model failed")
        return np.array([[len(t), ord(t[0])] for t in texts], np.float32), ["length", "first"]


async def serve(model, requests, max_batch_size=4, max_wait=0.05):
    with ThreadPoolExecutor(1) as executor:
        batcher = MicroBatcher(model, max_batch_size, max_wait, executor)
        loop_task = asyncio.create_task(batcher.run())
        try:
            return await asyncio.gather(*(batcher.predict(texts) for texts in requests), return_exceptions=True)
        finally:
            loop_task.cancel()


def test_concurrent_requests_share_model_calls_and_get_their_own_rows():
    model = FakeModel()
    requests = [[f"{chr(97 + i)}" * (i + 1)] for i in range(10)]
    answers = asyncio.run(serve(model, requests))
    assert len(model.calls) < len(requests)
    assert all(len(call) <= 4 for call in model.calls)
    for texts, (rows, names) in zip(requests, answers):
        assert names == ["length", "first"]
        assert rows.tolist() == [[len(t), ord(t[0])] for t in texts]


def test_a_request_larger_than_the_batch_runs_alone_and_whole():
    model = FakeModel()
    big = [f"t{i}" for i in range(9)]
    answers = asyncio.run(serve(model, [["x"], big, ["y"]]))
    assert big in model.calls
    assert answers[1][0].shape == (9, 2)


def test_a_lone_request_waits_for_company_at_most_max_wait(monkeypatch):
    """The batcher's only waits are asyncio.wait_for timeouts, so they are what bounds a lone
    request's latency: some wait, none longer than max_wait, then a call on that request alone."""
    waits = []
    wait_for = asyncio.wait_for

    def recorded(awaitable, timeout):
        waits.append(timeout)
        return wait_for(awaitable, timeout)

    monkeypatch.setattr(asyncio, "wait_for", recorded)
    model = FakeModel()
    asyncio.run(serve(model, [["solo"]], max_wait=0.2))
    assert model.calls == [["solo"]]
    assert waits and all(0 < wait <= 0.2 for wait in waits)


def test_a_failing_batch_fails_its_requests_and_the_batcher_goes_on():
    model = FakeModel(fail_on="boom")

    async def two_rounds():
        with ThreadPoolExecutor(1) as executor:
            batcher = MicroBatcher(model, 8, 0.01, executor)
            task = asyncio.create_task(batcher.run())
            first = await asyncio.gather(batcher.predict(["boom"]), return_exceptions=True)
            second = await batcher.predict(["fine"])
            task.cancel()
            return first[0], second

    error, (rows, _) = asyncio.run(two_rounds())
    assert isinstance(error, RuntimeError)
    assert rows.tolist() == [[4, ord("f")]]


@pytest.mark.parametrize("max_batch_size", [1, 3])
def test_every_request_is_answered_whatever_the_batch_size(max_batch_size):
    requests = [[f"r{i}"] * (1 + i % 3) for i in range(20)]
    answers = asyncio.run(serve(FakeModel(), requests, max_batch_size=max_batch_size, max_wait=0.001))
    assert [a[0].shape[0] for a in answers] == [len(r) for r in requests]


def test_without_a_wait_a_batch_is_what_queued_while_the_model_computed(monkeypatch):
    """--max-wait-ms 0 (trainer.serve's default): a lone request is computed at once (the
    batcher's only waits are asyncio.wait_for timeouts: none here), and the requests that arrive
    meanwhile share the next call."""
    import threading

    waits, wait_for = [], asyncio.wait_for
    monkeypatch.setattr(
        asyncio, "wait_for", lambda awaitable, timeout: waits.append(timeout) or wait_for(awaitable, timeout)
    )
    computing, release = threading.Event(), threading.Event()
    model = FakeModel()

    def held(texts):
        computing.set()
        release.wait(10)
        return model(texts)

    async def arrivals():
        with ThreadPoolExecutor(1) as executor:
            batcher = MicroBatcher(held, 64, 0.0, executor)
            loop_task = asyncio.create_task(batcher.run())
            first = asyncio.create_task(batcher.predict(["first"]))
            for _ in range(1000):
                if computing.is_set():
                    break
                await asyncio.sleep(0.01)
            rest = [asyncio.create_task(batcher.predict([f"r{i}"])) for i in range(5)]
            await asyncio.sleep(0.05)
            release.set()
            await asyncio.gather(first, *rest)
            loop_task.cancel()

    asyncio.run(arrivals())
    assert model.calls == [["first"], [f"r{i}" for i in range(5)]]
    assert waits == []
