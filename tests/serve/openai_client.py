"""tern serve as the openai Python client calls it: completion, chat, both streamed, logprobs, and an error.
Usage: openai_client.py BASE_URL EXPECTED_GREEDY_TEXT LOGITS_JSON EMBEDDINGS_JSON   (the text of a 16-token greedy
completion of "And God said", which tests/cli_serve.sh takes from `tern generate`, and that run's `--json --top-logits
1024`: every logit of each step, whose log-softmax the server's logprobs must equal; the --embedding-model's golden,
tools/exporters/make_encoder_fixtures.py's embeddings.json)."""
import json
import math
import sys

import openai

base, expected = sys.argv[1], sys.argv[2]
with open(sys.argv[3]) as f:
    reference = json.load(f)
steps = reference["top_logits"][0]  # [step] → [[token, logit], ...] over the whole vocabulary
prompt_ids = reference["tokens"][0][:-len(steps)]  # "And God said" as tern tokenized it (BOS first)
client = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0)

models = client.models.list()
model = models.data[0].id
embedding_model = models.data[1].id
assert client.models.retrieve(model).id == model
try:
    client.models.retrieve("no-such-model")
    raise SystemExit("an unknown model was found")
except openai.NotFoundError as e:
    assert e.code == "model_not_found", e

c = client.completions.create(model=model, prompt="And God said", max_tokens=16, temperature=0)
assert c.choices[0].text == expected, (c.choices[0].text, expected)
assert c.choices[0].finish_reason == "length" and c.usage.completion_tokens == 16, c

# Prompts as token ids, and a list of prompts (text and ids), n choices each: choice p·n + i.
c = client.completions.create(model=model, prompt=prompt_ids, max_tokens=16, temperature=0)
assert c.choices[0].text == expected and c.usage.prompt_tokens == len(prompt_ids), c
c = client.completions.create(model=model, prompt=["And God said", prompt_ids], n=2, max_tokens=16, temperature=0)
assert [x.index for x in c.choices] == [0, 1, 2, 3] and all(x.text == expected for x in c.choices), c
assert c.usage.prompt_tokens == 2 * len(prompt_ids) and c.usage.completion_tokens == 4 * 16, c.usage  # (prompts once each)
c = client.completions.create(model=model, prompt=prompt_ids, max_tokens=4, temperature=0, echo=True)
assert c.choices[0].text.startswith("And God said"), c

streamed = "".join(ch.choices[0].text for ch in client.completions.create(
    model=model, prompt="And God said", max_tokens=16, temperature=0, stream=True) if ch.choices)
assert streamed == expected, (streamed, expected)

chat = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "And God said"}],
                                      max_tokens=12, temperature=0)
text = chat.choices[0].message.content
assert chat.choices[0].message.role == "assistant" and len(text) > 0 and chat.usage.completion_tokens == 12, chat

parts, usage = [], None
for ch in client.chat.completions.create(model=model, messages=[{"role": "user", "content": "And God said"}],
                                         max_tokens=12, temperature=0, stream=True,
                                         stream_options={"include_usage": True}):
    if ch.choices:
        parts.append(ch.choices[0].delta.content or "")
    if ch.usage:
        usage = ch.usage
assert "".join(parts) == text, ("".join(parts), text)
assert usage is not None and usage.completion_tokens == 12, usage

# logprobs: each token's log-probability and the 5 likeliest, equal to the log-softmax of tern generate's logits.
lp = client.completions.create(model=model, prompt="And God said", max_tokens=16, temperature=0, logprobs=5).choices[0].logprobs
assert len(lp.token_logprobs) == 16 == len(steps), lp
worst = 0.0
for k, step in enumerate(steps):
    top = max(l for _, l in step)
    log_z = top + math.log(sum(math.exp(l - top) for _, l in step))
    chosen = step[0]  # greedy: the highest logit
    worst = max(worst, abs(lp.token_logprobs[k] - (chosen[1] - log_z)))
    want = sorted(step, key=lambda t: (-t[1], t[0]))[:5]
    got = sorted(lp.top_logprobs[k].values(), reverse=True)  # (a JSON object: keys are token texts, unordered)
    assert len(got) == 5, lp.top_logprobs[k]
    for (_, l), g in zip(want, got):
        worst = max(worst, abs(g - (l - log_z)))
assert worst <= 1e-5, f"logprobs differ from the log-softmax of tern generate's logits by {worst}"
assert "".join(lp.tokens) == expected, (lp.tokens, expected)
streamed = []
for ch in client.completions.create(model=model, prompt="And God said", max_tokens=16, temperature=0, logprobs=5, stream=True):
    if ch.choices and ch.choices[0].logprobs:
        streamed += ch.choices[0].logprobs.token_logprobs
assert streamed == lp.token_logprobs, (streamed, lp.token_logprobs)
chat_lp = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "And God said"}], max_tokens=12,
                                         temperature=0, logprobs=True, top_logprobs=3).choices[0].logprobs.content
assert len(chat_lp) == 12 and all(len(t.top_logprobs) == 3 and t.logprob == t.top_logprobs[0].logprob for t in chat_lp), chat_lp
assert "".join(t.token for t in chat_lp) == text and bytes(b for t in chat_lp for b in t.bytes).decode() == text, chat_lp
streamed = []
for ch in client.chat.completions.create(model=model, messages=[{"role": "user", "content": "And God said"}], max_tokens=12,
                                         temperature=0, logprobs=True, top_logprobs=3, stream=True):
    if ch.choices and ch.choices[0].logprobs:
        streamed += ch.choices[0].logprobs.content
assert [t.logprob for t in streamed] == [t.logprob for t in chat_lp], streamed
print(f"openai client: logprobs within {worst:.1e} of the log-softmax of tern generate's logits, streamed and not")

try:
    client.completions.create(model=model, prompt="x", temperature=7)
    raise SystemExit("temperature 7 was accepted")
except openai.BadRequestError as e:
    assert "'temperature' must be between 0 and 2" in str(e), e

# Embeddings: the client asks for base64 unless told (and decodes it); floats when asked; token ids as input.
with open(sys.argv[4]) as f:
    golden = json.load(f)["cases"]
for fmt in ({}, {"encoding_format": "float"}):
    got = client.embeddings.create(model=embedding_model, input=[c["text"] for c in golden], **fmt)
    assert got.model == embedding_model and got.usage.prompt_tokens == sum(len(c["ids"]) for c in golden), got.usage
    worst = max(abs(a - b) for d, c in zip(got.data, golden) for a, b in zip(d.embedding, c["batched"]))
    assert worst < 1e-4, (fmt, worst)
one = client.embeddings.create(model=embedding_model, input=golden[0]["ids"]).data[0].embedding
assert max(abs(a - b) for a, b in zip(one, golden[0]["embedding"])) < 1e-4
assert client.models.retrieve(embedding_model).id == embedding_model
print(f"openai client: embeddings within {worst:.1e} of ONNX Runtime's, base64 and float, text and token ids")

# Structured output as the client's parse() sends it: a Pydantic model turned into a strict json_schema ($defs, an
# enum from a Literal, a nullable field); the answer parses into the model.
from typing import Literal, Optional

import pydantic


class Pet(pydantic.BaseModel):
    kind: Literal["cat", "dog"]
    legs: int


class Person(pydantic.BaseModel):
    name: str
    pets: list[Pet]
    note: Optional[str]


for seed in range(4):
    parsed = client.chat.completions.parse(model=model, messages=[{"role": "user", "content": "A person as JSON."}],
                                           response_format=Person, temperature=1, seed=seed, max_tokens=96)
    person = parsed.choices[0].message.parsed
    assert isinstance(person, Person), parsed
print("openai client: chat.completions.parse(response_format=a Pydantic model) parses into the model, 4 of 4")

print("openai client: completion, chat, both streamed, embeddings, json_schema, and a 400 — as tern generate gives them")
