#!/usr/bin/env python3
"""tern serve under load it must survive with bounded memory (issue 53), with the standard library only:
  1. 50 requests of 78 distinct 100 KB words each (7.8 MB bodies: refused for length, unread), then
     50 requests of 2,000 distinct short words each (tokenized: the word cache grows to its byte bound) — the
     server's RSS stays within 200 MB of what it was after its first answer;
  2. 200 connections at once, each a short completion: every one is answered 200, or 429 with Retry-After —
     none reset or left unanswered;
  3. (issue 51) for SECONDS, a normal client's completions (32 tokens) one after another beside clients that send,
     10 a second each, one-word prompts of 4 KB (tokenized, then refused for length) and 100 KB (refused unread),
     2 MB prompts (413: more than a prompt that fits can need) and 9 MB bodies (413), streams they leave after the first event and headers they never finish: every normal request answered 200 with a p99
     latency within 3x of the same requests on the idle server, the hostile ones each their 4xx, RSS bounded.
Usage: soak.py TERN_BINARY MODEL_DIR WORK_DIR [--sanitized] [--seconds S (20)]
(--sanitized: a sanitizer build, whose memory and speed are not the product's — the RSS and latency bounds are
skipped, every answer still checked; CI runs 20 s, a longer soak takes --seconds 300)"""
import http.client
import json
import socket
import os
import random
import re
import string
import subprocess
import sys
import threading
import time

tern, model, work = sys.argv[1:4]
bounds = "--sanitized" not in sys.argv[4:]
seconds = float(sys.argv[sys.argv.index("--seconds") + 1]) if "--seconds" in sys.argv else 20.0
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
        # (413: past the bytes a prompt that fits can need, refused unread)
        assert status == 413 and b"context_length_exceeded" in data, (status, data[:200])
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
    assert not bounds or max(after_big, end) <= start + 200, "RSS grew by more than 200 MB"

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

    # 3. Normal requests beside hostile clients.
    normal = json.dumps({"prompt": "Once upon a time", "max_tokens": 32, "temperature": 0})

    def latency():
        t = time.time()
        status, _, data = post(normal)
        assert status == 200, (status, data[:200])
        return time.time() - t

    def p99(xs):
        xs = sorted(xs)
        return xs[min(len(xs) - 1, int(0.99 * len(xs)))]

    for _ in range(5):  # (warm)
        latency()
    # The idle baseline: 150 requests before the hostile clients come and 150 after they left (a shared machine's
    # speed drifts); sanitized, 5 and 5 (~0.3 s each, and no bound to check).
    idle_runs = 150 if bounds else 5
    idle = [latency() for _ in range(idle_runs)]
    stop = threading.Event()
    hostile = {}

    def tally(kind, outcome):
        with lock:
            hostile.setdefault(kind, {}).setdefault(outcome, 0)
            hostile[kind][outcome] += 1

    # Each hostile kind paced at 10 requests a second (60 in all, several times the normal client's rate): a
    # flood from these cores would measure how CPU time is shared, not how the server treats what it is sent
    # (phase 2 floods it for correctness alone). The bodies are made once.
    def paced(kind, send):
        def loop():
            while not stop.is_set():
                t = time.time()
                try:
                    tally(kind, send())
                except OSError as e:  # (a reset: counted, and the asserts below name it)
                    tally(kind, type(e).__name__)
                stop.wait(max(0.0, 0.1 - (time.time() - t)))
        return threading.Thread(target=loop)

    four_kb = json.dumps({"prompt": "andgodsaidletthereblight" * 170, "max_tokens": 4})  # ~1,000 tokens: read, refused
    hundred_kb = json.dumps({"prompt": word(100_000), "max_tokens": 4})  # refused unread
    two_mb, nine_mb = json.dumps({"prompt": word(2_000_000), "max_tokens": 4}), b"x" * (9 << 20)

    def nine_mb_body():
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        try:
            c.request("POST", "/v1/completions", body=nine_mb, headers={"Content-Type": "application/json"})
            return c.getresponse().status
        except OSError as e:  # (the server may answer 413 and close before the body is all sent)
            return type(e).__name__
        finally:
            c.close()

    def stream_left():  # a stream left after its first event
        body = json.dumps({"prompt": "Once upon a time", "max_tokens": 200, "stream": True})
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.sendall(f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      f"Content-Length: {len(body)}\r\n\r\n{body}".encode())
            got = b""
            while b"data: " not in got:
                chunk = s.recv(4096)
                if not chunk:
                    break
                got += chunk
        return "left after " + ("an event" if b"data: " in got else "nothing")

    def half_headers():  # headers never finished, the connection held a while
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Le")
            time.sleep(0.5)
        return "closed"

    # The hostile clients run in a process of their own at nice 19: on CI's 2 cores they stand for clients on other
    # machines — their own CPU (making and sending megabytes) is not the server's load; the server's reading,
    # parsing, tokenizing and refusing of it is.
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:
        try:
            os.nice(19)
            clients = [paced("4 KB word", lambda: post(four_kb)[0]), paced("100 KB word", lambda: post(hundred_kb)[0]),
                       paced("2 MB prompt", lambda: post(two_mb)[0]), paced("9 MB body", nine_mb_body),
                       paced("stream left", stream_left), paced("half headers", half_headers)]
            for t in clients:
                t.start()
            time.sleep(seconds)
            stop.set()
            for t in clients:
                t.join()
            os.write(write_end, json.dumps(hostile).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    busy, t0 = [], time.time()
    while time.time() - t0 < seconds:
        busy.append(latency())
    os.waitpid(child, 0)
    with os.fdopen(read_end) as f:
        hostile = json.loads(f.read() or "{}")
    idle += [latency() for _ in range(idle_runs)]
    final = rss_mb()
    print(f"soak: {len(busy)} normal requests in {seconds:.0f} s beside hostile clients {hostile}: p99 latency "
          f"{1000 * p99(busy):.0f} ms, idle {1000 * p99(idle):.0f} ms ({p99(busy) / p99(idle):.2f}x); RSS {final:.0f} MB; "
          f"medians {1000 * sorted(busy)[len(busy) // 2]:.0f} / {1000 * sorted(idle)[len(idle) // 2]:.0f} ms")
    assert hostile["4 KB word"].keys() == {"400"} and hostile["100 KB word"].keys() == {"400"}, hostile
    assert hostile["2 MB prompt"].keys() == {"413"}, hostile
    assert set(hostile["9 MB body"]) <= {"413", "ConnectionResetError", "BrokenPipeError"}, hostile
    assert hostile["stream left"].keys() == {"left after an event"} and hostile["half headers"].keys() == {"closed"}, hostile
    assert not bounds or p99(busy) <= 3 * p99(idle), "normal requests' p99 latency under hostile load is more than 3x the idle server's"
    assert not bounds or final <= start + 200, "RSS grew by more than 200 MB"

    # 4. (issue 79) The body cap holds whatever the framing, and half-open connections do not hold the server:
    # 200 MB of 1 MB chunks → 413 with RSS growth under 20 MB; 64 MB to a route that takes no body → 404 before
    # it is read; a malformed body's 400 quotes a short excerpt; under 600 half-open connections (a request line
    # cut short, a byte more every second) /health answers within 1 s, five times.
    def raw(head, body_chunks):
        """Sends `head` then the chunks (stopping when the server stops reading); the status line it answers."""
        s = socket.create_connection(("127.0.0.1", port), timeout=30)
        s.sendall(head)
        try:
            for c in body_chunks:
                s.sendall(c)
        except (BrokenPipeError, ConnectionResetError):
            pass
        try:
            return s.recv(200).split(b"\r\n")[0].decode()
        finally:
            s.close()
    before = rss_mb()
    mb = b"a" * (1 << 20)
    chunked = raw(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
                  (b"%x\r\n" % len(mb) + mb + b"\r\n" for _ in range(200)))
    grown = rss_mb() - before
    assert chunked.startswith("HTTP/1.1 413"), chunked
    assert not bounds or grown < 20, f"a 200 MB chunked body grew RSS by {grown:.0f} MB"
    t0 = time.time()
    nowhere = raw(b"POST /nowhere HTTP/1.1\r\nHost: x\r\nContent-Length: 67108864\r\n\r\n", (mb for _ in range(64)))
    assert nowhere.startswith("HTTP/1.1 404"), nowhere
    unread_s = time.time() - t0
    status, _, data = post(b'{"prompt": "' + b"x" * 100_000 + b'\x01"}')  # (a control character ends the string's token)
    assert status == 400 and len(data) < 1000 and b"(100009 bytes)" in data, (status, data[:300])
    half = []
    for _ in range(600):
        s = socket.create_connection(("127.0.0.1", port), timeout=30)
        s.sendall(b"GET /health HTTP/1.1\r\nHo")
        half.append(s)
    worst = 0.0
    for _ in range(5):
        t0 = time.time()
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        c.request("GET", "/health")
        r = c.getresponse()
        r.read()
        c.close()
        worst = max(worst, time.time() - t0)
        assert r.status == 200, r.status
        for s in half:
            s.send(b"s")
        time.sleep(1)
    for s in half:
        s.close()
    print(f"soak: 200 MB chunked → {chunked[9:12]} (RSS +{grown:.1f} MB); 64 MB to /nowhere → 404 in {unread_s:.2f} s; "
          f"a 100 KB bad token → 400 of {len(data)} bytes; /health under 600 half-open connections: at most {1000 * worst:.0f} ms")
    assert not bounds or worst < 1.0, f"/health took {worst:.1f} s under 600 half-open connections"
    print("soak: passed")
finally:
    server.terminate()
    server.wait(timeout=30)
