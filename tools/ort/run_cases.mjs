// Completes test cases in the ONNX test layout with ONNX Runtime's outputs: for every
// DIR/<case>/model.onnx, runs test_data_set_0/input_<i>.pb and writes output_<i>.pb.
//   node tools/ort/run_cases.mjs tests/contrib_cases
import fs from 'node:fs';
import path from 'node:path';
import ort from 'onnxruntime-node';

// Minimal TensorProto codec for the fields these cases use: dims (1), data_type (2), name (8), raw_data (9).
function varint(buf, pos) {
  let v = 0n, shift = 0n;
  for (;;) { const b = buf[pos++]; v |= BigInt(b & 0x7f) << shift; if (!(b & 0x80)) return [v, pos]; shift += 7n; }
}
const TYPES = { 1: ['float32', Float32Array], 2: ['uint8', Uint8Array], 6: ['int32', Int32Array], 7: ['int64', BigInt64Array], 10: ['float16', Uint16Array] };
function decode(buf) {
  const dims = []; let type = 0, raw = null, name = '';
  for (let pos = 0; pos < buf.length;) {
    let key; [key, pos] = varint(buf, pos);
    const field = Number(key >> 3n), wire = Number(key & 7n);
    if (wire === 0) { let v; [v, pos] = varint(buf, pos); if (field === 1) dims.push(Number(v)); else if (field === 2) type = Number(v); }
    else if (wire === 2) {
      let len; [len, pos] = varint(buf, pos); len = Number(len);
      const bytes = buf.subarray(pos, pos + len); pos += len;
      if (field === 1) { for (let p = 0; p < bytes.length;) { let v; [v, p] = varint(bytes, p); dims.push(Number(v)); } }
      else if (field === 9) raw = bytes; else if (field === 8) name = bytes.toString();
    } else throw new Error(`unexpected wire type ${wire}`);
  }
  const [t, Arr] = TYPES[type];
  const copy = Buffer.from(raw ?? []);
  return { name, tensor: new ort.Tensor(t, new Arr(copy.buffer, copy.byteOffset, copy.length / Arr.BYTES_PER_ELEMENT), dims) };
}
function enc(v) { const out = []; let x = BigInt(v); do { let b = Number(x & 0x7fn); x >>= 7n; if (x) b |= 0x80; out.push(b); } while (x); return out; }
function encode(name, t) {
  const code = Number(Object.entries(TYPES).find(([, [n]]) => n === t.type)[0]);
  const data = Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength);
  const parts = [];
  for (const d of t.dims) parts.push(Buffer.from([0x08, ...enc(d)]));
  parts.push(Buffer.from([0x10, ...enc(code)]));
  parts.push(Buffer.from([0x42, ...enc(name.length)]), Buffer.from(name));
  parts.push(Buffer.from([0x4a, ...enc(data.length)]), data);
  return Buffer.concat(parts);
}

const root = process.argv[2];
for (const c of fs.readdirSync(root).sort()) {
  const dir = path.join(root, c), set = path.join(dir, 'test_data_set_0');
  if (!fs.existsSync(path.join(dir, 'model.onnx'))) continue;
  const session = await ort.InferenceSession.create(path.join(dir, 'model.onnx'), { intraOpNumThreads: 1 });
  const feeds = {};
  for (let i = 0; fs.existsSync(path.join(set, `input_${i}.pb`)); i++) {
    const { name, tensor } = decode(fs.readFileSync(path.join(set, `input_${i}.pb`)));
    feeds[name] = tensor;
  }
  const out = await session.run(feeds);
  session.outputNames.forEach((n, i) => fs.writeFileSync(path.join(set, `output_${i}.pb`), encode(n, out[n])));
  console.log(c, session.outputNames.map((n) => `${n}[${out[n].dims}]`).join(' '));
}
