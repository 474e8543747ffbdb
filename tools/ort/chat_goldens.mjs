// Renders a model's own Jinja chat_template with @huggingface/jinja (Hugging Face's JS implementation)
// for a few conversations: an oracle for tern's built-in chat formats.
//   node chat_goldens.mjs MODEL_DIR OUT.json
import fs from 'node:fs';
import path from 'node:path';
import { Template } from '@huggingface/jinja';

const [dir, out] = process.argv.slice(2);
const cfg = JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer_config.json'), 'utf8'));
const t = new Template(cfg.chat_template);
const conversations = [
  [{ role: 'user', content: 'Hello, who are you?' }],
  [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Name a color.' }],
  [{ role: 'user', content: 'Hi' }, { role: 'assistant', content: 'Hello!' }, { role: 'user', content: 'Tell me a joke.' }],
];
const cases = conversations.map((messages) => ({ messages, text: t.render({
  messages, bos_token: cfg.bos_token?.content ?? cfg.bos_token, eos_token: cfg.eos_token?.content ?? cfg.eos_token,
  add_generation_prompt: true, USE_DEFAULT_PROMPT: false }) }));
fs.writeFileSync(out, JSON.stringify({ generator: 'tools/ort/chat_goldens.mjs', model: path.basename(dir), cases }, null, 1) + '\n');
console.log(out, cases.map((c) => JSON.stringify(c.text)).join('\n'));
