"""Tool calling against tern serve as the openai Python client runs it (SmolLM2-135M-Instruct: its template renders
tool messages; the forced calls are decoded under the tool's schema): tools -> tool_calls -> the tool's result -> an
answer, streamed and not; then 50 forced calls at temperature 1 (CALLS when given: a sanitizer build's run takes 6),
each checked against its tool's JSON schema.
Usage: tool_calls.py BASE_URL [CALLS]"""
import json
import pathlib
import sys

import jsonschema
import openai

client = openai.OpenAI(base_url=sys.argv[1] + "/v1", api_key="unused", max_retries=0)
CALLS = int(sys.argv[2]) if len(sys.argv) > 2 else 50
model = client.models.list().data[0].id
# (the tool the chat-template goldens render too: tools/exporters/make_chat_template_goldens.py)
WEATHER = json.load(open(pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "tools" / "get_weather.json"))
TIME = {"type": "function", "function": {"name": "get_time", "parameters": {
    "type": "object", "properties": {"zone": {"type": "string"}}, "required": ["zone"]}}}
messages = [{"role": "user", "content": "What is the weather in Paris?"}]

# 1. A forced call: finish_reason tool_calls, no content, arguments that parse against the schema.
r = client.chat.completions.create(model=model, messages=messages, tools=[WEATHER, TIME], max_tokens=64, temperature=0,
                                   tool_choice={"type": "function", "function": {"name": "get_weather"}})
choice = r.choices[0]
assert choice.finish_reason == "tool_calls" and choice.message.content is None, choice
call = choice.message.tool_calls[0]
assert call.type == "function" and call.function.name == "get_weather" and call.id.startswith("call_"), call
jsonschema.validate(json.loads(call.function.arguments), WEATHER["function"]["parameters"])

# 2. The same streamed: the deltas, accumulated as clients do, give one whole call.
streamed = {}
finish = None
for ch in client.chat.completions.create(model=model, messages=messages, tools=[WEATHER], max_tokens=64, temperature=0,
                                         tool_choice="required", stream=True):
    if not ch.choices:
        continue
    d = ch.choices[0].delta
    for tc in d.tool_calls or []:
        slot = streamed.setdefault(tc.index, {"name": "", "arguments": ""})
        slot["name"] += tc.function.name or ""
        slot["arguments"] += tc.function.arguments or ""
    finish = ch.choices[0].finish_reason or finish
assert finish == "tool_calls" and list(streamed) == [0] and streamed[0]["name"] == "get_weather", (finish, streamed)
jsonschema.validate(json.loads(streamed[0]["arguments"]), WEATHER["function"]["parameters"])

# 3. The tool's result goes back; the answer is text (tool_choice none: the tools are not offered again).
messages.append({"role": "assistant", "content": None, "tool_calls": [
    {"id": call.id, "type": "function", "function": {"name": "get_weather", "arguments": call.function.arguments}}]})
messages.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps({"temperature": 21, "sky": "clear"})})
answer = client.chat.completions.create(model=model, messages=messages, tools=[WEATHER], tool_choice="none",
                                        max_tokens=24, temperature=0)
assert answer.choices[0].message.content and not answer.choices[0].message.tool_calls, answer
assert answer.usage.prompt_tokens > r.usage.prompt_tokens, (answer.usage, r.usage)

# 4. CALLS forced calls sampled at temperature 1 (CALLS / 2 requests of n=2, in turn naming get_weather, naming
# get_time, and "required" over both: the name picks the tool whose schema its arguments are decoded under): every
# one parses and fits its tool's schema.
parsed = 0
for seed in range(CALLS // 2):
    choice = [{"type": "function", "function": {"name": "get_weather"}},
              {"type": "function", "function": {"name": "get_time"}}, "required"][seed % 3]
    r = client.chat.completions.create(model=model, messages=messages[:1], tools=[WEATHER, TIME], max_tokens=96,
                                       tool_choice=choice, temperature=1.0, n=2, seed=seed)
    for c in r.choices:
        assert c.finish_reason == "tool_calls", c
        for tc in c.message.tool_calls:
            tool = {"get_weather": WEATHER, "get_time": TIME}[tc.function.name]
            jsonschema.validate(json.loads(tc.function.arguments), tool["function"]["parameters"])
            parsed += 1
assert parsed == CALLS, parsed
print(f"serve: the openai client's tool flow (forced call, streamed call, tool result, answer); {parsed} forced calls "
      "at temperature 1 all fit their schemas")
