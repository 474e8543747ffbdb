// ONNX Runtime's perplexity of token ids under a decoder (one window, empty past), the oracle for
// `tern eval`:  node nll.mjs MODEL.onnx IDS.json
import fs from 'node:fs';
import ort from 'onnxruntime-node';
const [model, idsFile] = process.argv.slice(2);
const ids = JSON.parse(fs.readFileSync(idsFile));
const s = await ort.InferenceSession.create(model, { graphOptimizationLevel: 'disabled', logSeverityLevel: 3 });
const n = ids.length, i64 = (a) => new ort.Tensor('int64', BigInt64Array.from(a.map(BigInt)), [1, n]);
const feeds = { input_ids: i64(ids), attention_mask: i64(ids.map(() => 1)), position_ids: i64(ids.map((_, i) => i)) };
s.inputNames.forEach((name, i) => {  // an empty past: [1, kv_heads, 0, head_size]
  if (!name.startsWith('past')) return;
  const dims = s.inputMetadata[i].shape;
  feeds[name] = new ort.Tensor('float32', new Float32Array(0), [1, dims[1], 0, dims[3]]);
});
const out = await s.run(feeds);
const L = out.logits, V = L.dims[2];
let nll = 0;
for (let i = 0; i + 1 < n; i++) {
  const row = L.data.subarray(i * V, (i + 1) * V); const mx = Math.max(...row);
  let sum = 0; for (const x of row) sum += Math.exp(x - mx);
  nll += Math.log(sum) + mx - row[ids[i + 1]];
}
console.log(`ORT: ${n - 1} predictions, mean NLL ${nll / (n - 1)}, perplexity ${Math.exp(nll / (n - 1))}`);
