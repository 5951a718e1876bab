#!/usr/bin/env python3
"""Makes a real BullMQ state with the official client, for tests/check_bullmq.rs to check.

Reads a JSON plan (a list of {"id", "data", "end"}) and, on the server at --url, drives queue
"{Q}" (the braces are the hash tag: keys `bull:{Q}:*`) with the official `bullmq` package only:

- "completed" and "failed" jobs are added with `Queue.add(name, data, {"jobId": id, "attempts": 1})`
  and processed by one `Worker`, whose processor returns for "completed" and raises for "failed";
- once every one of them is finished and the worker closed, "wait" jobs are added as they are,
  "prioritized" ones with {"priority": 5} and "delayed" ones with {"delay": 3600000}, so they stay.

`data` is the JSON string the client stores (the harness's payload in base64). Exits 0 when every
job reached its end (as the client's getJobCounts says), 1 otherwise; bounded by --timeout.

  .tools/bullmq-venv/bin/python tests/bullmq/make_state.py --url redis://127.0.0.1:PORT --queue Q --plan plan.json
"""

import argparse
import asyncio
import json
import sys

from bullmq import Queue, Worker

LATER = {"wait": {}, "prioritized": {"priority": 5}, "delayed": {"delay": 3_600_000}}


async def run(url, name, plan, timeout):
    queue = Queue(name, {"connection": url})
    processed = [job for job in plan if job["end"] in ("completed", "failed")]
    failing = {job["id"] for job in processed if job["end"] == "failed"}
    for job in processed:
        await queue.add("emq", job["data"], {"jobId": job["id"], "attempts": 1})
    finished = asyncio.Event()
    seen = set()

    async def process(job, token):
        seen.add(job.id)
        if len(seen) == len(processed):
            finished.set()
        if job.id in failing:
            raise Exception("planned failure")
        return "done"

    if processed:
        worker = Worker(name, process, {"connection": url})
        await asyncio.wait_for(finished.wait(), timeout)
        # The last job's moveToFinished may still be on its way: wait until the counts say so.
        want = {"completed": len(processed) - len(failing), "failed": len(failing)}
        while await queue.getJobCounts("completed", "failed") != want:
            await asyncio.sleep(0.01)
        await worker.close()
    for job in plan:
        if job["end"] in LATER:
            await queue.add("emq", job["data"], {"jobId": job["id"], **LATER[job["end"]]})
    counts = await queue.getJobCounts("completed", "failed", "wait", "prioritized", "delayed", "active")
    await queue.close()
    want = {end: sum(1 for job in plan if job["end"] == end) for end in counts}
    if counts != want:
        print("counts %r, wanted %r" % (counts, want), file=sys.stderr)
        return 1
    return 0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--queue", required=True, help="Q: the client's queue name is {Q}")
    parser.add_argument("--plan", required=True, help="JSON list of {id, data, end}")
    parser.add_argument("--timeout", type=float, default=30)
    args = parser.parse_args()
    with open(args.plan) as f:
        plan = json.load(f)
    return asyncio.run(asyncio.wait_for(run(args.url, "{%s}" % args.queue, plan, args.timeout), args.timeout))


if __name__ == "__main__":
    sys.exit(main())
