// An ONNX Runtime profile of one prefill run (N prompt tokens, empty past), to compare with tern's
// (`tern profile --compare`):  node profile.mjs MODEL.onnx N OUT.json [THREADS, default 1]
import fs from 'node:fs';
import path from 'node:path';
import ort from 'onnxruntime-node';
const [model, nArg, outFile, threads = '1'] = process.argv.slice(2);
const n = Number(nArg);
const s = await ort.InferenceSession.create(model, {
  enableProfiling: true, profileFilePrefix: outFile.replace(/\.json$/, ''), logSeverityLevel: 3,
  intraOpNumThreads: Number(threads), executionMode: 'sequential' });
const i64 = (a) => new ort.Tensor('int64', BigInt64Array.from(a.map(BigInt)), [1, a.length]);
const ids = Array.from({ length: n }, (_, i) => 1 + (i * 7919) % 100);
const feeds = { input_ids: i64(ids), attention_mask: i64(ids.map(() => 1)), position_ids: i64(ids.map((_, i) => i)) };
s.inputNames.forEach((name, i) => {  // an empty past: [1, kv_heads, 0, head_size]
  if (!name.startsWith('past')) return;
  const dims = s.inputMetadata[i].shape;
  feeds[name] = new ort.Tensor('float32', new Float32Array(0), [1, dims[1], 0, dims[3]]);
});
for (const k of Object.keys(feeds)) if (!s.inputNames.includes(k)) delete feeds[k];
await s.run(feeds);
s.endProfiling();  // writes PREFIX_<date>.json (the Node binding does not return the name)
const prefix = outFile.replace(/\.json$/, ''), dir = path.dirname(prefix), base = path.basename(prefix) + '_';
const written = fs.readdirSync(dir).filter((f) => f.startsWith(base) && f.endsWith('.json'))
  .map((f) => path.join(dir, f)).sort((a, b) => fs.statSync(b).mtimeMs - fs.statSync(a).mtimeMs)[0];
fs.renameSync(written, outFile);
console.log(`wrote ${outFile}`);
