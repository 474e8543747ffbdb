// Encodes test strings with Hugging Face's own JavaScript tokenizers (@huggingface/tokenizers, from
// transformers.js) as an oracle for tern's tokenizer.json support.
//   node tokenizer_goldens.mjs MODEL_DIR OUT.json
import fs from 'node:fs';
import path from 'node:path';
import { Tokenizer } from '@huggingface/tokenizers';

const [dir, out] = process.argv.slice(2);
const tj = JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer.json'), 'utf8'));
const cfgPath = path.join(dir, 'tokenizer_config.json');
const tc = fs.existsSync(cfgPath) ? JSON.parse(fs.readFileSync(cfgPath, 'utf8')) : {};
const tok = new Tokenizer(tj, tc);
const texts = [
  'Hello world', 'Once upon a time, there was a little girl named Lily.', '  leading and trailing spaces  ',
  "I'm sure they'll say we've done it; isn't it?", 'Numbers: 1234567 and 3.14159, 42nd.',
  'Tabs\tand\nnewlines\n\n  indented', 'Ünïcödé façade — “quotes” and emoji 🙂👍 and 漢字かな', 'ALLCAPS MixedCase',
  'special <s> inside </s> text', '', 'a', '!!!???', 'https://example.com/path?q=1&x=2',
];
const cases = texts.map((text) => {
  const ids = tok.encode(text).ids ?? tok.encode(text).input_ids;
  const plain = tok.encode(text, { add_special_tokens: false });
  return { text, ids: Array.from(ids, Number), ids_no_special: Array.from(plain.ids ?? plain.input_ids, Number),
           decoded: ids.length ? tok.decode(Array.from(ids, Number), { skip_special_tokens: true }) : '' };
});
fs.writeFileSync(out, JSON.stringify({ generator: 'tools/ort/tokenizer_goldens.mjs', library: '@huggingface/tokenizers 0.2.0',
  model: path.basename(dir), cases }, null, 1) + '\n');
console.log(out, cases.length, 'cases');
