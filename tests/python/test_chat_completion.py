# tern.Llama(...).create_chat_completion — llama-cpp-python's call — against `tern serve` on the same folder and
# request: the same text (streamed and not), finish reason and usage — sampled with the model's own settings
# (generation_config.json) or the request's, greedy, cut by a stop string or max_tokens; refusals name the field as
# the server's 400s do.
import json
import pathlib
import subprocess
import urllib.request

import pytest

import tern
from conftest import REPO

CLI = REPO / "build" / "tern"
MODELS = {"default": REPO / "models" / "default", "smollm2": REPO / "models" / "smollm2-135m-instruct"}


@pytest.fixture(scope="module", params=list(MODELS))
def served(request, tmp_path_factory):
    folder = MODELS[request.param]
    if not folder.is_dir():
        pytest.skip(f"{folder} not found (scripts/get-models.sh)")
    if not CLI.is_file():
        pytest.skip(f"{CLI} not built")
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    with open(log, "w") as err:
        # (--no-prefix-cache: a request that finds its prompt cached feeds only the rest, whose arithmetic may
        # differ in the last bits — enough to change a token sampled at temperature 0.9; tern_chat_completion feeds
        # every prompt whole, as the server does without the cache.)
        server = subprocess.Popen([str(CLI), "serve", str(folder), "--port", "0", "--threads", "2", "--no-prefix-cache"],
                                  stderr=err)
    try:
        url = None
        for _ in range(200):
            text = log.read_text()
            if "http://127.0.0.1:" in text:
                url = "http://127.0.0.1:" + text.split("http://127.0.0.1:", 1)[1].split()[0].rstrip("/")
                break
            server.poll()
            assert server.returncode is None, text
            __import__("time").sleep(0.1)
        assert url, log.read_text()
        yield tern.Llama(folder, n_threads=2), url
    finally:
        server.terminate()
        server.wait(30)


def post(url, body):
    req = urllib.request.Request(url + "/v1/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        raw = r.read().decode()
    if not body.get("stream"):
        return json.loads(raw)
    return [json.loads(line[6:]) for line in raw.splitlines() if line.startswith("data: ") and line != "data: [DONE]"]


def streamed_text(chunks):
    return "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c.get("choices"))


# (Without a seed each request samples from a fresh random one, as OpenAI's API: the sampled ones give theirs.)
REQUESTS = [
    {"messages": [{"role": "user", "content": "What is the capital of France?"}], "max_tokens": 24, "seed": 3},
    {"messages": [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "Name three colours."}],
     "max_tokens": 20, "temperature": 0.9, "top_p": 0.9, "seed": 11},
    {"messages": [{"role": "user", "content": "Count: one, two, three,"}], "max_tokens": 30, "temperature": 0, "stop": [","]},
]


@pytest.mark.parametrize("number", range(len(REQUESTS)))
def test_create_chat_completion_answers_as_tern_serve(served, number):
    llm, url = served
    body = REQUESTS[number]
    theirs = post(url, body)
    ours = llm.create_chat_completion(**body)
    assert ours["object"] == theirs["object"] == "chat.completion"
    assert ours["choices"][0]["message"] == theirs["choices"][0]["message"]
    assert ours["choices"][0]["finish_reason"] == theirs["choices"][0]["finish_reason"]
    assert ours["usage"] == theirs["usage"]
    their_chunks = post(url, dict(body, stream=True, stream_options={"include_usage": True}))
    our_chunks = list(llm.create_chat_completion(**body, stream=True))
    assert streamed_text(our_chunks) == streamed_text(their_chunks) == theirs["choices"][0]["message"]["content"]
    assert our_chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert [c["choices"][0]["finish_reason"] for c in our_chunks][-1] == theirs["choices"][0]["finish_reason"]


def test_create_chat_completion_refuses_as_the_server_does(served):
    llm, _ = served
    with pytest.raises(tern.InvalidArgumentError, match="temperature"):
        llm.create_chat_completion(messages=[{"role": "user", "content": "hi"}], temperature=-1)
    with pytest.raises(tern.InvalidArgumentError, match="messages"):
        llm.create_chat_completion(messages=[])
    with pytest.raises(tern.InvalidArgumentError, match="maximum context length"):
        llm.create_chat_completion(messages=[{"role": "user", "content": "hi"}], max_tokens=10 ** 7)
