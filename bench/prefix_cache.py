"""tern serve's prefix cache, measured from the client: requests sharing a long system prompt, one after another,
against a server with the cache and one with --no-prefix-cache (Python's standard library only).

    python3 bench/prefix_cache.py MODEL_DIR [--system-words 850] [--requests 8] [--tokens 32] [--tern build/tern]

Per server: each request's time to first token (streamed chat completion, greedy), the first one's against the
median of the others, and whether every answer is the same with the cache as without (it must be: the reused keys and
values are the ones a whole prefill computes). The two servers run one after the other, each alone on the machine.
Speed is never asserted; quote the table with the machine (`tern devices` prints the ISA tier).
"""
import argparse
import json
import re
import statistics
import subprocess
import time
import urllib.request

QUESTIONS = ["What is the first thing written here?", "Who speaks in it?", "Say it in one line.", "What comes next?",
             "Name one place in it.", "What does it ask of the reader?", "Is it old?", "Give it a title.",
             "What is its tone?", "Who would read it?", "Why was it written?", "What is missing from it?"]


def start(tern, model, extra):
    p = subprocess.Popen([tern, "serve", model, "--port", "0", "--parallel", "4", *extra], stderr=subprocess.PIPE, text=True)
    for line in p.stderr:
        m = re.search(r"http://127\.0\.0\.1:\d+", line)
        if m:
            return p, m.group(0)
    raise SystemExit("tern serve did not start")


def ask(url, system, question, tokens):
    body = json.dumps({"messages": [{"role": "system", "content": system}, {"role": "user", "content": question}],
                       "max_tokens": tokens, "temperature": 0, "stream": True,
                       "stream_options": {"include_usage": True}}).encode()
    req = urllib.request.Request(url + "/v1/chat/completions", body, {"Content-Type": "application/json"})
    t0 = time.perf_counter()
    ttft, text, prompt_tokens = None, "", 0
    with urllib.request.urlopen(req) as r:
        for raw in r:
            line = raw.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if chunk.get("usage"):
                prompt_tokens = chunk["usage"]["prompt_tokens"]
            for c in chunk["choices"]:
                if c["delta"].get("content"):
                    ttft = ttft if ttft is not None else time.perf_counter() - t0
                    text += c["delta"]["content"]
    return ttft, text, prompt_tokens


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--tern", default="build/tern")
    ap.add_argument("--system-words", type=int, default=850)  # (SmolLM2: a 1,004-token prompt)
    ap.add_argument("--requests", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=32)
    args = ap.parse_args()
    words = ("In the beginning God created the heaven and the earth. And the earth was without form, and void; and "
             "darkness was upon the face of the deep. ").split()
    system = "You answer questions about this text. " + " ".join(words[i % len(words)] for i in range(args.system_words))
    questions = [QUESTIONS[i % len(QUESTIONS)] for i in range(args.requests)]
    results = {}
    for name, extra in (("prefix cache", []), ("--no-prefix-cache", ["--no-prefix-cache"])):
        server, url = start(args.tern, args.model, extra)
        try:
            runs = [ask(url, system, q, args.tokens) for q in questions]
            metrics = urllib.request.urlopen(url + "/metrics").read().decode()
        finally:
            server.terminate()
            server.wait()
        reused = re.search(r"^tern_prefix_cache_reused_tokens_total (\d+)", metrics, re.M)
        results[name] = runs
        first, rest = runs[0][0], statistics.median(r[0] for r in runs[1:])
        print(f"{name:18} prompt {runs[0][2]} tokens: first request's TTFT {first * 1000:7.1f} ms, requests 2-{len(runs)} median "
              f"{rest * 1000:7.1f} ms ({rest / first:.2f}x); {reused.group(1) if reused else 0} prompt tokens reused")
    same = [a[1] == b[1] for a, b in zip(results["prefix cache"], results["--no-prefix-cache"])]
    print(f"answers equal with and without the cache: {sum(same)} of {len(same)}")
    raise SystemExit(0 if all(same) else 1)


if __name__ == "__main__":
    main()
