#!/usr/bin/env python3
"""Can the official BullMQ Python client run here? The first half of issue 12's cross-check.

Starts a valkey-server of its own on a free 127.0.0.1 port (persistence off), adds N jobs with
`Queue.add` (the official client, `pip install bullmq==<pinned>` with its dependencies), processes
them with a `Worker`, and prints the queue's counts and how long each step took. It also checks that
every script the client registers hashes to the SHA-1 listed in .tools/bullmq/current/MANIFEST, i.e.
that the client and emq-bench would EVALSHA the same scripts. Exits 0 when all N completed and the
digests agree, 1 otherwise; bounded by --timeout.

  python3 -m venv .tools/bullmq-venv && .tools/bullmq-venv/bin/pip install bullmq==2.26.0
  .tools/bullmq-venv/bin/python tests/bullmq/official_client_smoke.py --server .tools/bin/valkey-server
"""

import argparse
import asyncio
import hashlib
import os
import socket
import subprocess
import sys
import tempfile
import time

import bullmq
from bullmq import Queue, Worker
from bullmq.redis_connection import SCRIPT_DEFINITIONS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(binary, workdir):
    port = free_port()
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", workdir, "--daemonize", "no", "--logfile", ""],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, port
        except OSError:
            time.sleep(0.02)
    proc.kill()
    raise RuntimeError("%s did not listen on 127.0.0.1:%d" % (binary, port))


def manifest_digests(path):
    """{'moveToActive-11.lua': sha1, ...} from a sha1sum-format MANIFEST."""
    out = {}
    with open(path) as m:
        for line in m:
            sha, name = line.rstrip("\n").split("  ", 1)
            out[os.path.basename(name)] = sha
    return out


async def run(url, jobs, timeout):
    t0 = time.monotonic()
    queue = Queue("emq-crosscheck", {"connection": url})
    # The scripts as the client loads them (text mode, as redis_connection.loadScript reads them).
    client_shas = {SCRIPT_DEFINITIONS[name]: script.sha
                   for name, script in queue.redisConnection.commands.items()}
    for i in range(jobs):
        await queue.add("smoke", {"i": i}, {"jobId": "smoke-%d" % i})
    # A repeated jobId: BullMQ returns the existing id and stores nothing new.
    dup = await queue.add("smoke", {"i": "changed"}, {"jobId": "smoke-0"})
    t_add = time.monotonic()

    done = asyncio.Event()
    seen = []

    async def process(job, token):
        seen.append((job.id, job.data["i"], job.attemptsStarted, token))
        if len(seen) == jobs:
            done.set()
        return {"echo": job.data["i"]}

    worker = Worker("emq-crosscheck", process, {"connection": url, "lockDuration": 5000})
    try:
        await asyncio.wait_for(done.wait(), timeout)
        # The last completion is written after the processor returns: poll for it.
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            counts = await queue.getJobCounts("wait", "active", "completed", "failed", "delayed")
            if counts["completed"] == jobs:
                break
            await asyncio.sleep(0.02)
    finally:
        await worker.close()
    t_work = time.monotonic()
    first = await queue.client.hgetall("bull:emq-crosscheck:smoke-0")
    await queue.close()
    return client_shas, dup, seen, counts, first, t_add - t0, t_work - t_add


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--server", default=os.path.join(ROOT, ".tools/bin/valkey-server"))
    ap.add_argument("--manifest", default=os.path.join(ROOT, ".tools/bullmq/current/MANIFEST"))
    ap.add_argument("--jobs", type=int, default=10)
    ap.add_argument("--timeout", type=float, default=30)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="bullmq-smoke.") as workdir:
        proc, port = start_server(args.server, workdir)
        try:
            client_shas, dup, seen, counts, first, add_s, work_s = asyncio.run(
                run("redis://127.0.0.1:%d" % port, args.jobs, args.timeout))
        finally:
            proc.terminate()
            proc.wait(timeout=5)

    print("bullmq %s (python %s), server %s" % (bullmq.__version__, sys.version.split()[0], args.server))
    print("added %d jobs in %.3f s; processed in %.3f s (worker start included)" % (args.jobs, add_s, work_s))
    print("counts:", counts)
    print("duplicate add returned id %r; smoke-0 row: data=%s atm=%s ats=%s returnvalue=%s"
          % (dup.id, first.get("data"), first.get("atm"), first.get("ats"), first.get("returnvalue")))
    print("first token handed out: %s" % (seen[0][3] if seen else None))
    ok = counts["completed"] == args.jobs and counts["failed"] == 0 and first.get("data") == '{"i":0}'

    listed = manifest_digests(args.manifest)
    mismatched = [f for f, sha in client_shas.items() if listed.get(f) != sha]
    print("client script digests equal to MANIFEST: %d of %d" % (len(client_shas) - len(mismatched),
                                                                  len(client_shas)))
    for f in mismatched:
        print("  %s: client %s, MANIFEST %s" % (f, client_shas[f], listed.get(f)))
    ok = ok and not mismatched
    print("ok" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
