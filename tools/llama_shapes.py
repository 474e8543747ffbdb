"""Llama shapes shared by the model makers (torch_llama.py's export, make_bench_model.py, make_bench_gguf.py);
no torch here, so the GGUF maker runs from a small venv with numpy and gguf only."""
from dataclasses import dataclass


@dataclass
class LlamaShape:
    vocab: int
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    ffn: int
    max_positions: int
    rope_theta: float = 10000.0
    tied: bool = False  # lm_head reuses the embedding matrix

    @property
    def head_dim(self):
        return self.hidden // self.heads


# The benchmark shapes: 1b = Llama-3.2-1B (hidden 2048, 16 layers, 32 heads, 8 KV heads, FFN 8192, vocab 128256,
# tied embeddings, RoPE theta 500000); 135m = SmolLM-135M; tiny = a 2-layer toy for smoke tests.
BENCH_SHAPES = {
    "1b": LlamaShape(vocab=128256, hidden=2048, layers=16, heads=32, kv_heads=8, ffn=8192, max_positions=131072,
                     rope_theta=500000.0, tied=True),
    "135m": LlamaShape(vocab=49152, hidden=576, layers=30, heads=9, kv_heads=3, ffn=1536, max_positions=8192,
                       rope_theta=100000.0, tied=True),
    "tiny": LlamaShape(vocab=512, hidden=128, layers=2, heads=4, kv_heads=2, ffn=256, max_positions=2048),
}
