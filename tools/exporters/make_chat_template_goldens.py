#!/usr/bin/env python3
"""Goldens for tern's Jinja interpreter: real chat templates (tests/fixtures/chat_templates/) rendered by
transformers' own apply_chat_template over conversations that reach their branches — system prompts, several
turns, no generation prompt, tools, tool calls and results, list contents, thinking switches — written to
tests/goldens/chat_templates.json as {template, context, text[, ids, tokenizer]}. Where the model's tokenizer
is in the repository's models/ (SmolLM2 and Gemma-3, from scripts/get-models.sh), also the prompt ids.

    ~/.cache/tern/venv-current/bin/python tools/exporters/make_chat_template_goldens.py
"""
import json
import pathlib

import transformers
from transformers import PreTrainedTokenizerFast

ROOT = pathlib.Path(__file__).resolve().parents[2]
TEMPLATES = ROOT / "tests" / "fixtures" / "chat_templates"

# template file -> (special tokens, the tokenizer folder under models/ whose ids are checked, or None)
MODELS = {
    "smollm2-135m-instruct": ({"bos_token": "<|im_start|>", "eos_token": "<|im_end|>"}, "smollm2-135m-instruct"),
    "gemma-3": ({"bos_token": "<bos>", "eos_token": "<eos>"}, "gemma-3-270m"),
    "qwen3-0.6b": ({"bos_token": None, "eos_token": "<|im_end|>"}, None),
    "phi-3.5-mini-instruct": ({"bos_token": "<s>", "eos_token": "<|endoftext|>"}, None),
    "llama-3.2-3b-instruct": ({"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}, None),
}

WEATHER = json.loads((ROOT / "tests" / "fixtures" / "tools" / "get_weather.json").read_text())  # (tests/serve/tool_calls.py's too)
CALL = {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}}

CONVERSATIONS = [
    ("one question", [{"role": "user", "content": "What is the capital of France?"}], {}),
    ("system and turns", [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Hi!"},
        {"role": "assistant", "content": "Hello. "},
        {"role": "user", "content": "  Name a prime \"number\" — any, 'please'.\n"},
    ], {}),
    ("no generation prompt", [
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "4"},
    ], {"add_generation_prompt": False}),
    ("unicode", [{"role": "user", "content": "Grüße, 世界! 🙂 Tab\there."}], {}),
]
TOOL_CONVERSATIONS = [
    ("tools offered", [{"role": "user", "content": "Weather in Paris?"}], {"tools": [WEATHER]}),
    ("tool call and result", [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [CALL]},
        {"role": "tool", "content": "{\"temperature\": 21}"},
    ], {"tools": [WEATHER]}),
]


def cases():
    for name in MODELS:
        convs = list(CONVERSATIONS)
        if name in ("qwen3-0.6b", "llama-3.2-3b-instruct"):
            convs += TOOL_CONVERSATIONS
        if name == "qwen3-0.6b":
            convs.append(("thinking off", [{"role": "user", "content": "Quick: 3*3?"}], {"enable_thinking": False}))
            convs.append(("earlier thinking dropped", [
                {"role": "user", "content": "1+1?"},
                {"role": "assistant", "content": "<think>\nsmall sum\n</think>\n\n2"},
                {"role": "user", "content": "And 2+2?"},
            ], {}))
        if name == "gemma-3":
            convs.append(("content parts", [
                {"role": "system", "content": [{"type": "text", "text": "Answer in French."}]},
                {"role": "user", "content": [{"type": "text", "text": " Hello "}, {"type": "text", "text": "there"}]},
            ], {}))
        for label, messages, extra in convs:
            yield name, label, messages, extra


def main():
    out = []
    for name, label, messages, extra in cases():
        special, folder = MODELS[name]
        template = (TEMPLATES / f"{name}.jinja").read_text()
        tok_dir = ROOT / "models" / (folder or "smollm2-135m-instruct")
        tok = PreTrainedTokenizerFast(tokenizer_file=str(tok_dir / "tokenizer.json"))
        tok.chat_template = template
        for k, v in special.items():
            if v is not None:
                setattr(tok, k, v)
        kwargs = dict(extra)
        add_gen = kwargs.pop("add_generation_prompt", True)
        tools = kwargs.pop("tools", None)
        kwargs.setdefault("date_string", "26 Jul 2024")  # Llama 3.2 dates its system turn (strftime_now otherwise)
        text = tok.apply_chat_template(messages, tools=tools, add_generation_prompt=add_gen, tokenize=False, **kwargs)
        context = {"messages": messages, "tools": tools, "add_generation_prompt": add_gen, **special, **kwargs}
        case = {"template": name, "case": label, "context": context, "text": text}
        if folder:
            enc = tok.apply_chat_template(messages, tools=tools, add_generation_prompt=add_gen, tokenize=True, **kwargs)
            case["ids"] = list(enc["input_ids"] if isinstance(enc, dict) or hasattr(enc, "keys") else enc)
            case["tokenizer"] = folder
        out.append(case)
    path = ROOT / "tests" / "goldens" / "chat_templates.json"
    doc = {"made_with": f"transformers {transformers.__version__}", "cases": out}
    path.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {len(out)} cases to {path}")


if __name__ == "__main__":
    main()
