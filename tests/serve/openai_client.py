"""tern serve as the openai Python client calls it: completion, chat, both streamed, and an error.
Usage: openai_client.py BASE_URL EXPECTED_GREEDY_TEXT   (the text of a 16-token greedy completion of
"And God said", which tests/cli_serve.sh takes from `tern generate`)."""
import sys

import openai

base, expected = sys.argv[1], sys.argv[2]
client = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0)

models = client.models.list()
model = models.data[0].id

c = client.completions.create(model=model, prompt="And God said", max_tokens=16, temperature=0)
assert c.choices[0].text == expected, (c.choices[0].text, expected)
assert c.choices[0].finish_reason == "length" and c.usage.completion_tokens == 16, c

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

try:
    client.completions.create(model=model, prompt="x", temperature=7)
    raise SystemExit("temperature 7 was accepted")
except openai.BadRequestError as e:
    assert "'temperature' must be between 0 and 2" in str(e), e

print("openai client: completion, chat, both streamed, and a 400 — as tern generate gives them")
