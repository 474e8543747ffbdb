# tern.Model / Tokenizer / Generator against ONNX Runtime's own results: greedy tokens and prefill logits from
# tools/ort/greedy_goldens.mjs (onnxruntime), tokenizations from @huggingface/tokenizers, chat prompts from the
# models' Jinja templates; the one-call generate() and the C example's text; sampling and its errors.
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import tern
from conftest import REPO, SHARED

GOLDENS = REPO / "tests" / "goldens"
DEFAULT = REPO / "models" / "default"
# (golden name, model folder, logits tolerance) — as tests/test_ort_goldens.cpp.
MODELS = [
    ("llama-gqa-torch", REPO / "tests" / "fixtures" / "llama-gqa-torch", 1e-3),
    ("llama-gqa-opset23", REPO / "tests" / "fixtures" / "llama-gqa-opset23", 1e-3),
    ("llama-gqa-int4", REPO / "tests" / "fixtures" / "llama-gqa-int4", 1e-3),
    ("llama-gqa-static24", REPO / "tests" / "fixtures" / "llama-gqa-static24", 1e-4),
    ("llama-gqa-msft", REPO / "tests" / "fixtures" / "llama-gqa-msft", 1e-4),
    ("tiny-random-LlamaForCausalLM-fp16", SHARED / "models" / "ort-genai" / "tiny-random-LlamaForCausalLM-fp16", 2e-2),
    # GPT-2's past_N: its attention keeps the graph's own cache (no ring), fed back step by step.
    ("tiny-random-gpt2-fp32", SHARED / "models" / "ort-genai" / "tiny-random-gpt2-fp32", 1e-3),
]


def model_or_skip(folder, **kw):
    if not folder.is_dir():
        pytest.skip(f"{folder} not found (shared data lives at ../shared)")
    return tern.Model(folder, threads=2, **kw)


@pytest.mark.parametrize("name,folder,tolerance", MODELS, ids=[m[0] for m in MODELS])
def test_greedy_tokens_and_logits_are_onnxruntimes(name, folder, tolerance):
    """Each prompt alone gives ONNX Runtime's greedy tokens (its goldens ran the prompts as one left-padded
    batch), and the logits after the prompt are ORT's within the C++ suite's tolerance."""
    model = model_or_skip(folder)
    golden = json.loads((GOLDENS / name / "greedy.json").read_text())
    ort_logits = np.fromfile(GOLDENS / name / "prefill_logits.f32", dtype=np.float32).reshape(len(golden["prompts"]), -1)
    for prompt, expected, logits in zip(golden["prompts"], golden["tokens"], ort_logits):
        params = tern.GeneratorParams(model)
        params.set_search_options(max_length=len(prompt) + golden["max_new_tokens"])
        generator = tern.Generator(model, params)
        generator.append_tokens(prompt)
        got = generator.get_logits()
        assert got.shape == (1, 1, model.vocab_size)  # (batch, new tokens, vocab), as onnxruntime-genai's
        assert np.abs(got[0, 0] - logits).max() <= tolerance
        while not generator.is_done():
            generator.generate_next_token()
        assert generator.get_sequence(0).tolist() == expected


def test_text_past_a_models_vocabulary_is_refused():
    """The tiny GPT-2 has GPT-2's tokenizer but 1000 embeddings: ids past them are named, never read."""
    model = model_or_skip(SHARED / "models" / "ort-genai" / "tiny-random-gpt2-fp32")
    with pytest.raises(tern.ModelError, match="token id 15496 is outside the vocabulary of 1000"):
        tern.generate(model, "Hello world", 4)


# ---- tokenizer ----

TOKENIZER_MODEL = SHARED / "models" / "ort-genai" / "tiny-random-LlamaForCausalLM-fp16"


def test_tokenizer_gives_hugging_faces_ids_and_text():
    model = model_or_skip(TOKENIZER_MODEL)
    tok = tern.Tokenizer(model)
    for case in json.loads((GOLDENS / "tokenizer-llama2.json").read_text())["cases"]:
        assert tok.encode(case["text"], add_bos=True).tolist() == case["ids"], case["text"]
        assert tok.encode(case["text"]).tolist() == case["ids_no_special"], case["text"]  # (genai's default)
        assert tok.decode(case["ids"]) == case["decoded"], case["text"]
    assert tok.encode("x" * 3000).size > 256  # (past the first buffer)


def test_chat_prompts_follow_the_models_template():
    model = model_or_skip(TOKENIZER_MODEL)
    tok = tern.Tokenizer(model)
    for case in json.loads((GOLDENS / "chat-llama2.json").read_text())["cases"]:
        assert tok.encode_chat(case["messages"]).tolist() == tok.encode(case["text"], add_bos=False).tolist()
        assert tok.encode_chat(json.dumps(case["messages"])).tolist() == tok.encode_chat(case["messages"]).tolist()
    with pytest.raises(tern.InvalidArgumentError, match="role 'wizard'"):
        tok.encode_chat([{"role": "wizard", "content": "hi"}])


def test_stream_pieces_add_up_to_the_decoded_text():
    model = model_or_skip(DEFAULT)
    tok = tern.Tokenizer(model)
    ids = tok.encode("And God said, Let there be light: and there was light. Ἀρχή — ünïcödé")
    stream = tok.create_stream()
    text = "".join(stream.decode(t) for t in ids) + stream.flush()
    assert text == tok.decode(ids)


# ---- generation in one call, and the loop ----

PROMPT = "And God said"


def test_generate_equals_the_generator_loop_and_the_c_example():
    model = model_or_skip(DEFAULT)
    pieces = []
    text = tern.generate(model, PROMPT, 40, on_text=pieces.append)
    assert text and "".join(pieces) == text
    tok = tern.Tokenizer(model)
    prompt = tok.encode(PROMPT, add_bos=True)  # (as generate() begins it)
    params = tern.GeneratorParams(model)
    params.set_search_options(max_length=len(prompt) + 40)
    generator = tern.Generator(model, params)
    generator.append_tokens(prompt)
    stream = tok.create_stream(prompt)
    loop = ""
    while not generator.is_done():
        generator.generate_next_token()
        loop += stream.decode(generator.get_next_tokens()[0])
    assert loop + stream.flush() == text
    # The C example (examples/c/generate.c, built by the CMake build) prints the same text after the prompt.
    example = pathlib.Path(os.environ.get("TERN_C_EXAMPLE", REPO / "build" / "tests" / "c_example"))
    if example.is_file():
        out = subprocess.run([str(example), str(DEFAULT), PROMPT, "40", "2"], capture_output=True, text=True, check=True)
        assert out.stdout == PROMPT + text + "\n"  # (it ends the line)


def test_stop_strings_and_a_callback_that_raises():
    model = model_or_skip(DEFAULT)
    full = tern.generate(model, PROMPT, 40)
    stop = full[10:14]
    assert tern.generate(model, PROMPT, 40, stop=[stop]) == full[:full.index(stop)]

    def boom(piece):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        tern.generate(model, PROMPT, 40, on_text=boom)
    assert tern.generate(model, PROMPT, 40) == full  # the model is fine afterwards


def test_one_default_everywhere_the_models_generation_config():
    # models/default's generation_config.json: do_sample, temperature 0.8, top_p 0.95. generate(), GeneratorParams,
    # the C API and `tern generate` with no sampling flags all sample so, seed 0: the same text.
    model = model_or_skip(DEFAULT)
    assert model.sampling_default() == pytest.approx({"temperature": 0.8, "top_k": 0, "top_p": 0.95, "min_p": 0.0,
                                                      "repetition_penalty": 1.0})
    search = tern.GeneratorParams(model).search
    assert search["do_sample"] and search["temperature"] == pytest.approx(0.8) and search["top_p"] == pytest.approx(0.95)
    text = tern.generate(model, PROMPT, 40)
    assert text != tern.generate(model, PROMPT, 40, temperature=0)
    cli = REPO / "build" / "tern"
    if cli.is_file():
        out = subprocess.run([str(cli), "generate", "--model", str(DEFAULT), "--prompt", PROMPT, "--max-new-tokens", "40",
                              "--threads", "2"], capture_output=True, text=True, check=True)
        assert out.stdout.rstrip("\n") == PROMPT + text
    # A sampling parameter over a greedy default samples, as the CLI's flags do (top_k 1 of course stays greedy).
    gqa = model_or_skip(REPO / "tests" / "fixtures" / "llama-gqa-torch")
    assert gqa.sampling_default()["temperature"] == 0


def test_kv_dtype_is_the_clis_quantized_ring():
    # Model(kv_dtype=…) and `tern generate --kv-dtype` are one ring: the same greedy text for q8_0 and q4_0; a name
    # that is not a storage is refused naming the four.
    model_or_skip(DEFAULT)
    cli = REPO / "build" / "tern"
    if not cli.is_file():
        pytest.skip(f"{cli} not built")
    for kv in ("q8_0", "q4_0"):
        text = tern.generate(tern.Model(DEFAULT, threads=2, kv_dtype=kv), PROMPT, 60, temperature=0)
        out = subprocess.run([str(cli), "generate", "--model", str(DEFAULT), "--prompt", PROMPT, "--max-new-tokens", "60",
                              "--greedy", "--kv-dtype", kv, "--threads", "2"], capture_output=True, text=True, check=True)
        assert out.stdout.rstrip("\n") == PROMPT + text, kv
    with pytest.raises(tern.InvalidArgumentError, match=r"kv_dtype 'q2' \(fp32, fp16, q8_0, q4_0\)"):
        tern.Model(DEFAULT, kv_dtype="q2")


def test_speculation_keeps_the_greedy_text():
    # Model.set_speculation: prompt lookup and a draft model (the int4 copy) give plain greedy decoding's text; a
    # draft of another vocabulary is refused.
    model = model_or_skip(DEFAULT)
    plain = tern.generate(model, PROMPT, 60, temperature=0)
    model.set_speculation("ngram:4")
    assert tern.generate(model, PROMPT, 60, temperature=0) == plain
    model.set_speculation("draft", tern.Model(DEFAULT, threads=2, weights="int4"))
    assert tern.generate(model, PROMPT, 60, temperature=0) == plain
    model.set_speculation(None)
    other = model_or_skip(REPO / "tests" / "fixtures" / "exports" / "llama-optimum")
    with pytest.raises(tern.InvalidArgumentError, match="a draft must share the model's vocabulary"):
        model.set_speculation("draft:2", other)


def test_sampling_is_seeded_and_top_k_1_is_greedy():
    model = model_or_skip(DEFAULT)
    greedy = tern.generate(model, PROMPT, 30, temperature=0)
    a = tern.generate(model, PROMPT, 30, temperature=1.0, seed=7)
    assert a == tern.generate(model, PROMPT, 30, temperature=1.0, seed=7)
    assert tern.generate(model, PROMPT, 30, temperature=1.0, top_k=1, seed=3) == greedy
    tok = tern.Tokenizer(model)

    def sequence(**search):
        params = tern.GeneratorParams(model)
        params.set_search_options(max_length=40, **search)
        generator = tern.Generator(model, params)
        generator.append_tokens(tok.encode(PROMPT, add_bos=True))
        while not generator.is_done():
            generator.generate_next_token()
        return generator.get_sequence(0).tolist()

    assert sequence(do_sample=True, top_k=1, temperature=0.8, random_seed=5) == sequence(do_sample=False)
    assert sequence(do_sample=True, random_seed=5) == sequence(do_sample=True, random_seed=5)
    assert sequence(do_sample=True, random_seed=5) != sequence(do_sample=False)


def test_generate_takes_a_folder_path():
    if not DEFAULT.is_dir():
        pytest.skip("models/default not found")
    assert tern.generate(str(DEFAULT), PROMPT, 10) == tern.generate(tern.Model(DEFAULT, threads=2), PROMPT, 10)


# ---- errors ----

def test_errors_carry_terns_message(tmp_path):
    with pytest.raises(tern.ModelError, match="no_such_folder"):
        tern.Model(tmp_path / "no_such_folder")
    model = model_or_skip(DEFAULT)
    tok = tern.Tokenizer(model)
    params = tern.GeneratorParams(model)
    with pytest.raises(tern.InvalidArgumentError, match="search option 'beam_width'"):
        params.set_search_options(beam_width=4)
    with pytest.raises(tern.InvalidArgumentError, match="num_beams 0: at least 1"):
        params.set_search_options(num_beams=0)
    generator = tern.Generator(model, params)
    with pytest.raises(tern.InvalidArgumentError, match=f"token id {model.vocab_size} at index 1 is outside the vocabulary"):
        generator.append_tokens([1, model.vocab_size])
    with pytest.raises(tern.InvalidArgumentError, match="no logits yet"):
        generator.generate_next_token()
    with pytest.raises(tern.InvalidArgumentError, match="token id -5"):
        tok.decode([-5])
    with pytest.raises(tern.InvalidArgumentError, match="temperature"):
        tern.generate(model, PROMPT, 5, temperature=-1.0)
    with pytest.raises(tern.InvalidArgumentError, match="max_new_tokens 0"):
        tern.generate(model, PROMPT, 0)


def test_a_folder_without_a_tokenizer_generates_from_ids():
    model = model_or_skip(REPO / "tests" / "fixtures" / "llama-gqa-torch")
    with pytest.raises(tern.UnsupportedError, match="no tokenizer"):
        tern.Tokenizer(model).encode("hello")
    with pytest.raises(tern.UnsupportedError, match="no tokenizer"):
        tern.generate(model, "hello", 4)


def test_the_python_example_prints_the_default_models_text():
    if not DEFAULT.is_dir():
        pytest.skip("models/default not found")
    example = REPO / "examples" / "python" / "chat.py"
    out = subprocess.run([sys.executable, str(example), "--max-new-tokens", "40", "--threads", "2"], input=PROMPT + "\n",
                         capture_output=True, text=True, check=True, cwd=REPO)
    assert tern.generate(tern.Model(DEFAULT, threads=2), PROMPT, 40) in out.stdout


def _greedy(generator, prompt, n):
    generator.append_tokens(prompt)
    for _ in range(n):
        generator.generate_next_token()
    return list(generator.get_sequence())


def test_generators_on_one_model_are_independent_sequences():
    """Two Generators on one Model (weights loaded once): interleaved step by step, and each on a thread of its
    own, they give the tokens each gives alone."""
    import threading

    model = model_or_skip(DEFAULT)
    tok = tern.Tokenizer(model)
    prompts = [tok.encode(PROMPT, add_bos=True), tok.encode("In the beginning", add_bos=True)]
    params = tern.GeneratorParams(model)
    alone = [_greedy(tern.Generator(model, params), p, 12) for p in prompts]
    a, b = tern.Generator(model, params), tern.Generator(model, params)
    a.append_tokens(prompts[0])
    b.append_tokens(prompts[1])
    for _ in range(12):
        a.generate_next_token()
        b.generate_next_token()
    assert [list(a.get_sequence()), list(b.get_sequence())] == alone
    results = [[None] * 5 for _ in prompts]

    def run(k):
        for rep in range(5):
            results[k][rep] = _greedy(tern.Generator(model, params), prompts[k], 12)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [[alone[0]] * 5, [alone[1]] * 5]


def test_a_gguf_file_loads_as_its_imported_folder(tmp_path, monkeypatch):
    # tern.Model and InferenceSession take a .gguf as the CLI does: imported once into the cache folder
    # ($XDG_CACHE_HOME/tern/gguf/), then loaded from there; greedy tokens are transformers' (the fixture's).
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    fixture = REPO / "tests" / "fixtures" / "gguf_arch" / "llama"
    expected = json.loads((fixture / "expected.json").read_text())
    model = tern.Model(fixture / "model.gguf")
    assert len(list((tmp_path / "tern" / "gguf").glob("model-*/model.onnx"))) == 1
    prompt = expected["prompt"]
    params = tern.GeneratorParams(model)
    params.set_search_options(max_length=len(expected["tokens"]))
    generator = tern.Generator(model, params)
    generator.append_tokens(prompt)
    while not generator.is_done():
        generator.generate_next_token()
    assert generator.get_sequence(0).tolist() == expected["tokens"]
    session = tern.InferenceSession(str(fixture / "model.gguf"))  # the same folder's graph, not imported again
    assert "input_ids" in [i.name for i in session.get_inputs()]
    # (one folder: the cache's own notes and lock are hidden files beside it)
    assert len([p for p in (tmp_path / "tern" / "gguf").iterdir() if not p.name.startswith(".")]) == 1


def test_dtype_picks_a_repositorys_onnx_variant(tmp_path):
    """An onnx-community repository (configs at its root, variants in onnx/), made of the llama cells: dtype= picks
    the file as the CLI's --dtype does — the q8 file gives that cell's ONNX Runtime tokens (each prompt alone) — and
    a dtype the repository lacks is an error naming those it has."""
    import shutil
    cells = REPO / "tests" / "fixtures" / "exports"
    (tmp_path / "onnx").mkdir()
    for f in ("config.json", "generation_config.json", "tokenizer.json"):
        shutil.copy(cells / "llama-optimum" / f, tmp_path / f)
    shutil.copy(cells / "llama-optimum" / "model.onnx", tmp_path / "onnx" / "model.onnx")
    shutil.copy(cells / "llama-tjs-q8" / "model.onnx", tmp_path / "onnx" / "model_quantized.onnx")
    golden = json.loads((cells / "llama-tjs-q8" / "greedy.json").read_text())
    prompt, want = golden["cases"][0]["prompts"][0], golden["cases"][0]["tokens"][0]
    model = tern.Model(tmp_path, threads=1, dtype="q8")
    params = tern.GeneratorParams(model)
    params.set_search_options(max_length=len(want), do_sample=False)
    generator = tern.Generator(model, params)
    generator.append_tokens(prompt)
    while not generator.is_done():
        generator.generate_next_token()
    assert list(generator.get_sequence(0)) == want
    with pytest.raises(Exception, match="has no bnb4 variant; it has fp32, q8"):
        tern.Model(tmp_path, dtype="bnb4")
