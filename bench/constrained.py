"""What constrained decoding (response_format json_schema) costs the other rows of tern serve's batch, measured from
the client (Python's standard library only):

    python3 bench/constrained.py MODEL_DIR [--rounds 5] [--tokens 128] [--tern build/tern]

One server, --parallel 4. Two measured streams (greedy chat completions of --tokens tokens) decode beside two
background rows, which are plain in one phase and json_schema-constrained in the other; the phases alternate
--rounds times. The background rows live equally long in both phases: each background request of the constrained
phase has a seed whose answer length was measured once before (sampling with a seed is the same alone or in a
batch), and the plain phase sends the same prompts and seeds with max_tokens set to those lengths — so the batch
holds the same rows for the same steps and the phases differ by the masks alone (the plain ones run to max_tokens
through the model's end of text: ignore_eos). Reported: the measured streams'
decode rate (tokens after the first over the time since it) per phase, the paired ratio per round, and the median.
Speed is never asserted; quote the table with the machine (`tern devices` prints the ISA tier).
"""
import argparse
import json
import re
import statistics
import subprocess
import threading
import time
import urllib.request

SCHEMA = {"type": "object", "additionalProperties": False, "required": ["name", "age", "tags", "pet"],
          "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                         "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 4},
                         "pet": {"$ref": "#/$defs/Pet"}},
          "$defs": {"Pet": {"type": "object", "additionalProperties": False, "required": ["kind", "name"],
                            "properties": {"kind": {"enum": ["cat", "dog", "fish"]}, "name": {"type": "string"}}}}}
BACKGROUND_SEEDS = 64


def post(url, body, stream=False):
    req = urllib.request.Request(url + "/v1/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"})
    return urllib.request.urlopen(req, timeout=600)


def background_body(seed, constrained, max_tokens):
    body = {"messages": [{"role": "user", "content": f"Describe person {seed} as JSON."}], "temperature": 1, "seed": seed,
            "max_tokens": max_tokens}
    if not constrained:
        body["ignore_eos"] = True  # (to exactly max_tokens: the constrained twin's length)
    if constrained:
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": "person", "schema": SCHEMA, "strict": True}}
    return body


def measured(url, i, tokens, out):
    body = {"messages": [{"role": "user", "content": f"Tell story number {i}."}], "temperature": 0, "max_tokens": tokens,
            "stream": True}
    times = []
    with post(url, body) as r:
        for line in r:
            if line.startswith(b"data: ") and b'"content"' in line:
                times.append(time.perf_counter())
    out[i] = (len(times) - 1) / (times[-1] - times[0])


def phase(url, constrained, lengths, tokens, short):
    done = threading.Event()

    def keep_busy(first):
        seed = first
        while not done.is_set():
            with post(url, background_body(seed, constrained, lengths[seed] if not constrained else 512)) as r:
                got = json.load(r)["usage"]["completion_tokens"]
            short.append(got < lengths[seed])  # (a plain answer that stopped early: the model's end of text)
            seed = (seed + 2) % BACKGROUND_SEEDS

    rows = [threading.Thread(target=keep_busy, args=(j,)) for j in range(2)]
    for t in rows:
        t.start()
    time.sleep(0.5)  # (the background rows are in before the measured ones start)
    rates = {}
    streams = [threading.Thread(target=measured, args=(url, i, tokens, rates)) for i in range(2)]
    for t in streams:
        t.start()
    for t in streams:
        t.join()
    done.set()
    for t in rows:
        t.join()
    return statistics.mean(rates.values())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--tern", default="build/tern")
    a = ap.parse_args()
    p = subprocess.Popen([a.tern, "serve", a.model, "--port", "0", "--parallel", "4"], stderr=subprocess.PIPE, text=True)
    url = None
    for line in p.stderr:
        m = re.search(r"http://127\.0\.0\.1:\d+", line)
        if m:
            url = m.group(0)
            break
    if not url:
        raise SystemExit("tern serve did not start")
    try:
        lengths = {}
        for seed in range(BACKGROUND_SEEDS):  # each constrained answer's length (and that it is a whole object)
            with post(url, background_body(seed, True, 512)) as r:
                answer = json.load(r)
            json.loads(answer["choices"][0]["message"]["content"])
            lengths[seed] = answer["usage"]["completion_tokens"]
        print(f"background answers: {BACKGROUND_SEEDS} constrained, {statistics.median(lengths.values())} tokens median")
        ratios, short = [], []
        for r in range(a.rounds):
            plain = phase(url, False, lengths, a.tokens, short)
            constrained = phase(url, True, lengths, a.tokens, [])
            ratios.append(constrained / plain)
            print(f"round {r + 1}: measured streams {plain:.1f} tok/s beside plain rows, {constrained:.1f} beside constrained: "
                  f"{ratios[-1]:.3f}x")
        print(f"median: {statistics.median(ratios):.3f}x (decode speed of plain requests beside json_schema rows, paired); "
              f"{sum(short)} of {len(short)} plain background answers ended before their constrained twin's length")
    finally:
        p.terminate()
        p.wait()


if __name__ == "__main__":
    main()
