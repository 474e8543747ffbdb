#!/usr/bin/env python3
"""Writes tests/fixtures/tokenizer/mixed_1000.txt: 1,000 lines that stress a BPE tokenizer — prose (the
default model's validation text), C++ and Python code (tern's own sources), numbers in many spellings,
and Unicode from many scripts, emoji, combining marks and odd whitespace. Deterministic (seeded).
Standard library only:  python3 tools/make_tokenizer_text.py
"""
import pathlib
import random

root = pathlib.Path(__file__).resolve().parent.parent
rng = random.Random(16)
prose = [l for l in (root / "models/default/validation.txt").read_text().splitlines() if l.strip()]
code = []
for f in sorted((root / "src").rglob("*.cpp"))[:40] + sorted((root / "tools").glob("*.py")):
    code += [l for l in f.read_text().splitlines() if l.strip()]
scripts = [
    "Ελληνικά: η γρήγορη καφέ αλεπού πηδά πάνω από τον τεμπέλη σκύλο",
    "Русский: съешь же ещё этих мягких французских булок, да выпей чаю",
    "日本語のテキストと漢字、ひらがな、カタカナ。東京は2024年に",
    "中文：我们在二〇二四年测试分词器，包括标点符号！",
    "한국어 문장: 토크나이저는 모든 바이트를 다뤄야 합니다",
    "עברית: הטקסט נכתב מימין לשמאל",
    "العربية: النص يُكتب من اليمين إلى اليسار ١٢٣",
    "हिन्दी: यह एक परीक्षण वाक्य है ।",
    "ไทย: ภาษาไทยไม่มีช่องว่างระหว่างคำ",
    "emoji 😀😃😄 👩‍💻 🏳️‍🌈 🇫🇷 ✔️ ❤️‍🔥",
    "combining: e\u0301 a\u0308 n\u0303 — é ä ñ; ﬁ ligature; Ａｂｃ fullwidth",
    "math: ∀x∈ℝ, x² ≥ 0; ∑ᵢ aᵢ ≈ ∫ f(x) dx; α→β ⇒ γ",
    "whitespace:\ttab  two   three    spaces\u00a0nbsp\u2003em-space end ",
    "quotes “curly” ‘single’ «guillemets» „low“ — dashes – and … ellipsis",
]
def number():
    k = rng.randrange(8)
    if k == 0: return str(rng.randrange(10 ** rng.randrange(1, 12)))
    if k == 1: return f"{rng.uniform(-1e6, 1e6):.{rng.randrange(0, 6)}f}"
    if k == 2: return f"{rng.randrange(1900, 2100)}-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}"
    if k == 3: return f"{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(256)}"
    if k == 4: return f"{rng.uniform(0, 1):.3e}"
    if k == 5: return f"0x{rng.randrange(1 << 32):08X}"
    if k == 6: return f"{rng.randrange(1000):,}{rng.randrange(1000):03d}".replace(",", " ")
    return f"${rng.randrange(1, 99999)}.{rng.randrange(100):02d} (+{rng.randrange(100)}%)"
lines = []
while len(lines) < 1000:
    k = rng.randrange(10)
    if k < 4: lines.append(rng.choice(prose))
    elif k < 7: lines.append(rng.choice(code))
    elif k < 8: lines.append(" ".join(number() for _ in range(rng.randrange(1, 6))))
    else: lines.append(rng.choice(scripts) + " " + number())
out = root / "tests/fixtures/tokenizer/mixed_1000.txt"
out.write_text("\n".join(lines) + "\n")
print("wrote", out, len(lines), "lines")
