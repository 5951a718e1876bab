#!/usr/bin/env python3
"""Makes a real BullMQ state with the official client, for tests/check_bullmq.rs to check.

Reads a JSON plan (a list of {"id", "data", "end"}) and, on the server at --url, drives queue
"{Q}" (the braces are the hash tag: keys `bull:{Q}:*`) with the official `bullmq` package only:

- "completed" and "failed" jobs are added with `Queue.add(name, data, {"jobId": id, "attempts": 1})`
  and processed by a `Worker` (a slot per job), whose processor returns for "completed" and raises
  for "failed"; once all are finished, the worker is closed;
- "active" jobs are added the same way and taken by a second Worker with a slot each, whose
  processor never returns; the process ends without closing it, so they stay active and keep
  their locks (until lockDuration, 30 s, runs out);
- then "wait" jobs are added as they are, "prioritized" ones with {"priority": 5} and "delayed"
  ones with {"delay": 3600000}: no worker has a free slot, so they stay.

`data` is the JSON string the client stores (the harness's payload in base64). Exits 0 when every
job reached its end (as the client's getJobCounts says), 1 otherwise; bounded by --timeout.

  .tools/bullmq-venv/bin/python tests/bullmq/make_state.py --url redis://127.0.0.1:PORT --queue Q --plan plan.json
"""

import argparse
import asyncio
import json
import os
import sys

from bullmq import Queue, Worker

LATER = {"wait": {}, "prioritized": {"priority": 5}, "delayed": {"delay": 3_600_000}}


async def run(url, name, plan, timeout):
    queue = Queue(name, {"connection": url})
    ends = lambda *these: [job for job in plan if job["end"] in these]
    failing = {job["id"] for job in ends("failed")}
    never = asyncio.Event()

    async def work(jobs, hold):
        """Adds `jobs` and has a Worker with a slot each take them all; `hold`: never let go."""
        if not jobs:
            return None
        for job in jobs:
            await queue.add("emq", job["data"], {"jobId": job["id"], "attempts": 1})
        seen = set()
        all_seen = asyncio.Event()

        async def process(job, token):
            seen.add(job.id)
            if len(seen) == len(jobs):
                all_seen.set()
            if hold:
                await never.wait()
            if job.id in failing:
                raise Exception("planned failure")
            return "done"

        # drainDelay (s): how long a fetch blocks on an empty queue; close() waits it out (5 s by default).
        worker = Worker(name, process, {"connection": url, "concurrency": len(jobs), "drainDelay": 0.1})
        await asyncio.wait_for(all_seen.wait(), timeout)
        return worker

    worker = await work(ends("completed", "failed"), hold=False)
    if worker:
        # The last job's moveToFinished may still be on its way: wait until the counts say so.
        want = {"completed": len(ends("completed")), "failed": len(failing)}
        while await queue.getJobCounts("completed", "failed") != want:
            await asyncio.sleep(0.01)
        # force: nothing is in flight any more (the counts say so), so this only skips the
        # second a graceful close spends on the worker's timers.
        await worker.close(force=True)
    # Every slot of this worker is then busy, so it takes none of the jobs added after.
    holder = await work(ends("active"), hold=True)
    for job in plan:
        if job["end"] in LATER:
            await queue.add("emq", job["data"], {"jobId": job["id"], **LATER[job["end"]]})
    counts = await queue.getJobCounts("completed", "failed", "wait", "prioritized", "delayed", "active")
    await queue.close()
    want = {end: len(ends(end)) for end in counts}
    if counts != want:
        print("counts %r, wanted %r" % (counts, want), file=sys.stderr)
        return 1
    if holder:
        # Not holder.close(): it would wait for the held jobs. Their locks stay until they expire.
        sys.stdout.flush()
        os._exit(0)
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
