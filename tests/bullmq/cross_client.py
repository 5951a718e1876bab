#!/usr/bin/env python3
"""The official client's half of tests/scripts_bullmq.rs's cross-check (issue 12 item 5).

Driven by the Rust test against the server it started, one step per invocation; each step
prints one JSON object on stdout.

  work URL QUEUE SPEC   an official Worker processes the jobs that emq-bench's calls added.
                        SPEC is a JSON file {"jobs": {id: base64 payload}, "fail_once": [id]};
                        the processor checks that job.data is exactly the base64 text of the
                        payload (data = JSON string of the base64), raises once for each id in
                        fail_once (BullMQ's retry must then follow the attempts/backoff that
                        emq-bench packed), and returns. Prints {"seen": [[id, data_ok,
                        attemptsMade, attemptsStarted], ...], "counts": {...}}.
  add URL QUEUE SPEC    Queue.add("emq", base64 text, {"jobId": id, "attempts": 2}) for each
                        {id: base64} of SPEC's "jobs". Prints {"ids": [...]}.
  counts URL QUEUE      Queue.getJobCounts(...). Prints the counts.
"""

import asyncio
import base64
import json
import sys
import time

from bullmq import Queue, Worker

STATES = ("wait", "paused", "active", "prioritized", "delayed", "completed", "failed")


async def counts(url, queue_name):
    queue = Queue(queue_name, {"connection": url})
    try:
        return await queue.getJobCounts(*STATES)
    finally:
        await queue.close()


async def work(url, queue_name, spec):
    jobs, fail_once = spec["jobs"], set(spec.get("fail_once", []))
    seen, failed = [], set()
    done = asyncio.Event()

    async def process(job, token):
        data_ok = isinstance(job.data, str) and base64.b64decode(job.data, validate=True) == \
            base64.b64decode(jobs[job.id])
        seen.append([job.id, data_ok, job.attemptsMade, job.attemptsStarted])
        if job.id in fail_once and job.id not in failed:
            failed.add(job.id)
            raise Exception("emq cross-check: fail once")
        if len({s[0] for s in seen}) == len(jobs) and len(seen) == len(jobs) + len(fail_once):
            done.set()
        return {"ok": job.id}

    worker = Worker(queue_name, process, {"connection": url, "lockDuration": 5000})
    try:
        await asyncio.wait_for(done.wait(), 30)
        # The last completion is written after the processor returns: poll for it.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            got = await counts(url, queue_name)
            if got["completed"] >= len(jobs):
                break
            await asyncio.sleep(0.02)
    finally:
        await worker.close()
    return {"seen": seen, "counts": await counts(url, queue_name)}


async def add(url, queue_name, spec):
    queue = Queue(queue_name, {"connection": url})
    try:
        ids = []
        for job_id, payload_b64 in spec["jobs"].items():
            job = await queue.add("emq", payload_b64, {"jobId": job_id, "attempts": 2})
            ids.append(job.id)
        return {"ids": ids}
    finally:
        await queue.close()


def main():
    step, url, queue_name = sys.argv[1:4]
    spec = None
    if len(sys.argv) > 4:
        with open(sys.argv[4]) as f:
            spec = json.load(f)
    if step == "work":
        out = asyncio.run(work(url, queue_name, spec))
    elif step == "add":
        out = asyncio.run(add(url, queue_name, spec))
    elif step == "counts":
        out = asyncio.run(counts(url, queue_name))
    else:
        raise SystemExit("unknown step %r" % step)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
