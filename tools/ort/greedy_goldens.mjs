// Writes ONNX Runtime's greedy generation for a batch of token-id prompts, as tern's generator runs it:
// left padding, attention_mask, position_ids = cumsum(mask) - 1 (padding positions 1), past/present
// cache fed back each step, argmax with the first index on ties, sequences stop at an eos id. A cache
// input with a fixed sequence length (opset-24 static caches) starts as zeros of that length.
//
//   node greedy_goldens.mjs MODEL.onnx OUT_DIR '[[1,2,3],[4,5]]' MAX_NEW PAD EOS[,EOS…]
//
// OUT_DIR/greedy.json holds prompts and tokens; OUT_DIR/prefill_logits.f32 the last-position
// logits of the first run, [batch, vocab] little-endian float32. The last line printed gives ORT's
// prefill and decode speed. THREADS (default 1) sets intra-op threads; ORT_OPT=all turns ONNX Runtime's
// graph optimizations on (as a speed peer; goldens are made with them off).
import fs from 'node:fs';
import path from 'node:path';
import ort from 'onnxruntime-node';

const [model, outDir, promptsJson, maxNewStr, padStr, eosStr] = process.argv.slice(2);
const prompts = JSON.parse(promptsJson);
const maxNew = Number(maxNewStr), pad = Number(padStr), eos = eosStr.split(',').map(Number);
const loadStart = performance.now();
const session = await ort.InferenceSession.create(model, {
  intraOpNumThreads: Number(process.env.THREADS ?? 1), graphOptimizationLevel: process.env.ORT_OPT ?? 'disabled', logSeverityLevel: 3 });
const loadMs = performance.now() - loadStart;

const half = (h) => {  // IEEE half bits -> float
  const s = h & 0x8000 ? -1 : 1, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  if (e === 0) return s * m * 2 ** -24;
  if (e === 31) return m ? NaN : s * Infinity;
  return s * (1 + m / 1024) * 2 ** (e - 15);
};
const inputMeta = Object.fromEntries(session.inputNames.map((n, i) => [n, session.inputMetadata?.[i]]));
const idsType = (inputMeta.input_ids?.type ?? 'int64');
const pastNames = session.inputNames.filter((n) => n.startsWith('past'));
const stacked = pastNames.length > 0 && /^past_\d+$/.test(pastNames[0]);
const pastMeta = pastNames.length ? inputMeta[pastNames[0]] : null;
const cacheType = pastMeta?.type ?? 'float32';
const shape0 = pastMeta?.shape ?? [];
const heads = shape0[stacked ? 2 : 1], headSize = shape0[stacked ? 4 : 3];
const capacity = typeof shape0[stacked ? 3 : 2] === 'number' ? shape0[stacked ? 3 : 2] : 0;
const presentOf = (p) => (stacked ? p.replace('past_', 'present_') : p.replace('past_key_values.', 'present.'));

const ints = (vals, dims) => (idsType === 'int32'
  ? new ort.Tensor('int32', Int32Array.from(vals), dims)
  : new ort.Tensor('int64', BigInt64Array.from(vals.map(BigInt)), dims));
const B = prompts.length, longest = Math.max(...prompts.map((p) => p.length));
const seq = prompts.map((p) => Array(longest - p.length).fill(pad).concat(p));
const mask = prompts.map((p) => Array(longest - p.length).fill(0).concat(Array(p.length).fill(1)));
const tokens = prompts.map((p) => [...p]);
const done = Array(B).fill(false);
let past = Object.fromEntries(pastNames.map((n) => {
  const dims = stacked ? [2, B, heads, capacity, headSize] : [B, heads, capacity, headSize];
  const count = dims.reduce((a, b) => a * b, 1);
  return [n, new ort.Tensor(cacheType, cacheType === 'float16' ? new Uint16Array(count) : new Float32Array(count), dims)];
}));
let cached = 0, prefillLogits = null, t0 = performance.now(), prefillMs = 0, decodeSteps = 0;
for (let step = 0; step < maxNew; step++) {
  const total = seq[0].length, n = total - cached;
  const ids = [], pos = [], m = [];
  for (let b = 0; b < B; b++) {
    let p = -1;
    for (let t = 0; t < total; t++) {
      p += mask[b][t];
      if (t >= cached) { ids.push(seq[b][t]); pos.push(mask[b][t] ? p : 1); }
    }
    m.push(...mask[b]);
  }
  const feeds = { input_ids: ints(ids, [B, n]), ...past };
  if (session.inputNames.includes('attention_mask')) feeds.attention_mask = ints(m, [B, total]);
  if (session.inputNames.includes('position_ids')) feeds.position_ids = ints(pos, [B, n]);
  const out = await session.run(feeds);
  const logits = out.logits, V = logits.dims[2], S = logits.dims[1];
  const row = (b) => {
    const r = new Float32Array(V), base = (b * S + S - 1) * V;
    for (let v = 0; v < V; v++) r[v] = logits.type === 'float16' ? half(logits.data[base + v]) : logits.data[base + v];
    return r;
  };
  if (step === 0) prefillLogits = Array.from({ length: B }, (_, b) => row(b));
  for (let b = 0; b < B; b++) {
    let next = pad;
    if (!done[b]) {
      const r = row(b);
      next = 0;
      for (let v = 1; v < V; v++) if (r[v] > r[next]) next = v;
      tokens[b].push(next);
      if (eos.includes(next)) done[b] = true;
    }
    seq[b].push(next);
    mask[b].push(1);
  }
  past = Object.fromEntries(pastNames.map((p) => [p, out[presentOf(p)]]));
  cached = total;
  if (step === 0) { prefillMs = performance.now() - t0; t0 = performance.now(); } else decodeSteps++;
  if (done.every(Boolean)) break;
}
fs.mkdirSync(outDir, { recursive: true });
fs.writeFileSync(path.join(outDir, 'greedy.json'), JSON.stringify({
  generator: 'tools/ort/greedy_goldens.mjs', onnxruntime: ort.env.versions.node, model: path.basename(path.dirname(model)),
  max_new_tokens: maxNew, pad, eos, prompts, tokens }, null, 1) + '\n');
const flat = new Float32Array(B * prefillLogits[0].length);
prefillLogits.forEach((r, b) => flat.set(r, b * r.length));
fs.writeFileSync(path.join(outDir, 'prefill_logits.f32'), Buffer.from(flat.buffer));
const decodeMs = performance.now() - t0;
console.log(`${path.basename(model)}: ${tokens.map((t) => t.length).join(',')} tokens; logits [${B}, ${prefillLogits[0].length}]`);
console.log(`onnxruntime prefill: ${B * longest} tokens, ${Math.round((1000 * B * longest) / prefillMs)} tok/s; ` +
            `decode: ${decodeSteps * B} tokens, ${Math.round((1000 * decodeSteps * B) / decodeMs)} tok/s ` +
            `(${(decodeMs / Math.max(decodeSteps, 1)).toFixed(2)} ms/step); load: ${(loadMs / 1000).toFixed(2)} s`);
