#!/usr/bin/env python3
"""Load for tern serve (bench/serve.sh runs it): concurrent streaming completions, measured from the client.

  serve_load.py URL --streams N --tokens T [--prompts P] [--soak SECONDS] [--pid SERVER_PID]

Each stream sends greedy streaming requests (prompt i of P distinct ones, T tokens, ignore nothing) and
records time to first token and the gaps between tokens. First each prompt runs alone (the reference
text); then N streams run at once — once, or again and again for --soak seconds — and every response must
end with [DONE] and a finish_reason and equal its prompt's solo text (greedy decoding is batch-invariant in
tern: the same tokens alone or in a full batch). Prints one JSON line: aggregate tok/s (all completion
tokens over the wall time of the concurrent phase), p50/p99 TTFT and inter-token latency, requests,
mismatches, and with --pid the server's RSS sampled every 5 s. Python's standard library only.
"""
import argparse
import http.client
import json
import statistics
import threading
import time
import urllib.parse


def stream_once(url, prompt, tokens):
    """One streaming completion: (text, finish_reason, ttft_s, [gaps_s], completion tokens)."""
    u = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    body = json.dumps({"prompt": prompt, "max_tokens": tokens, "temperature": 0, "stream": True,
                       "stream_options": {"include_usage": True}})
    t0 = time.perf_counter()
    conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        raise RuntimeError(f"HTTP {resp.status}: {resp.read()[:200]!r}")
    text, finish, ttft, gaps, last, done, used = [], None, None, [], None, False, 0
    buf = b""
    while True:
        chunk = resp.read1(65536)
        if not chunk:
            break
        buf += chunk
        while b"\n\n" in buf:
            event, buf = buf.split(b"\n\n", 1)
            if not event.startswith(b"data: "):
                continue
            data = event[6:]
            if data == b"[DONE]":
                done = True
                continue
            c = json.loads(data)
            if "error" in c:
                raise RuntimeError(f"error event: {c}")
            if c.get("usage"):
                used = c["usage"]["completion_tokens"]
            if not c["choices"]:
                continue
            ch = c["choices"][0]
            now = time.perf_counter()
            if ch["text"]:
                if ttft is None:
                    ttft = now - t0
                elif last is not None:
                    gaps.append(now - last)
                last = now
                text.append(ch["text"])
            if ch["finish_reason"]:
                finish = ch["finish_reason"]
    conn.close()
    if not done or finish is None:
        raise RuntimeError("stream ended without [DONE] or a finish_reason")
    return "".join(text), finish, ttft, gaps, used


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def pct(xs, p):
    if not xs:
        return 0.0
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("url")
    ap.add_argument("--streams", type=int, required=True)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--soak", type=float, default=0)
    ap.add_argument("--pid", type=int, default=0)
    a = ap.parse_args()
    prompts = [f"And it came to pass on day {i}, that" for i in range(a.prompts)]
    solo = [stream_once(a.url, p, a.tokens)[0] for p in prompts]

    lock = threading.Lock()
    ttfts, gaps, errors = [], [], []
    counts = {"requests": 0, "tokens": 0, "mismatches": 0}
    stop_at = time.perf_counter() + a.soak

    def worker(k):
        i = k
        while True:
            p = i % len(prompts)
            try:
                text, finish, ttft, g, used = stream_once(a.url, prompts[p], a.tokens)
            except Exception as e:  # noqa: BLE001 - reported, counted as a failure
                with lock:
                    errors.append(repr(e))
                return
            with lock:
                counts["requests"] += 1
                counts["tokens"] += used
                ttfts.append(ttft)
                gaps.extend(g)
                if text != solo[p]:
                    counts["mismatches"] += 1
            i += a.streams
            if a.soak <= 0 or time.perf_counter() >= stop_at:
                return

    rss = []
    sampling = [True]

    def sampler():
        while sampling[0]:
            rss.append(rss_kb(a.pid))
            time.sleep(5)

    if a.pid:
        threading.Thread(target=sampler, daemon=True).start()
    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(a.streams)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    sampling[0] = False
    if a.pid:
        rss.append(rss_kb(a.pid))
    out = {
        "streams": a.streams, "tokens": a.tokens, "requests": counts["requests"], "errors": errors[:3],
        "mismatches": counts["mismatches"], "wall_s": round(wall, 2),
        "completion_tokens": counts["tokens"], "aggregate_tok_s": round(counts["tokens"] / wall, 2),
        "ttft_p50_ms": round(1000 * pct(ttfts, 50), 1), "ttft_p99_ms": round(1000 * pct(ttfts, 99), 1),
        "itl_p50_ms": round(1000 * pct(gaps, 50), 2), "itl_p99_ms": round(1000 * pct(gaps, 99), 2),
    }
    if rss:
        out["rss_mb"] = [round(r / 1024) for r in rss]
    print(json.dumps(out))
    return 1 if errors or counts["mismatches"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
