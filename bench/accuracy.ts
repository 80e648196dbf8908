/**
 * Accuracy of the unary float ops against float64: `deno run -A bench/accuracy.ts [--samples N]
 * [--ops sin,cos]` draws N inputs per op (default 2^22: bit patterns spread evenly over every
 * finite float32 exponent, both signs, plus the ops' specials), computes each op on the GPU and on
 * WASM, and measures the error of every result in float32 ULPs of the float64 answer (the spacing
 * of float32 values at it). Results whose answer is subnormal are counted apart (WGSL lets a GPU
 * flush them), as are wrong specials (a NaN, an infinity or a zero where the answer differs).
 * Trigonometric ops also run over every float32 from pi/4 to 800 (their Cody-Waite range), or
 * every Kth.
 * Writes bench/results/accuracy-<device>.md.
 * @module
 */
import * as gyre from "../src/mod.ts";

const args = Deno.args;
const flag = (name: string) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : undefined;
};
const samples = Number(flag("samples") ?? 1 << 22);
/** Bit patterns between the trigonometric range's inputs (1: every float32 from pi/4 to 800). */
const trigStep = Number(flag("trig-step") ?? 1);

/** float64 answers (reached through f32 inputs). */
const REFERENCES: Record<string, (x: number) => number> = {
  sin: Math.sin,
  cos: Math.cos,
  tan: Math.tan,
  exp: Math.exp,
  exp2: (x) => 2 ** x,
  expm1: Math.expm1,
  log: Math.log,
  log2: Math.log2,
  log1p: Math.log1p,
  sqrt: Math.sqrt,
  rsqrt: (x) => 1 / Math.sqrt(x),
  reciprocal: (x) => 1 / x,
  tanh: Math.tanh,
  sigmoid: (x) => 1 / (1 + Math.exp(-x)),
};
const ops = (flag("ops")?.split(",") ?? Object.keys(REFERENCES)).filter((op) => {
  if (!REFERENCES[op]) throw new Error(`accuracy: no float64 reference for ${op}`);
  return true;
});
const TRIG = new Set(["sin", "cos", "tan"]);

const MIN_NORMAL = 2 ** -126;
/** The spacing of float32 values at `v`. */
function ulp(v: number): number {
  const a = Math.abs(v);
  if (a < MIN_NORMAL) return 2 ** -149;
  return 2 ** (Math.floor(Math.log2(a)) - 23);
}

/** Inputs: random finite bit patterns with the exponent drawn uniformly, and specials. */
function sampled(n: number, seed: number): Float32Array {
  const u = new Uint32Array(n);
  let s = seed >>> 0;
  const next = () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = Math.imul(s ^ (s >>> 15), 1 | s);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return (t ^ (t >>> 14)) >>> 0;
  };
  for (let i = 0; i < n; i++) {
    const r = next();
    const exponent = next() % 255; // 0 (subnormals) to 254
    u[i] = (r & 0x807fffff) | (exponent << 23);
  }
  const x = new Float32Array(u.buffer);
  const specials = [0, -0, Infinity, -Infinity, NaN, 1, -1, 0.5, 2, MIN_NORMAL, 2 ** -149, 3.4e38];
  x.set(specials.map(Math.fround), 0);
  return x;
}

/** Every float32 from pi/4 to 800, `step` bit patterns apart. */
function trigRange(step: number): Float32Array {
  const lo = 0x3f490fdb, hi = 0x44480000;
  const u = new Uint32Array(Math.ceil((hi - lo) / step));
  for (let i = 0; i < u.length; i++) u[i] = lo + i * step;
  return new Float32Array(u.buffer);
}

interface Stats {
  max: number;
  at: number;
  median: number;
  /** Answers below the smallest normal: not in max or median. */
  subnormal: number;
  /** A NaN, infinity or zero where the answer differs. */
  wrongSpecial: number;
  count: number;
}

function measure(op: string, x: Float32Array, y: ArrayLike<number>): Stats {
  const f = REFERENCES[op];
  const errors = new Float64Array(x.length);
  let n = 0, max = 0, at = NaN, subnormal = 0, wrongSpecial = 0;
  for (let i = 0; i < x.length; i++) {
    const want = f(x[i]), got = y[i];
    if (Number.isNaN(want) || Number.isNaN(got) || !Number.isFinite(want)) {
      if (!(Object.is(want, got) || (Number.isNaN(want) && Number.isNaN(got)))) {
        // An answer past float32's range rounds to infinity: that is right.
        if (!(Math.abs(want) > 3.4028234663852886e38 && Math.abs(got) === Infinity)) {
          wrongSpecial++;
        }
      }
      continue;
    }
    if (want !== 0 && Math.abs(want) < MIN_NORMAL) {
      subnormal++;
      continue;
    }
    if (!Number.isFinite(got)) {
      // Past f32's largest value the rounded answer is infinite.
      if (Math.abs(want) < 3.4028234663852886e38) wrongSpecial++;
      continue;
    }
    const e = want === 0 ? (got === 0 ? 0 : Infinity) : Math.abs(got - want) / ulp(want);
    errors[n++] = e;
    if (e > max) [max, at] = [e, x[i]];
  }
  const sorted = errors.subarray(0, n).sort();
  return { max, at, median: n ? sorted[n >> 1] : NaN, subnormal, wrongSpecial, count: x.length };
}

const rt = await gyre.init({ device: "auto" });
const devices: gyre.DeviceName[] = rt.gpu ? ["gpu", "wasm"] : ["wasm"];
const name = rt.gpu?.caps.description ?? "wasm only";
const rows: string[] = [];
const CHUNK = 1 << 22;

async function run(op: string, device: gyre.DeviceName, x: Float32Array): Promise<Float32Array> {
  const out = new Float32Array(x.length);
  for (let at = 0; at < x.length; at += CHUNK) {
    const part = x.subarray(at, Math.min(x.length, at + CHUNK));
    const t = gyre.tensor(part, { device });
    // deno-lint-ignore no-explicit-any
    const y = (gyre as any)[op](t) as gyre.Tensor;
    out.set(await y.data() as Float32Array, at);
    t.dispose();
    y.dispose();
  }
  return out;
}

const fmt = (v: number) => (Number.isFinite(v) ? v.toFixed(2) : String(v));
console.error(`accuracy on ${name}: ${samples} samples per op`);
for (const op of ops) {
  const sets: [string, Float32Array][] = [["whole range", sampled(samples, 1)]];
  if (TRIG.has(op)) {
    const label = trigStep === 1 ? "every f32" : `every ${trigStep}th f32`;
    sets.push([`${label} in [pi/4, 800)`, trigRange(trigStep)]);
  }
  for (const [label, x] of sets) {
    for (const device of devices) {
      const s = measure(op, x, await run(op, device, x));
      rows.push(
        `| ${op} | ${label} | ${device} | ${fmt(s.max)} | ${s.at} | ${fmt(s.median)} | ` +
          `${s.subnormal} | ${s.wrongSpecial} | ${s.count} |`,
      );
      console.error(`  ${rows[rows.length - 1]}`);
    }
  }
}

const report = [
  `# Accuracy on ${name}`,
  "",
  `\`deno run -A bench/accuracy.ts\` (${
    new Date().toISOString()
  }): each op's error in float32 ULPs ` +
  "of the float64 answer over inputs spread evenly over every float32 exponent and both signs " +
  "(bit patterns; specials included), on each device. Answers below the smallest normal float32 " +
  "are counted apart (WGSL lets a GPU flush them to zero), as are wrong specials (NaN, infinity " +
  "or zero where the answer differs).",
  "",
  "| op | inputs | device | max ULP | at x | median ULP | subnormal answers | wrong specials | inputs |",
  "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
  ...rows,
  "",
].join("\n");
const slug = name.toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-|-$/g, "");
await Deno.writeTextFile(new URL(`./results/accuracy-${slug}.md`, import.meta.url), report);
console.log(report);
