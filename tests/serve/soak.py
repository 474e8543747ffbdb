#!/usr/bin/env python3
"""tern serve under load it must survive with bounded memory (issue 53), with the standard library only:
  1. 50 requests of 78 distinct 100 KB words each (7.8 MB bodies: refused for length, before tokenization), then
     50 requests of 2,000 distinct short words each (tokenized: the word cache grows to its byte bound) — the
     server's RSS stays within 200 MB of what it was after its first answer;
  2. 200 connections at once, each a short completion: every one is answered 200, or 429 with Retry-After —
     none reset or left unanswered.
Usage: soak.py TERN_BINARY MODEL_DIR WORK_DIR [--no-rss-bound]   (the bound is skipped for sanitized builds)"""
import http.client
import json
import os
import random
import re
import string
import subprocess
import sys
import threading
import time

tern, model, work = sys.argv[1:4]
rss_bound = "--no-rss-bound" not in sys.argv[4:]
os.makedirs(work, exist_ok=True)
log = open(os.path.join(work, "soak-server.log"), "w+")
server = subprocess.Popen([tern, "serve", model, "--port", "0", "--threads", "2", "--parallel", "4", "--queue", "16"],
                          stderr=log, stdout=subprocess.DEVNULL)
try:
    port = None
    for _ in range(300):
        log.seek(0)
        m = re.search(r"http://127\.0\.0\.1:(\d+)", log.read())
        if m:
            port = int(m.group(1))
            break
        time.sleep(0.1)
    assert port, "tern serve did not start"

    def post(body, timeout=120):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        c.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, r.getheader("Retry-After"), data

    def rss_mb():
        with open(f"/proc/{server.pid}/status") as f:
            return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1)) / 1024

    status, _, _ = post(json.dumps({"prompt": "Once upon a time", "max_tokens": 4}))
    assert status == 200, status
    start = rss_mb()
    rng = random.Random(53)
    letters = bytes(string.ascii_letters * 5, "ascii")[:256]
    word = lambda n: rng.randbytes(n).translate(letters).decode("ascii")
    t0 = time.time()
    for i in range(50):
        big = " ".join(word(100_000) for _ in range(78))
        status, _, data = post(json.dumps({"prompt": big, "max_tokens": 1}))
        assert status == 400 and b"context_length_exceeded" in data, (status, data[:200])
    big_s = time.time() - t0
    after_big = rss_mb()
    t0 = time.time()
    for i in range(50):
        small = " ".join(word(rng.randint(3, 12)) for _ in range(2000))
        status, _, data = post(json.dumps({"prompt": small, "max_tokens": 1}))
        assert status in (200, 400), (status, data[:200])  # (400: more tokens than the context)
    small_s = time.time() - t0
    end = rss_mb()
    print(f"soak: RSS {start:.0f} MB after the first answer, {after_big:.0f} MB after 50 requests of 78 x 100 KB words "
          f"({big_s:.1f} s), {end:.0f} MB after 50 of 2,000 short words ({small_s:.1f} s)")
    assert not rss_bound or max(after_big, end) <= start + 200, "RSS grew by more than 200 MB"

    results, lock = [], threading.Lock()
    go = threading.Barrier(200)

    def one():
        try:
            go.wait()
            status, retry, _ = post(json.dumps({"prompt": "Once upon a time", "max_tokens": 8}), timeout=300)
            outcome = str(status) if status != 429 or retry else "429 without Retry-After"
        except Exception as e:  # a reset, a refused or timed-out connection
            outcome = type(e).__name__
        with lock:
            results.append(outcome)

    threads = [threading.Thread(target=one) for _ in range(200)]
    t0 = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    counts = {k: results.count(k) for k in sorted(set(results))}
    print(f"soak: 200 connections at once answered in {time.time() - t0:.1f} s: {counts}")
    assert set(counts) <= {"200", "429"}, counts
    assert counts.get("200", 0) >= 4, counts
    print("soak: passed")
finally:
    server.terminate()
    server.wait(timeout=30)
