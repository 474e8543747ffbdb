#!/usr/bin/env bash
# tern serve over HTTP with curl (and the openai Python client when tests/serve/setup_venv.sh has made
# its venv): greedy text equal to `tern generate`'s, streamed and not; 8 concurrent requests each equal to
# its solo answer; stop strings; every malformed request of tests/serve/bad_requests.tsv and the HTTP-level
# ones (no route, an oversize body, a prompt past the context, a full queue) answered 4xx while the server
# keeps serving; /metrics agreeing with the requests sent; SIGTERM stopping it (with requests running: within
# --grace); the limits as flags; n choices of one prompt;
# and two replicas behind Debian's nginx (when installed: scripts/setup.sh --ci) sharing the requests.
# Usage: cli_serve.sh TERN_BINARY REPO_DIR WORK_DIR [--sanitized]  (a sanitizer build: the tool calls' sampled
# run is 6 calls, not 50 — the 50 took 3 min 57 s under ASan against 28 s in Release)
set -euo pipefail
tern=$1 repo=$2 work=$3 sanitized=${4:-}
rm -rf "$work" && mkdir -p "$work"
model=$repo/models/default
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done' EXIT

start_server() {  # NAME ARGS... → sets $url; the server's stderr in $work/NAME.log
  local name=$1
  shift
  "$tern" serve "${serve_model:-$model}" --port 0 --threads 2 "$@" 2> "$work/$name.log" &
  pids+=($!)
  server_pid=$!
  for _ in $(seq 1 100); do
    url=$(grep -so 'http://127.0.0.1:[0-9]*' "$work/$name.log" || true)
    [ -n "$url" ] && return 0
    sleep 0.1
  done
  echo "tern serve did not start:" && cat "$work/$name.log" && exit 1
}
post() {  # PATH BODY → body on stdout, status in $work/status
  curl -s -o "$work/body" -w '%{http_code}' -H 'Content-Type: application/json' --data-binary "$2" "$url$1" > "$work/status"
  cat "$work/body"
}
field() { python3 -c "import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1]))" "$1"; }
expect_status() { [ "$(cat "$work/status")" = "$1" ] || { echo "expected HTTP $1, got $(cat "$work/status"): $(cat "$work/body")"; exit 1; }; }

encoders=$repo/tests/fixtures/encoders
start_server main --parallel 4 --embedding-model "$encoders/bert-optimum"
[ "$(curl -s "$url/health")" = '{"status":"ok"}' ]
curl -s "$url/v1/models" | grep >/dev/null '"id":"default"'
curl -s "$url/v1/models" | grep >/dev/null '"id":"bert-optimum"'

# /v1/embeddings (--embedding-model beside the decoder): the texts as one request, floats and base64, equal to
# ONNX Runtime's last_hidden_state mean-pooled and normalized (tools/exporters/make_encoder_fixtures.py) within 1e-4.
check_embeddings() {  # GOLDEN: every case of the golden in one request, each way
  python3 - "$url" "$1" <<'EOF'
import base64, json, struct, sys, urllib.request
url, golden = sys.argv[1], json.load(open(sys.argv[2]))
texts = [c["text"] for c in golden["cases"]]
for fmt in ("float", "base64"):
    req = urllib.request.Request(url + "/v1/embeddings", json.dumps({"input": texts, "encoding_format": fmt}).encode(),
                                 {"Content-Type": "application/json"})
    got = json.load(urllib.request.urlopen(req))
    assert [d["index"] for d in got["data"]] == list(range(len(texts))), got
    assert got["usage"]["prompt_tokens"] == sum(len(c["ids"]) for c in golden["cases"]), got["usage"]
    worst = 0
    for d, c in zip(got["data"], golden["cases"]):
        e = d["embedding"]
        if fmt == "base64":
            raw = base64.b64decode(e)
            e = struct.unpack(f"<{len(raw) // 4}f", raw)
        worst = max(worst, max(abs(a - b) for a, b in zip(e, c["batched"])))
    assert worst < 1e-4, (fmt, worst)
print(f"serve: /v1/embeddings of {len(texts)} texts within {worst:.1e} of ONNX Runtime's, as floats and as base64")
EOF
}
check_embeddings "$encoders/bert-optimum/embeddings.json"
post /v1/embeddings '{"input": [[2, 40, 41, 3], "once upon a time"]}' > /dev/null; expect_status 200
post /v1/embeddings "{\"input\": \"$(printf 'word %.0s' $(seq 1 60))\"}" > /dev/null
expect_status 400; grep -q "maximum context length is 48 tokens; input 0 has 242 tokens" "$work/body"  # (4 pieces a word)
post /v1/embeddings '{"input": [[2, 400]]}' > /dev/null; expect_status 400; grep -q "token id 400 is outside the vocabulary" "$work/body"
post /v1/embeddings '{"input": "a", "dimensions": 16}' > /dev/null; expect_status 400; grep -q "embeddings have 32" "$work/body"

# Greedy text as `tern generate` gives it (its JSON text is prompt + completion).
expected=$("$tern" generate --model "$model" --prompt "And God said" --max-new-tokens 16 --greedy --threads 2 --json 2>/dev/null |
           field 'd["text"][0][len("And God said"):]')
got=$(post /v1/completions '{"prompt": "And God said", "max_tokens": 16, "temperature": 0}' | field 'd["choices"][0]["text"]')
expect_status 200
[ "$got" = "$expected" ] || { echo "completion '$got' != tern generate '$expected'"; exit 1; }
streamed=$(post /v1/completions '{"prompt": "And God said", "max_tokens": 16, "temperature": 0, "stream": true}' |
           python3 -c "
import json, sys
events = [l[6:] for l in sys.stdin.read().split('\n') if l.startswith('data: ')]
assert events[-1] == '[DONE]', events[-1]
chunks = [json.loads(e) for e in events[:-1]]
assert chunks[-1]['choices'][0]['finish_reason'] == 'length', chunks[-1]
print(''.join(c['choices'][0]['text'] for c in chunks))")
[ "$streamed" = "$expected" ] || { echo "streamed '$streamed' != '$expected'"; exit 1; }
echo "serve: greedy completion = tern generate's, streamed and not: '$expected'"

# A stop string (the completion's fourth word): the text ends before it.
stop=$(python3 -c "import sys; print(' ' + sys.argv[1].split()[3])" "$expected")
post /v1/completions "{\"prompt\": \"And God said\", \"max_tokens\": 16, \"temperature\": 0, \"stop\": [\"$stop\"]}" > "$work/stop.json"
expect_status 200
python3 - "$work/stop.json" "$expected" "$stop" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))["choices"][0]
full, stop = sys.argv[2], sys.argv[3]
assert c["text"] == full[:full.index(stop)] and c["finish_reason"] == "stop", (c, full, stop)
EOF

# n choices share one prefill and sample as solo requests seeded seed, seed+1, ...
post /v1/completions '{"prompt": "And God said", "max_tokens": 12, "temperature": 0.9, "seed": 5, "n": 3}' > "$work/n3.json"
expect_status 200
for k in 0 1 2; do
  post /v1/completions "{\"prompt\": \"And God said\", \"max_tokens\": 12, \"temperature\": 0.9, \"seed\": $((5 + k))}" |
    field 'd["choices"][0]["text"]' > "$work/seed$k"
  field "d['choices'][$k]['text']" < "$work/n3.json" | cmp -s - "$work/seed$k" || { echo "choice $k of n=3 differs from seed $((5 + k)) alone"; exit 1; }
done
echo "serve: n=3 choices equal 3 solo requests with seeds 5, 6, 7"

# No seed: a fresh random one each request (4 requests at temperature 1, at least 3 distinct texts); a seed repeats.
for k in 1 2 3 4; do
  post /v1/completions '{"prompt": "And God said", "max_tokens": 24, "temperature": 1.0}' | field 'd["choices"][0]["text"]' > "$work/unseeded$k"
done
distinct=$(md5sum "$work"/unseeded? | cut -d" " -f1 | sort -u | wc -l)
[ "$distinct" -ge 3 ] || { echo "4 unseeded requests at temperature 1 gave $distinct distinct texts"; cat "$work"/unseeded?; exit 1; }
for k in 1 2; do
  post /v1/completions '{"prompt": "And God said", "max_tokens": 24, "temperature": 1.0, "seed": 11}' | field 'd["choices"][0]["text"]' > "$work/seeded$k"
done
cmp -s "$work/seeded1" "$work/seeded2" || { echo "seed 11 gave two texts"; exit 1; }
echo "serve: 4 unseeded requests at temperature 1 gave $distinct distinct texts; seed 11 twice the same"

# A second server on the port the first holds fails at start, naming the port, with a non-zero exit.
port=${url##*:}
if "$tern" serve "$model" --port "$port" --threads 1 2> "$work/busy.log"; then echo "a second server started on busy port $port"; exit 1; fi
grep -q "cannot listen on 127.0.0.1:$port" "$work/busy.log" || { echo "busy port: $(cat "$work/busy.log")"; exit 1; }
echo "serve: a second server on busy port $port exits non-zero: $(grep -o 'cannot listen.*' "$work/busy.log")"
# An empty key (an unset shell variable) never turns authentication off: the server refuses to start.
if "$tern" serve "$model" --port 0 --api-key '' 2> "$work/key.log"; then echo "started with an empty --api-key"; exit 1; fi
grep -q -- "--api-key is empty" "$work/key.log"
if TERN_API_KEY='' "$tern" serve "$model" --port 0 2> "$work/key.log"; then echo "started with an empty TERN_API_KEY"; exit 1; fi
grep -q "TERN_API_KEY is set but empty" "$work/key.log"

# 8 requests at once (4 rows: the others queue and join as rows free) each equal to its solo answer.
for i in $(seq 1 8); do
  post /v1/completions "{\"prompt\": \"And the LORD spake $i\", \"max_tokens\": 12, \"temperature\": 0}" | field 'd["choices"][0]["text"]' > "$work/solo$i"
done
for i in $(seq 1 8); do
  (curl -s -H 'Content-Type: application/json' --data-binary "{\"prompt\": \"And the LORD spake $i\", \"max_tokens\": 12, \"temperature\": 0}" \
     "$url/v1/completions" | field 'd["choices"][0]["text"]' > "$work/together$i") &
done
wait_jobs() { for j in $(jobs -p); do [ "$j" = "$server_pid" ] || wait "$j"; done; }
wait_jobs
for i in $(seq 1 8); do cmp -s "$work/solo$i" "$work/together$i" || { echo "request $i differs in a batch"; exit 1; }; done
echo "serve: 8 concurrent greedy requests each equal their solo answers"

# Malformed requests: each a 400 with its message, the server serving on.
bad=0
while IFS=$'\t' read -r endpoint body message; do
  case $endpoint in '#'*|'') continue ;; esac
  path=/v1/$endpoint; [ "$endpoint" = chat ] && path=/v1/chat/completions
  post "$path" "$body" > /dev/null
  expect_status 400
  grep -qF -- "$message" "$work/body" || { echo "'$body': '$(cat "$work/body")' lacks '$message'"; exit 1; }
  bad=$((bad + 1))
done < "$repo/tests/serve/bad_requests.tsv"
post /v1/completions "{\"prompt\": \"$(printf 'word %.0s' $(seq 1 400))\", \"max_tokens\": 4}" > /dev/null
expect_status 400; grep -q "maximum context length is 256 tokens" "$work/body"
post /v1/completions '{"prompt": "And God said", "max_tokens": 200, "temperature": 0, "ignore_eos": true}' > /dev/null
expect_status 200; [ "$(field 'd["usage"]["completion_tokens"]' < "$work/body")" = 200 ]  # (through the end of text)
post /v1/completions '{"prompt": "And God said", "max_tokens": 1000}' > /dev/null
expect_status 400; grep -q "max_tokens asks for 1000" "$work/body"
post /nothing '{}' > /dev/null; expect_status 404
head -c 9000000 /dev/zero | tr '\0' 'a' > "$work/big"
curl -s -o "$work/body" -w '%{http_code}' --data-binary @"$work/big" "$url/v1/completions" > "$work/status"; expect_status 413
curl -s -o "$work/body" -w '%{http_code}' "$url/v1/completions" > "$work/status"; [ "$(cat "$work/status")" -ge 400 ]
[ "$(curl -s "$url/health")" = '{"status":"ok"}' ]
echo "serve: $bad malformed requests and 5 HTTP-level ones answered 4xx, the server still serving"

# /metrics agrees with what was sent: 1+1+1+1+3+4+2+8+8+1 completions answered 200.
curl -s "$url/metrics" > "$work/metrics"
grep -q '^tern_requests_total{endpoint="/v1/completions",status="200"} 30$' "$work/metrics" || { grep requests_total "$work/metrics"; exit 1; }
grep -q "^tern_requests_total{endpoint=\"/v1/completions\",status=\"400\"} " "$work/metrics"
grep -q '^tern_time_to_first_token_seconds_count ' "$work/metrics"
tokens=$(awk '/^tern_generation_tokens_total/{print $2}' "$work/metrics")
[ "$tokens" -ge $((16 + 16 + 8 * 12 * 2)) ] || { echo "generation tokens $tokens"; exit 1; }
grep -q '^tern_batch_size 0$' "$work/metrics"
echo "serve: /metrics counts 30 completions answered and $tokens tokens"

# A client that goes away mid-stream frees its row at once: its sequence stops within a few tokens of 250
# (tern_generation_tokens_total) and the batch is empty again (tern_batch_size).
python3 - "$url" <<'EOF'
import json, re, socket, sys, time, urllib.parse, urllib.request
url = sys.argv[1]
def tokens():
    m = re.search(r"^tern_generation_tokens_total (\d+)$", urllib.request.urlopen(url + "/metrics").read().decode(), re.M)
    return int(m.group(1))
before = tokens()
u = urllib.parse.urlparse(url)
body = json.dumps({"prompt": "And God said", "max_tokens": 250, "temperature": 0, "stream": True})
s = socket.create_connection((u.hostname, u.port))
s.sendall(f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n{body}".encode())
got = b""
while b"data: " not in got:  # (the headers may come alone first)
    chunk = s.recv(4096)
    assert chunk, got
    got += chunk
s.close()
for _ in range(100):
    metrics = urllib.request.urlopen(url + "/metrics").read().decode()
    if "\ntern_batch_size 0\n" in metrics:
        break
    time.sleep(0.02)
assert "\ntern_batch_size 0\n" in metrics, "the row stayed taken"
used = tokens() - before
assert used < 250, f"the sequence ran {used} tokens after its client left"
print(f"serve: a client gone mid-stream freed its row after {used} of 250 tokens")
EOF

# The openai client, when its venv exists (tests/serve/setup_venv.sh; CI makes it).
py=${TERN_SERVE_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/tern/serve-venv}/bin/python
if [ -x "$py" ] && "$py" -c "import openai" 2>/dev/null; then
  # (every logit of the same greedy generation: the reference for the server's logprobs)
  "$tern" generate --model "$model" --prompt "And God said" --max-new-tokens 16 --greedy --threads 2 --json --top-logits 1024 \
    2>/dev/null > "$work/logits.json"
  "$py" "$repo/tests/serve/openai_client.py" "$url" "$expected" "$work/logits.json" "$encoders/bert-optimum/embeddings.json"
else
  echo "serve: openai client checks skipped (no venv: bash tests/serve/setup_venv.sh)"
fi

# SIGTERM: the server stops and says so.
kill -TERM "$server_pid"
wait "$server_pid"
grep -q "tern serve: stopped" "$work/main.log"

# An encoder folder as --model: embeddings alone (the dynamo export), completions refused naming why.
serve_model=$encoders/bert-dynamo start_server encoder
grep -q "embeddings bert-dynamo (32 dimensions, 48 tokens)" "$work/encoder.log"
check_embeddings "$encoders/bert-dynamo/embeddings.json"
post /v1/completions '{"prompt": "once"}' > /dev/null; expect_status 400; grep -q "is an encoder: this server answers /v1/embeddings only" "$work/body"
curl -s "$url/v1/models" | grep >/dev/null '"dimensions":32'
kill -TERM "$server_pid"
wait "$server_pid"

# A decoder's own embeddings (--embeddings): its final hidden state, last token or mean, normalized, equal to
# transformers' (tests/fixtures/exports/hidden_states.json, tools/exporters/make_hidden_goldens.py); it still generates.
check_decoder_embeddings() {  # POOLING
  python3 - "$url" "$repo/tests/fixtures/exports/hidden_states.json" "$1" <<'EOF'
import json, math, sys, urllib.request
url, golden, pooling = sys.argv[1], json.load(open(sys.argv[2]))["archs"]["llama"], sys.argv[3]
req = urllib.request.Request(url + "/v1/embeddings", json.dumps({"input": golden["prompts"]}).encode(), {"Content-Type": "application/json"})
got = json.load(urllib.request.urlopen(req))
worst = 0
for d, hidden in zip(got["data"], golden["last_hidden_state"]):
    rows = hidden[-1:] if pooling == "last" else hidden
    v = [sum(r[k] for r in rows) / len(rows) for k in range(len(rows[0]))]
    n = math.sqrt(sum(x * x for x in v))
    worst = max(worst, max(abs(a - b / n) for a, b in zip(d["embedding"], v)))
assert len(got["data"]) == 2 and worst < 1e-4, worst
print(f"serve --embeddings: {pooling}-token pooling of 2 prompts within {worst:.1e} of transformers' hidden state")
EOF
}
serve_model=$repo/tests/fixtures/exports/llama-optimum start_server decoder_embeddings --embeddings
grep -q "its embeddings (32 dimensions)" "$work/decoder_embeddings.log"
check_decoder_embeddings last
curl -s "$url/v1/models" | grep >/dev/null '"dimensions":32,"id":"llama-optimum"'
post /v1/completions '{"prompt": [1, 17, 200], "max_tokens": 4}' > /dev/null; expect_status 200
post /v1/embeddings '{"input": [[1, 400]]}' > /dev/null; expect_status 400; grep -q "token id 400 is outside the vocabulary" "$work/body"
kill -TERM "$server_pid"
wait "$server_pid"
serve_model=$repo/tests/fixtures/exports/llama-optimum start_server decoder_mean --embeddings --pooling mean
check_decoder_embeddings mean
kill -TERM "$server_pid"
wait "$server_pid"
if "$tern" serve "$repo/tests/fixtures/exports/llama-optimum" --embeddings --embedding-model "$encoders/bert-optimum" 2> "$work/both.log"; then
  echo "--embeddings with --embedding-model should be refused"; exit 1
fi
grep -q "choose one" "$work/both.log"

# A full queue: one row, no queue — of 4 requests sent at once, those arriving while another waits or runs
# get 429 with Retry-After; the others complete.
start_server busy --parallel 1 --queue 0
for i in 1 2 3 4; do
  curl -s -D "$work/headers$i" -o "$work/body$i" -w '%{http_code}' -H 'Content-Type: application/json' \
    --data-binary '{"prompt": "And God said", "max_tokens": 250, "temperature": 0}' "$url/v1/completions" > "$work/status$i" &
done
wait_jobs
busy=0
for i in 1 2 3 4; do
  case $(cat "$work/status$i") in
    200) ;;
    429) busy=$((busy + 1)); grep -qi '^retry-after: 1' "$work/headers$i"; grep -q "the server is busy" "$work/body$i" ;;
    *) echo "request $i: HTTP $(cat "$work/status$i")"; exit 1 ;;
  esac
done
[ $busy -ge 1 ] && [ $busy -le 3 ] || { echo "$busy of 4 requests got 429"; exit 1; }
kill -TERM "$server_pid"
wait "$server_pid"
echo "serve: a full queue answers 429 with Retry-After; SIGTERM stops the server"

# The deadline (--timeout 0.1 s): a request still queued or running when it passes is answered 504 then —
# streamed as an error event — and leaves the queue unrun; no answer comes much after its deadline.
start_server slow --parallel 1 --queue 16 --timeout 0.1 --threads 1 --no-prefix-cache
# (Each request takes ~75 ms here — a 103-token prompt, then 150 tokens, the model's 256 nearly full — so twelve
# on one row run into the deadline, also on a machine several times faster; --no-prefix-cache, or each would find
# the same prompt in the row and run in a third of that.)
prompt=$(python3 -c "print('And God said unto Moses, ' * 17)")  # 103 tokens
for i in $(seq 1 12); do
  stream=$([ $i = 12 ] && echo true || echo false)
  curl -s -o "$work/body$i" -w '%{http_code} %{time_total}' -H 'Content-Type: application/json' \
    --data-binary "{\"prompt\": \"$prompt\", \"max_tokens\": 150, \"temperature\": 0, \"stream\": $stream}" \
    "$url/v1/completions" > "$work/status$i" &
done
wait_jobs
late=0 timeouts=0
for i in $(seq 1 12); do
  read -r code seconds <<< "$(cat "$work/status$i")"
  python3 -c "import sys; sys.exit(float(sys.argv[1]) > 0.1 + 0.4)" "$seconds" || { echo "request $i answered after $seconds s"; late=1; }
  if [ $i = 12 ]; then  # streamed: 200, then either the whole text or the timeout error event, then [DONE]
    [ "$code" = 200 ] && grep -q 'data: \[DONE\]' "$work/body$i" || { echo "stream: HTTP $code: $(cat "$work/body$i")"; exit 1; }
    grep -q "ran past the server's timeout" "$work/body$i" && timeouts=$((timeouts + 1))
    continue
  fi
  case $code in
    200) ;;
    504) timeouts=$((timeouts + 1)); grep -q "ran past the server's timeout" "$work/body$i" ;;
    *) echo "request $i: HTTP $code: $(cat "$work/body$i")"; exit 1 ;;
  esac
done
[ $late = 0 ] && [ $timeouts -ge 1 ] || { echo "deadline: $timeouts timed out, late: $late"; exit 1; }
# (How many left the queue unrun is a race — a queued request's deadline passes after the running one's, and
# whether before its row is free depends on curl's arrivals against one decode step: on a fast machine none did,
# stop 90's run. test_continuous_batch.cpp proves the drop on the queue itself; here it is only counted.)
dropped=$(curl -s "$url/metrics" | awk '$1 == "tern_queue_dropped_total" {print $2}')
kill -TERM "$server_pid"
wait "$server_pid"
echo "serve: $timeouts of 12 requests past the 0.1 s deadline answered 504 within 0.4 s of it ($dropped never run)"

# Limits as flags, each refusal naming its flag and counted in /metrics (tern_refused_total{limit=...}): a prompt
# past --max-prompt-tokens, max_tokens past --max-tokens (and a request without max_tokens stopping there), a
# body past --max-body; a prompt still being tokenized when --timeout passes is answered 504 (the encoder asks
# for its deadline within a long word: 1 µs is over before the 1,024th merge).
start_server limits --max-prompt-tokens 20 --max-tokens 8 --max-body 4096
post /v1/completions "{\"prompt\": \"$(printf 'And God said %.0s' $(seq 1 10))\", \"max_tokens\": 4}" > /dev/null
expect_status 400; grep -q "at most 20 tokens (--max-prompt-tokens)" "$work/body"
post /v1/completions '{"prompt": "And God said", "max_tokens": 9}' > /dev/null
expect_status 400; grep -q "(--max-tokens)" "$work/body"
[ "$(post /v1/completions '{"prompt": "And God said", "temperature": 0}' | field 'd["usage"]["completion_tokens"]')" -le 8 ]
expect_status 200
head -c 5000 /dev/zero | tr '\0' 'a' > "$work/big"
curl -s -o "$work/body" -w '%{http_code}' --data-binary @"$work/big" "$url/v1/completions" > "$work/status"; expect_status 413
grep -q "larger than 4096 bytes (--max-body)" "$work/body"
curl -s "$url/metrics" > "$work/metrics"
for limit in max_prompt_tokens max_tokens max_body; do
  grep -q "^tern_refused_total{limit=\"$limit\"} 1$" "$work/metrics" || { echo "no refusal counted for $limit"; grep refused "$work/metrics"; exit 1; }
done
kill -TERM "$server_pid"; wait "$server_pid"
# --speculate: the same greedy text as a server without it (the limits server's answer above), the drafts counted.
start_server speculate --speculate ngram --parallel 2
spec_prompt='{"prompt": "And God said, Let there be light: and there was light. And God saw the light, that it was good. And God said, Let there be light: and there was", "max_tokens": 24, "temperature": 0}'
post /v1/completions "$spec_prompt" | field 'd["choices"][0]["text"]' > "$work/spec_text"
curl -s "$url/metrics" > "$work/metrics"
accepted=$(awk '/^tern_speculative_accepted_tokens_total/{print $2}' "$work/metrics")
[ "${accepted:-0}" -ge 1 ] || { echo "no drafts accepted"; grep speculative "$work/metrics"; exit 1; }
kill -TERM "$server_pid"; wait "$server_pid"
start_server plain --parallel 2
post /v1/completions "$spec_prompt" | field 'd["choices"][0]["text"]' | cmp - "$work/spec_text"
kill -TERM "$server_pid"; wait "$server_pid"
echo "serve: --speculate answers as a server without it, $accepted drafts accepted"
# --draft-model (the model drafting for itself): the same text, its drafts counted.
start_server draft --draft-model "$model" --parallel 2
post /v1/completions "$spec_prompt" | field 'd["choices"][0]["text"]' | cmp - "$work/spec_text"
curl -s "$url/metrics" > "$work/metrics"
accepted=$(awk '/^tern_speculative_accepted_tokens_total/{print $2}' "$work/metrics")
[ "${accepted:-0}" -ge 1 ] || { echo "no draft-model drafts accepted"; grep speculative "$work/metrics"; exit 1; }
kill -TERM "$server_pid"; wait "$server_pid"
echo "serve: --draft-model answers as a server without it, $accepted drafts accepted"
start_server tokenize --timeout 0.000001
word=$(python3 -c "print('andgodsaidletthereblight' * 160)")  # (one word of 3,840 letters: ~1,000 tokens, ~2,800 merges)
post /v1/completions "{\"prompt\": \"$word\", \"max_tokens\": 1}" > /dev/null
expect_status 504; grep -q "while its prompt was tokenized" "$work/body"
curl -s "$url/metrics" | grep >/dev/null '^tern_cancelled_total{reason="timeout"} 1$'
kill -TERM "$server_pid"; wait "$server_pid"
# --max-memory: a request whose KV cache at its last token would pass the cap is refused alone (400 naming the
# sizes, max_tokens and --window), before it runs — not a step failing later and ending every row with it — and the
# next request that fits is served. (SmolLM2-135M, context 8192: the default model's 256 positions fit any cap that
# loads it; skipped without it, as scripts/get-models.sh fetches it.)
if [ -d "$repo/models/smollm2-135m-instruct" ]; then
  serve_model=$repo/models/smollm2-135m-instruct start_server memory --max-memory 200M --parallel 2
  post /v1/completions '{"prompt": [1, 2, 3], "max_tokens": 8000}' > /dev/null
  expect_status 400
  grep -q "8000 new tokens after a prompt of 3 (2 rows) would hold .* more of KV cache at the last.*: the memory cap (--max-memory" "$work/body"
  [ "$(field 'd["error"]["param"]' < "$work/body")" = max_tokens ]
  [ "$(post /v1/completions '{"prompt": [1, 2, 3], "max_tokens": 4}' | field 'd["usage"]["completion_tokens"]')" = 4 ]
  curl -s "$url/metrics" | grep >/dev/null '^tern_refused_total{limit="max_memory"} 1$'
  echo "serve: a request past --max-memory refused alone (400), the next served"
  # The chat template, run: usage.prompt_tokens of each SmolLM2 conversation in tests/goldens/chat_templates.json is the
  # length of transformers' apply_chat_template ids (37 for one question: the template's default system prompt).
  python3 - "$url" "$repo/tests/goldens/chat_templates.json" <<'EOF2'
import json, sys, urllib.request
url, golden = sys.argv[1], json.load(open(sys.argv[2]))
n = 0
for c in golden["cases"]:
    if c["template"] != "smollm2-135m-instruct" or not c["context"]["add_generation_prompt"]:
        continue
    body = json.dumps({"messages": c["context"]["messages"], "max_tokens": 1, "temperature": 0}).encode()
    req = urllib.request.Request(url + "/v1/chat/completions", body, {"Content-Type": "application/json"})
    got = json.load(urllib.request.urlopen(req))["usage"]["prompt_tokens"]
    assert got == len(c["ids"]), (c["case"], got, len(c["ids"]))
    n += 1
assert n >= 3, n
print(f"serve: usage.prompt_tokens equals transformers' apply_chat_template on {n} SmolLM2 conversations")
EOF2
  if "$py" -c "import openai, jsonschema" 2> /dev/null; then
    "$py" "$repo/tests/serve/tool_calls.py" "$url" $([ "$sanitized" = --sanitized ] && echo 6)
  else
    echo "serve: tool calls with the openai client skipped (no venv: bash tests/serve/setup_venv.sh)"
  fi
  kill -TERM "$server_pid"; wait "$server_pid"
else
  echo "serve: --max-memory refusal skipped (models/smollm2-135m-instruct not fetched: scripts/get-models.sh)"
fi
echo "serve: --max-prompt-tokens, --max-tokens, --max-body refuse naming the flag (counted in /metrics); --timeout holds in tokenization"

# The prefix cache: a chat's second turn (the first's messages, its answer, a new question) and another question
# under the same system prompt feed only what an idle row does not hold, and answer as a server without it does.
chats() {  # prints each answer, one a line
  local sys="Thou art a scribe of the old books; answer in the words of the scriptures, plainly and at length, as it was written."
  local a1
  a1=$(post /v1/chat/completions "{\"messages\": [{\"role\": \"system\", \"content\": \"$sys\"}, {\"role\": \"user\", \"content\": \"And God said\"}], \"max_tokens\": 12, \"temperature\": 0}" |
       field 'd["choices"][0]["message"]["content"]')
  echo "$a1"
  post /v1/chat/completions "{\"messages\": [{\"role\": \"system\", \"content\": \"$sys\"}, {\"role\": \"user\", \"content\": \"And God said\"}, {\"role\": \"assistant\", \"content\": $(python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$a1")}, {\"role\": \"user\", \"content\": \"Let there be light\"}], \"max_tokens\": 12, \"temperature\": 0}" |
    field 'd["choices"][0]["message"]["content"]'
  post /v1/chat/completions "{\"messages\": [{\"role\": \"system\", \"content\": \"$sys\"}, {\"role\": \"user\", \"content\": \"In the beginning\"}], \"max_tokens\": 12, \"temperature\": 0}" |
    field 'd["choices"][0]["message"]["content"]'
}
start_server cached --parallel 2
with_cache=$(chats)
curl -s "$url/metrics" > "$work/metrics"
kill -TERM "$server_pid"; wait "$server_pid"
start_server uncached --parallel 2 --no-prefix-cache
without=$(chats)
kill -TERM "$server_pid"; wait "$server_pid"
[ "$with_cache" = "$without" ] || { printf 'with the prefix cache:\n%s\nwithout:\n%s\n' "$with_cache" "$without"; exit 1; }
hits=$(awk '$1 == "tern_prefix_cache_hits_total" {print $2}' "$work/metrics")
reused=$(awk '$1 == "tern_prefix_cache_reused_tokens_total" {print $2}' "$work/metrics")
[ "$hits" = 2 ] && [ "$reused" -ge 40 ] || { echo "prefix cache: $hits hits, $reused tokens reused"; grep prefix "$work/metrics"; exit 1; }
echo "serve: prefix cache: 2 of 3 chat requests reused $reused prompt tokens, answers equal to --no-prefix-cache's"

# response_format json_object: 100 choices sampled at temperature 1 (25 requests of n=4, 8 at a time, beside 4
# unconstrained ones), every one a JSON object, whole within max_tokens.
start_server json --parallel 8
for i in $(seq 1 25); do
  curl -s -o "$work/json$i" -H 'Content-Type: application/json' --data-binary \
    "{\"messages\": [{\"role\": \"user\", \"content\": \"Describe item $i as JSON.\"}], \"n\": 4, \"temperature\": 1, \"max_tokens\": $((8 + i % 40)), \"response_format\": {\"type\": \"json_object\"}}" \
    "$url/v1/chat/completions" &
  [ $((i % 2)) = 0 ] || curl -s -o /dev/null -H 'Content-Type: application/json' \
    --data-binary '{"prompt": "And God said", "max_tokens": 16, "temperature": 1}' "$url/v1/completions" &
  [ $((i % 8)) = 0 ] && wait_jobs
done
wait_jobs
python3 - "$work" <<'EOF'
import json, sys
objects = 0
for i in range(1, 26):
    with open(f"{sys.argv[1]}/json{i}") as f:
        body = json.load(f)
    assert "choices" in body, body
    for c in body["choices"]:
        assert isinstance(json.loads(c["message"]["content"]), dict), c
        objects += 1
assert objects == 100, objects
print(f"serve: json_object: {objects} choices at temperature 1, every one a JSON object")
EOF
# response_format json_schema: 100 more choices at temperature 1 (25 requests of n=4, three schemas in turn: nested
# objects through $defs, an array of enums with bounds, a nullable union), each one its schema takes — Python's
# jsonschema the judge (in the openai client's venv; without it, only parsed here).
cat > "$work/schemas.json" <<'EOF'
[{"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}, "pet": {"$ref": "#/$defs/Pet"}},
  "required": ["name", "age", "pet"], "additionalProperties": false,
  "$defs": {"Pet": {"type": "object", "properties": {"kind": {"enum": ["cat", "dog"]}, "legs": {"type": "number"}},
                    "required": ["kind", "legs"], "additionalProperties": false}}},
 {"type": "object", "properties": {"colors": {"type": "array", "items": {"enum": ["red", "green", "blue"]}, "minItems": 1, "maxItems": 3},
                                   "ok": {"type": "boolean"}}, "required": ["colors", "ok"], "additionalProperties": false},
 {"type": "object", "properties": {"note": {"anyOf": [{"type": "string"}, {"type": "null"}]}, "count": {"type": "integer"}},
  "required": ["note"]}]
EOF
for i in $(seq 1 25); do
  python3 -c "
import json, sys
schema = json.load(open(sys.argv[1]))[int(sys.argv[2]) % 3]
print(json.dumps({'messages': [{'role': 'user', 'content': 'Item %s as JSON.' % sys.argv[2]}], 'n': 4, 'temperature': 1, 'max_tokens': 64,
                  'response_format': {'type': 'json_schema', 'json_schema': {'name': 's', 'schema': schema, 'strict': True}}}))" \
    "$work/schemas.json" "$i" > "$work/schema_request$i"
  curl -s -o "$work/schema$i" -H 'Content-Type: application/json' --data-binary @"$work/schema_request$i" "$url/v1/chat/completions" &
  [ $((i % 8)) = 0 ] && wait_jobs
done
wait_jobs
judge=python3
"$py" -c "import jsonschema" 2>/dev/null && judge=$py
"$judge" - "$work" <<'EOF'
import json, sys
try:
    import jsonschema
except ImportError:
    jsonschema = None
schemas = json.load(open(f"{sys.argv[1]}/schemas.json"))
valid = 0
for i in range(1, 26):
    body = json.load(open(f"{sys.argv[1]}/schema{i}"))
    assert "choices" in body, body
    for c in body["choices"]:
        value = json.loads(c["message"]["content"])
        assert isinstance(value, dict), c
        if jsonschema:
            jsonschema.validate(value, schemas[i % 3])
        valid += 1
assert valid == 100, valid
print(f"serve: json_schema: {valid} choices at temperature 1, " +
      ("every one valid against its schema (jsonschema)" if jsonschema else "every one a JSON object (no jsonschema here to judge more)"))
EOF
kill -TERM "$server_pid"; wait "$server_pid"

# --api-key (here from $TERN_API_KEY): 401 without the key or with another, 200 with it, /health open; --cors-origin: a
# browser's preflight gets the methods and headers allowed, a response its origin (not another's); /v1/models/ID.
TERN_API_KEY=s3cret start_server keys --cors-origin "https://a.example, https://b.example"
auth() { curl -s -o "$work/body" -D "$work/headers" -w '%{http_code}' "$@" > "$work/status"; }
auth "$url/v1/models"; expect_status 401; grep -q '"code":"invalid_api_key"' "$work/body"; grep -qi '^www-authenticate: Bearer' "$work/headers"
auth -H "Authorization: Bearer s3crez" "$url/v1/models"; expect_status 401; grep -q "the API key is not this server's" "$work/body"
auth -H "Authorization: Bearer s3cret" -H 'Content-Type: application/json' --data-binary '{"prompt": "And God said", "max_tokens": 2}' \
  "$url/v1/completions"; expect_status 200
auth "$url/health"; expect_status 200
auth -X OPTIONS -H "Origin: https://b.example" -H "Access-Control-Request-Method: POST" \
  -H "Access-Control-Request-Headers: authorization, content-type" "$url/v1/chat/completions"; expect_status 204
grep -qi '^access-control-allow-origin: https://b.example' "$work/headers"
grep -qi '^access-control-allow-headers: Authorization, Content-Type' "$work/headers"
grep -qi '^access-control-allow-methods: GET, POST, OPTIONS' "$work/headers"
auth -H "Origin: https://a.example" -H "Authorization: Bearer s3cret" "$url/v1/models/default"; expect_status 200
grep -qi '^access-control-allow-origin: https://a.example' "$work/headers"; grep -q '"id":"default"' "$work/body"
auth -H "Origin: https://evil.example" -H "Authorization: Bearer s3cret" "$url/v1/models/other"; expect_status 404
if grep -qi '^access-control-allow-origin' "$work/headers"; then echo "an origin not listed was allowed"; exit 1; fi
grep -q '"code":"model_not_found"' "$work/body"
curl -s -H "Authorization: Bearer s3cret" "$url/metrics" | grep >/dev/null '^tern_refused_total{limit="api_key"} 2$'
grep -q "API key required" "$work/keys.log"
kill -TERM "$server_pid"; wait "$server_pid"
echo "serve: --api-key 401 without it (counted), 200 with it; --cors-origin preflight 204 and its origin named; /v1/models/ID"

# SIGTERM with requests running and queued (one row, n requests of one solo request's time T each): the server
# stops listening at once, runs what it can within --grace (3T, at least 0.5 s: sanitizer builds run T ~20x longer),
# answers the rest 503, and exits soon after the grace period; every client gets its whole answer or a clean JSON
# error — none a reset or an empty reply. n holds three times the work the 0.5 s before SIGTERM and the grace can
# run (at least 40, at most 400): a fixed 40 all finished in time where T was 0.03 s (stop 90's machine).
start_server solo --parallel 1 --threads 1
body="{\"prompt\": \"$prompt\", \"max_tokens\": 150, \"temperature\": 0}"
post /v1/completions "$body" > /dev/null; expect_status 200  # (warm)
solo=$(curl -s -o /dev/null -w '%{time_total}' -H 'Content-Type: application/json' --data-binary "$body" "$url/v1/completions")
kill -TERM "$server_pid"; wait "$server_pid"
grace=$(python3 -c "import sys; print('%g' % round(max(0.5, 3 * float(sys.argv[1])), 1))" "$solo")
n=$(python3 -c "import math, sys; t, g = map(float, sys.argv[1:]); print(min(400, max(40, math.ceil(3 * (0.5 + g) / t))))" "$solo" "$grace")
start_server grace --parallel 1 --queue "$n" --grace "$grace" --threads 1
for i in $(seq 1 "$n"); do
  curl -s -o "$work/grace$i" -w '%{http_code}' -H 'Content-Type: application/json' --data-binary "$body" \
    "$url/v1/completions" > "$work/grace_status$i" &
done
sleep 0.5
t0=$(date +%s.%N)
kill -TERM "$server_pid"; wait "$server_pid"
took=$(python3 -c "import sys; print(round(float(sys.argv[2]) - float(sys.argv[1]), 2))" "$t0" "$(date +%s.%N)")
wait_jobs
done_ok=0 refused=0
for i in $(seq 1 "$n"); do
  case $(cat "$work/grace_status$i") in
    200) done_ok=$((done_ok + 1)); field 'd["choices"][0]["finish_reason"]' < "$work/grace$i" > /dev/null ;;
    503) refused=$((refused + 1)); grep -q "the server stopped before this request finished" "$work/grace$i" ;;
    *) echo "request $i during SIGTERM: HTTP $(cat "$work/grace_status$i"): $(cat "$work/grace$i")"; exit 1 ;;
  esac
done
python3 -c "import sys; sys.exit(not float(sys.argv[1]) < float(sys.argv[2]) + 2)" "$took" "$grace" ||
  { echo "SIGTERM: exited $took s after it (--grace $grace)"; exit 1; }
[ $done_ok -ge 1 ] && [ $refused -ge 1 ] || { echo "SIGTERM: $done_ok finished, $refused refused (--grace $grace, one request $solo s)"; exit 1; }
grep -q "stopping; running requests get $grace s" "$work/grace.log" || { echo "SIGTERM: $(cat "$work/grace.log")"; exit 1; }
grep -q "tern serve: stopped" "$work/grace.log"
echo "serve: SIGTERM with $n requests in: exit after $took s (--grace $grace), $done_ok answered whole, $refused answered 503"

# The model file truncated under the server — while a long answer streams (its reads past the new end fault:
# core/mapped_file.h turns that into a failed run, not SIGBUS), then between requests: the server lives on,
# refuses completions with 503 naming the file, and /health says 503 so a load balancer takes it out.
cp -r "$model" "$work/truncated-model"
serve_model=$work/truncated-model start_server truncated --parallel 1
post /v1/completions '{"prompt": "And God said", "max_tokens": 4, "temperature": 0}' > /dev/null; expect_status 200
(for i in $(seq 1 40); do  # answers back to back (~50 ms each), so the cut lands in one
  curl -s -N -H 'Content-Type: application/json' --data-binary '{"prompt": "And God said", "max_tokens": 240, "temperature": 1, "stream": true}' \
    "$url/v1/completions" > "$work/truncated-stream$i"
done) &
stream_pid=$!
sleep 0.3
truncate -s 100000 "$work/truncated-model/model.onnx"
wait "$stream_pid" || true
kill -0 "$server_pid" || { echo "the server died when its model file was truncated:"; cat "$work/truncated.log"; exit 1; }
post /v1/completions '{"prompt": "And God said", "max_tokens": 4}' > /dev/null; expect_status 503
grep -q "model file '.*truncated-model/model.onnx' changed under this server (truncated or written over)" "$work/body"
[ "$(curl -s -o /dev/null -w '%{http_code}' "$url/health")" = 503 ]
kill "$server_pid"
echo "serve: its model file truncated mid-answer: the server lives, answers 503 naming the file, /health 503"

# Two replicas behind nginx: requests spread over both and all complete (replicas share nothing).
nginx_bin=$(command -v nginx || ls /usr/sbin/nginx 2>/dev/null || true)
if [ -z "$nginx_bin" ]; then
  echo "serve: nginx replicas skipped (no nginx: scripts/setup.sh --ci installs nginx-light)"
  exit 0
fi
start_server replica1 --parallel 2; url1=$url; pid1=$server_pid
start_server replica2 --parallel 2; url2=$url; pid2=$server_pid
port=$(python3 -c "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
mkdir -p "$work/nginx"
cat > "$work/nginx/nginx.conf" <<EOF
daemon off;
worker_processes 1;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log;
events { worker_connections 256; }
http {
  access_log off;
  client_body_temp_path $work/nginx/body;
  proxy_temp_path $work/nginx/proxy;
  upstream tern { least_conn; server ${url1#http://}; server ${url2#http://}; }
  server {
    listen 127.0.0.1:$port;
    location / { proxy_pass http://tern; proxy_http_version 1.1; proxy_buffering off; proxy_read_timeout 600s; }
  }
}
EOF
"$nginx_bin" -c "$work/nginx/nginx.conf" -p "$work/nginx" &
pids+=($!)
nginx_pid=$!
url=http://127.0.0.1:$port
for _ in $(seq 1 50); do curl -s "$url/health" > /dev/null && break; sleep 0.1; done
for i in $(seq 1 8); do
  (curl -s -H 'Content-Type: application/json' --data-binary "{\"prompt\": \"And the LORD spake $i\", \"max_tokens\": 12, \"temperature\": 0}" \
     "$url/v1/completions" | field 'd["choices"][0]["text"]' > "$work/lb$i") &
done
wait_jobs() { for j in $(jobs -p); do case " $pid1 $pid2 $nginx_pid " in *" $j "*) ;; *) wait "$j" ;; esac; done; }
wait_jobs
for i in $(seq 1 8); do cmp -s "$work/solo$i" "$work/lb$i" || { echo "request $i through nginx differs"; exit 1; }; done
served1=$(curl -s "$url1/metrics" | awk '/^tern_requests_total\{endpoint="\/v1\/completions",status="200"\}/{print $2}')
served2=$(curl -s "$url2/metrics" | awk '/^tern_requests_total\{endpoint="\/v1\/completions",status="200"\}/{print $2}')
[ "${served1:-0}" -ge 1 ] && [ "${served2:-0}" -ge 1 ] && [ $((served1 + served2)) -eq 8 ] ||
  { echo "nginx spread: replica 1 served ${served1:-0}, replica 2 ${served2:-0}"; exit 1; }
kill "$nginx_pid" "$pid1" "$pid2"
echo "serve: two replicas behind nginx served $served1 + $served2 of 8 requests, each equal to its solo answer"
