#!/usr/bin/env python3
"""Checks docs/bullmq-mapping.md against the pinned scripts, both directions of the cross-check.

The "raw" side calls BullMQ's Lua scripts by EVALSHA with KEYS and ARGV built as the mapping
document says (redis-py and msgpack only: none of the bullmq client's classes), the way emq-bench's
BullMQ protocol will. Each `expect` is one fact of the document. Then the official client (PyPI
`bullmq`) processes jobs the raw side added, and the raw side claims and completes jobs the official
client added. Starts its own valkey-server on a free 127.0.0.1 port; exits 0 when every fact held.

  .tools/bullmq-venv/bin/python tests/bullmq/raw_protocol_probe.py
"""

import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

import msgpack
import redis

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COMMANDS = os.path.join(ROOT, ".tools/bullmq/current/commands")
FAILED = []


def expect(what, got, want):
    ok = got == want
    print("%s %s: %r" % ("ok  " if ok else "FAIL", what, got) + ("" if ok else " (wanted %r)" % (want,)))
    if not ok:
        FAILED.append(what)


class Raw:
    """One queue's keys (prefix `bull`) and the scripts by SHA-1, as the harness would hold them."""

    def __init__(self, r, queue):
        self.r, self.q = r, queue
        self.base = "bull:%s:" % queue
        self.sha = {}
        for f in os.listdir(COMMANDS):
            with open(os.path.join(COMMANDS, f), "rb") as src:
                self.sha[f.split("-")[0]] = (r.script_load(src.read()), int(f.split("-")[1][:-4]))

    def k(self, name):
        return self.base + name

    def call(self, script, keys, args):
        sha, nkeys = self.sha[script]
        assert len(keys) == nkeys, (script, len(keys), nkeys)
        return self.r.evalsha(sha, nkeys, *keys, *args)

    def add(self, job_id, data, opts, ts=None):
        ts = ts if ts is not None else int(time.time() * 1000)
        packed = msgpack.packb([self.base, job_id, "raw", ts, None, None, None, None, None], use_bin_type=True)
        args = [packed, json.dumps(data, separators=(",", ":")), msgpack.packb(opts, use_bin_type=True)]
        if opts.get("delay"):
            keys = [self.k(n) for n in ("marker", "meta", "id", "delayed", "completed", "events")]
            return self.call("addDelayedJob", keys, args)
        if opts.get("priority"):
            keys = [self.k(n) for n in ("marker", "meta", "id", "prioritized", "delayed", "completed",
                                        "active", "events", "pc")]
            return self.call("addPrioritizedJob", keys, args)
        keys = [self.k(n) for n in ("wait", "paused", "meta", "id", "completed", "delayed", "active",
                                    "events", "marker")]
        return self.call("addStandardJob", keys, args)

    def claim(self, token, lock_ms):
        keys = [self.k(n) for n in ("wait", "active", "prioritized", "events", "stalled", "limiter",
                                    "delayed", "paused", "meta", "pc", "marker")]
        opts = msgpack.packb({"token": token, "lockDuration": lock_ms, "limiter": None}, use_bin_type=True)
        return self.call("moveToActive", keys, [self.base, int(time.time() * 1000), opts])

    def finish(self, job_id, token, target, value, attempts=1, attempts_made=0):
        keys = [self.k(n) for n in ("wait", "active", "prioritized", "events", "stalled", "limiter",
                                    "delayed", "paused", "meta", "pc", target)]
        keys += [self.base + job_id, self.k("metrics:" + target), self.k("marker")]
        opts = msgpack.packb({"token": token, "keepJobs": {"count": -1}, "lockDuration": 1000,
                              "attempts": attempts, "attemptsMade": attempts_made, "maxMetricsSize": ""},
                             use_bin_type=True)
        prop = "returnvalue" if target == "completed" else "failedReason"
        return self.call("moveToFinished", keys, [job_id, int(time.time() * 1000), prop,
                                                  json.dumps(value), target, "", self.base, opts])

    def retry(self, job_id, token):
        keys = [self.k(n) for n in ("active", "wait", "paused")] + [self.base + job_id] + \
               [self.k(n) for n in ("meta", "events", "delayed", "prioritized", "pc", "marker", "stalled")]
        return self.call("retryJob", keys, [self.base, int(time.time() * 1000), "LPUSH", job_id, token,
                                            msgpack.packb(["failedReason", "boom"], use_bin_type=True)])

    def back_off(self, job_id, token, delay):
        keys = [self.k(n) for n in ("marker", "active", "prioritized", "delayed")] + [self.base + job_id] + \
               [self.k(n) for n in ("events", "meta", "stalled", "wait", "limiter", "paused", "pc")]
        return self.call("moveToDelayed", keys, [self.base, int(time.time() * 1000), job_id, token, delay,
                                                 "0", "", "0"])

    def extend(self, job_id, token, lock_ms):
        return self.call("extendLock", [self.base + job_id + ":lock", self.k("stalled")], [token, lock_ms, job_id])

    def progress(self, job_id, value):
        return self.call("updateProgress", [self.base + job_id, self.k("events"), self.k("meta")],
                         [job_id, json.dumps(value)])

    def reap(self, max_stalled, interval_ms):
        keys = [self.k(n) for n in ("stalled", "wait", "active", "stalled-check", "meta", "paused",
                                    "marker", "events", "repeat")]
        return self.call("moveStalledJobsToWait", keys, [max_stalled, self.base, int(time.time() * 1000),
                                                         interval_ms])

    def where(self, job_id):
        """Every location that holds the id (lists and sorted sets), as the checker would read it."""
        found = []
        for name in ("wait", "paused", "active"):
            if job_id in self.r.lrange(self.k(name), 0, -1):
                found.append(name)
        for name in ("prioritized", "delayed", "completed", "failed", "waiting-children"):
            if self.r.zscore(self.k(name), job_id) is not None:
                found.append(name)
        return found


def fields(flat):
    return dict(zip(flat[0::2], flat[1::2]))


def raw_facts(r):
    q = Raw(r, "probe")
    ts = int(time.time() * 1000)
    expect("addStandardJob returns the job id", q.add("j1", {"p": 1}, {"jobId": "j1", "attempts": 2}, ts), "j1")
    row_before = r.hgetall(q.base + "j1")
    expect("born fields", sorted(row_before), ["data", "delay", "name", "opts", "priority", "timestamp"])
    expect("duplicate jobId returns the same id", q.add("j1", {"p": "changed"}, {"jobId": "j1"}), "j1")
    expect("duplicate changed no field", r.hgetall(q.base + "j1"), row_before)
    events = [e[1].get("event") for e in r.xrange(q.k("events"))]
    expect("duplicate leaves a 'duplicated' event", events.count("duplicated"), 1)
    expect("id counter is INCRed by every add, duplicates too", r.get(q.k("id")), "2")
    expect("standard job is in wait (LIST) only", q.where("j1"), ["wait"])
    expect("marker member '0' score 0 when a job is ready", r.zrange(q.k("marker"), 0, -1, withscores=True),
           [("0", 0.0)])

    expect("addPrioritizedJob", q.add("p1", {}, {"jobId": "p1", "priority": 3}), "p1")
    expect("prioritized score = priority*2^32 + pc", r.zscore(q.k("prioritized"), "p1"), float(3 * 2**32 + 1))
    d_ts = int(time.time() * 1000)
    expect("addDelayedJob", q.add("d1", {}, {"jobId": "d1", "delay": 150}, d_ts), "d1")
    expect("delayed score = (timestamp+delay)*0x1000", r.zscore(q.k("delayed"), "d1"), float((d_ts + 150) * 4096))
    expect("marker member '1' = next due ms", r.zscore(q.k("marker"), "1"), float(d_ts + 150))

    got = q.claim("tok-a", 300)
    expect("moveToActive reply: [HGETALL, id, 0, 0]", (got[1], got[2], got[3]), ("j1", 0, 0))
    expect("claim returns the row's data", fields(got[0]).get("data"), '{"p":1}')
    expect("claim sets ats=1 and processedOn", (fields(got[0]).get("ats"), "processedOn" in fields(got[0])), ("1", True))
    expect("lock key holds the token", r.get(q.base + "j1:lock"), "tok-a")
    expect("lock TTL = lockDuration", 0 < r.pttl(q.base + "j1:lock") <= 300, True)
    expect("wait is FIFO before prioritized: next claim is the priority job", q.claim("tok-p", 5000)[1], "p1")
    expect("extendLock with another token: 0", q.extend("j1", "tok-x", 300), 0)
    expect("extendLock with the token: 1", q.extend("j1", "tok-a", 300), 1)
    expect("updateProgress takes no token (unfenced): 0", q.progress("j1", 50), 0)
    expect("updateProgress on a missing job: -1", q.progress("nope", 1), -1)
    expect("moveToFinished with another token: -6", q.finish("j1", "tok-x", "completed", 1), -6)

    # Stall: let the lock expire, then the two-phase stalled check (mark, then move).
    time.sleep(0.35)
    expect("extendLock after expiry: 0 (a lease is not revived)", q.extend("j1", "tok-a", 300), 0)
    expect("moveToFinished after lock expiry: -2", q.finish("j1", "tok-a", "completed", 1), -2)
    expect("first stalled check only marks", q.reap(1, 1), [])
    time.sleep(0.01)
    moved = q.reap(1, 1)
    expect("second stalled check moves lock-less active jobs (p1 keeps its lock)", moved, ["j1"])
    expect("stalled job back in wait, stc=1, atm untouched", (q.where("j1"), r.hget(q.base + "j1", "stc"),
                                                              r.hget(q.base + "j1", "atm")), (["wait"], "1", None))
    got = q.claim("tok-b", 5000)
    expect("a stalled job is re-queued at the head (RPUSH): the next claim gets it", got[1], "j1")
    expect("second claim: ats=2", fields(got[0]).get("ats"), "2")
    expect("zombie (first token) finish: -6 while another holds the lock", q.finish("j1", "tok-a", "completed", 1), -6)
    expect("retryJob with the token (attempt 1 of 2 failed, no backoff): 0", q.retry("j1", "tok-b"), 0)
    expect("retry: back in wait, atm=1, failedReason set", (q.where("j1"), r.hget(q.base + "j1", "atm"),
                                                           r.hget(q.base + "j1", "failedReason")),
           (["wait"], "1", "boom"))
    expect("that claim promoted the due delayed job to wait (inside moveToActive)", q.where("d1"), ["wait"])
    got = q.claim("tok-c", 5000)
    expect("FIFO: d1 reached wait first (LPUSH/RPOPLPUSH), j1 was LPUSHed after", got[1], "d1")
    got = q.claim("tok-d", 5000)
    expect("then j1, ats=3", (got[1], fields(got[0]).get("ats")), ("j1", "3"))
    expect("moveToFinished failed (attempts exhausted): 0", q.finish("j1", "tok-d", "failed", "boom2", 2, 1), 0)
    row = r.hgetall(q.base + "j1")
    expect("failed: atm=2, failedReason, finishedOn", (row.get("atm"), row.get("failedReason"), "finishedOn" in row),
           ("2", '"boom2"', True))
    expect("failed job in failed (ZSET) only", q.where("j1"), ["failed"])
    expect("lock gone after finish", r.exists(q.base + "j1:lock"), 0)
    expect("a second finish of a finished job: -2 (no lock)", q.finish("j1", "tok-d", "completed", 1), -2)
    expect("moveToDelayed (backoff) with the token: 0", q.back_off("d1", "tok-c", 60000), 0)
    expect("backoff job in delayed, atm=1", (q.where("d1"), r.hget(q.base + "d1", "atm")), (["delayed"], "1"))
    expect("moveToFinished completed: 0", q.finish("p1", "tok-p", "completed", {"ok": 1}), 0)
    expect("completed in completed only, returnvalue JSON", (q.where("p1"), r.hget(q.base + "p1", "returnvalue")),
           (["completed"], '{"ok": 1}'))
    expect("token '0' skips the lock check entirely (never hand it out)", q.add("z0", {}, {"jobId": "z0"}), "z0")
    q.claim("tok-z", 5000)
    expect("... moveToFinished with token '0' is accepted", q.finish("z0", "0", "completed", 1), 0)
    due = r.zscore(q.k("delayed"), "d1") // 4096
    expect("nothing ready: moveToActive -> [0, 0, 0, next delayed due ms]", q.claim("tok-e", 1000), [0, 0, 0, due])


async def cross(url, r):
    from bullmq import Queue, Worker
    q = Raw(r, "cross")
    # Raw side adds, the official Worker processes.
    for i in range(5):
        q.add("raw-%d" % i, {"i": i}, {"jobId": "raw-%d" % i, "attempts": 1, "delay": 0})
    done = asyncio.Event()
    seen = []

    async def process(job, token):
        seen.append(job.data["i"])
        if len(seen) == 5:
            done.set()
        return job.data["i"] * 10

    worker = Worker("cross", process, {"connection": url})
    await asyncio.wait_for(done.wait(), 20)
    await worker.close()
    expect("official Worker processed raw-added jobs in FIFO order", seen, [0, 1, 2, 3, 4])
    expect("... and completed them", sorted(r.zrange(q.k("completed"), 0, -1)), ["raw-%d" % i for i in range(5)])
    # Official client adds, the raw side claims and completes.
    queue = Queue("cross", {"connection": url})
    ids = [(await queue.add("official", {"n": n}, {"attempts": 3, "backoff": 100})).id for n in range(3)]
    got = []
    for _ in ids:
        reply = q.claim("raw-tok", 5000)
        f = fields(reply[0])
        got.append((reply[1], json.loads(f["data"])["n"], json.loads(f["opts"]).get("attempts")))
        expect("raw finish of an official job: 0", q.finish(reply[1], "raw-tok", "completed", "ok"), 0)
    expect("raw side claimed the official jobs (auto ids, data, opts.attempts)", got,
           [(ids[n], n, 3) for n in range(3)])
    counts = await queue.getJobCounts("completed", "wait", "active")
    expect("official client sees them completed", counts, {"completed": 8, "wait": 0, "active": 0})
    await queue.close()


def main():
    with tempfile.TemporaryDirectory(prefix="bullmq-probe.") as workdir:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        proc = subprocess.Popen(
            [os.path.join(ROOT, ".tools/bin/valkey-server"), "--port", str(port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no", "--dir", workdir, "--logfile", ""],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            r = redis.Redis(port=port, decode_responses=True)
            for _ in range(200):
                try:
                    r.ping()
                    break
                except redis.ConnectionError:
                    time.sleep(0.02)
            raw_facts(r)
            asyncio.run(cross("redis://127.0.0.1:%d" % port, r))
        finally:
            proc.terminate()
            proc.wait(timeout=5)
    print("%d failed" % len(FAILED) if FAILED else "all facts held")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
