"""A chat loop on tern's Python package, written as onnxruntime-genai's examples are (Model, Tokenizer,
GeneratorParams, Generator). Each line read is a user turn; the answer streams back. Ctrl-D quits.

    pip install .                      (from the repository; scripts/setup.sh first on a fresh machine)
    python examples/python/chat.py [--model DIR] [--max-new-tokens N] [--threads N]
"""
import argparse
import pathlib
import sys

import tern

parser = argparse.ArgumentParser()
parser.add_argument("--model", default=pathlib.Path(__file__).resolve().parents[2] / "models" / "default")
parser.add_argument("--max-new-tokens", type=int, default=120)
parser.add_argument("--threads", type=int, default=0)
args = parser.parse_args()

model = tern.Model(args.model, threads=args.threads)
tokenizer = tern.Tokenizer(model)
messages = []
print("> ", end="", flush=True)
for line in sys.stdin:
    messages.append({"role": "user", "content": line.strip()})
    prompt = tokenizer.encode_chat(messages)  # the whole conversation in the model's chat template
    params = tern.GeneratorParams(model)
    params.set_search_options(max_length=len(prompt) + args.max_new_tokens)
    generator = tern.Generator(model, params)
    generator.append_tokens(prompt)
    stream, answer = tokenizer.create_stream(prompt), ""
    while not generator.is_done():
        generator.generate_next_token()
        piece = stream.decode(generator.get_next_tokens()[0])
        print(piece, end="", flush=True)
        answer += piece
    answer += stream.flush()
    messages.append({"role": "assistant", "content": answer})
    print("\n> ", end="", flush=True)
