#!/usr/bin/env python3
"""Goldens for tern's Jinja interpreter: real chat templates (tests/fixtures/chat_templates/) rendered by
transformers' own apply_chat_template over conversations that reach their branches — system prompts, several
turns, no generation prompt, tools, tool calls and results, list contents, thinking switches — written to
tests/goldens/chat_templates.json as {template, context, text, ids, tokenizer}: the prompt ids too, through the
model's own tokenizer where the repository's models/ has it (SmolLM2 and Gemma-3, from scripts/get-models.sh), else
through a small tokenizer of the family's kind made here (tests/fixtures/chat_tokenizers/NAME: the family's
pre-tokenizer, normalizer and special tokens, BPE merges trained on this file's conversations — no hub is
reachable for the real vocabularies): Qwen3's and Llama 3's byte-level BPE, Phi-3.5's SentencePiece BPE with
byte fallback.

    ~/.cache/tern/venv-current/bin/python tools/exporters/make_chat_template_goldens.py
"""
import json
import pathlib

import tokenizers
import transformers
from tokenizers import Regex, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

ROOT = pathlib.Path(__file__).resolve().parents[2]
TEMPLATES = ROOT / "tests" / "fixtures" / "chat_templates"

FAMILY_TOKENIZERS = ROOT / "tests" / "fixtures" / "chat_tokenizers"
# template file -> (special tokens, the tokenizer folder (from the repository's root) whose ids are checked)
MODELS = {
    "smollm2-135m-instruct": ({"bos_token": "<|im_start|>", "eos_token": "<|im_end|>"}, "models/smollm2-135m-instruct"),
    "gemma-3": ({"bos_token": "<bos>", "eos_token": "<eos>"}, "models/gemma-3-270m"),
    "qwen3-0.6b": ({"bos_token": None, "eos_token": "<|im_end|>"}, "tests/fixtures/chat_tokenizers/qwen3"),
    "phi-3.5-mini-instruct": ({"bos_token": "<s>", "eos_token": "<|endoftext|>"}, "tests/fixtures/chat_tokenizers/phi-3.5"),
    "llama-3.2-3b-instruct": ({"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}, "tests/fixtures/chat_tokenizers/llama-3"),
}
# The families' added tokens (their real tokenizers' chat and tool markers) and pre-tokenizing regex.
QWEN_SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>", "<think>", "</think>",
                "<tool_response>", "</tool_response>"]
LLAMA3_SPECIAL = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",
                  "<|eom_id|>", "<|python_tag|>"]
PHI_SPECIAL = ["<|endoftext|>", "<|assistant|>", "<|system|>", "<|end|>", "<|user|>"]
SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"
         r"\s+(?!\S)|\s+")

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


def corpus():
    """What the family tokenizers' merges are trained on: this file's conversations and tool, and a story."""
    texts = [(ROOT / "tests" / "fixtures" / "story.txt").read_text(), json.dumps(WEATHER), json.dumps(CALL)]
    for _, messages, _ in CONVERSATIONS + TOOL_CONVERSATIONS:
        texts += [m["content"] for m in messages if isinstance(m["content"], str)]
    return texts * 4


def make_family_tokenizer(folder, kind, special):
    """A tokenizer.json of the family's kind: byte-level BPE (Qwen2/3, Llama 3) or SentencePiece BPE with byte
    fallback (Llama 2, Phi-3), 400-odd merges, its chat markers as added special tokens."""
    if kind == "byte_level":
        tok = tokenizers.Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(SPLIT), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=700, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
        tok.train_from_iterator(corpus(), trainer)
    else:
        tok = tokenizers.Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
        tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
        tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
                                         decoders.Strip(" ", 1, 0)])
        trainer = trainers.BpeTrainer(vocab_size=500, special_tokens=["<unk>", "<s>", "</s>"], show_progress=False)
        tok.train_from_iterator(corpus(), trainer)
        doc = json.loads(tok.to_str())  # the 256 byte tokens, after the trained vocabulary (as SentencePiece has them)
        vocab = doc["model"]["vocab"]
        for b in range(256):
            vocab.setdefault(f"<0x{b:02X}>", len(vocab))
        tok = tokenizers.Tokenizer.from_str(json.dumps(doc))
    tok.add_special_tokens(special)
    (ROOT / folder).mkdir(parents=True, exist_ok=True)
    tok.save(str(ROOT / folder / "tokenizer.json"))


def main():
    make_family_tokenizer(MODELS["qwen3-0.6b"][1], "byte_level", QWEN_SPECIAL)
    make_family_tokenizer(MODELS["llama-3.2-3b-instruct"][1], "byte_level", LLAMA3_SPECIAL)
    make_family_tokenizer(MODELS["phi-3.5-mini-instruct"][1], "sentencepiece", PHI_SPECIAL)
    out = []
    for name, label, messages, extra in cases():
        special, folder = MODELS[name]
        template = (TEMPLATES / f"{name}.jinja").read_text()
        tok = PreTrainedTokenizerFast(tokenizer_file=str(ROOT / folder / "tokenizer.json"))
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
