/**
 * Sweeps exp_f32x4 (asm/vector_math.ts) over every float32 in [-104, 89] (each bit pattern; below
 * e^x is 0 and above +Inf, which tests/wasm_vector_math_test.ts checks) against float64
 * `Math.exp`, and prints the largest error in ULP of the float32 result (subnormal ULP 2^-149).
 * `deno run -A bench/exp_ulp.ts [step]` takes every `step`-th pattern (default 1: all ~2.2e9).
 * @module
 */
import { instantiateKernels } from "../src/wasm/module.ts";

const step = Number(Deno.args[0] ?? 1);
const { memory, kernels } = instantiateKernels({ threads: false });
const CHUNK = 1 << 22;
const base = memory.buffer.byteLength;
memory.grow((8 * CHUNK) / 65536 + 1);
const xs = new Float32Array(memory.buffer, base, CHUNK);
const ys = new Float32Array(memory.buffer, base + 4 * CHUNK, CHUNK);
const bits = new Uint32Array(xs.buffer, base, CHUNK);

/** The ULP of the float32 nearest `v` (v >= 0, finite as a float32). */
function ulp(v: number): number {
  if (v < 2 ** -126) return 2 ** -149;
  return 2 ** (Math.floor(Math.log2(v)) - 23);
}

let worst = 0;
let worstAt = 0;
// The same over the arguments whose e^x is a normal float32.
let worstNormal = 0;
let worstNormalAt = 0;
let count = 0;
const histogram = [0, 0, 0, 0];
function sweep(from: number, to: number, dir: number): void {
  // Bit patterns from `from` to `to` inclusive; dir -1 walks down (the negative floats).
  let b = from;
  while (dir > 0 ? b <= to : b >= to) {
    let n = 0;
    while (n < CHUNK && (dir > 0 ? b <= to : b >= to)) {
      bits[n++] = b >>> 0;
      b += dir * step;
    }
    kernels.exp_f32x4_array(base + 4 * CHUNK, base, n);
    for (let i = 0; i < n; i++) {
      const exact = Math.exp(xs[i]);
      const y = ys[i];
      let e: number;
      if (Math.fround(exact) === Infinity) e = y === Infinity ? 0 : Infinity;
      else e = Math.abs(y - exact) / ulp(exact);
      if (e > worst) {
        worst = e;
        worstAt = xs[i];
      }
      if (exact >= 2 ** -126 && e > worstNormal) {
        worstNormal = e;
        worstNormalAt = xs[i];
      }
      histogram[Math.min(3, Math.floor(e * 2))]++;
    }
    count += n;
  }
}

const t0 = performance.now();
// +0 .. 89, then -0 .. -104 (sign bit set: patterns grow with magnitude).
sweep(0, new Uint32Array(new Float32Array([89]).buffer)[0], 1);
sweep(0x80000000, new Uint32Array(new Float32Array([-104]).buffer)[0], 1);
console.log(
  `${count} arguments in ${((performance.now() - t0) / 1000).toFixed(1)} s: max ${
    worst.toFixed(4)
  } ULP at x = ${worstAt}; where e^x is normal: max ${
    worstNormal.toFixed(4)
  } ULP at x = ${worstNormalAt}; ULP histogram [0,.5) [.5,1) [1,1.5) [1.5,inf): ${
    histogram.join(" ")
  }`,
);
