/**
 * Accuracy of softmax on the CPU: gyre's WASM device against TensorFlow.js's WASM backend
 * (tfjs-core and tfjs-backend-wasm 4.22.0, its XNNPACK kernel), both against a float64 oracle,
 * over rows of normal data at several scales. The figure behind the softmax line of
 * bench/results/cpu-amd-epyc-2core.md: tfjs-wasm's speed there comes with errors of tens of ULP
 * (one rounding of x - max, relative |x - max| 2^-24, and a short polynomial), where gyre keeps
 * x - max exact and its exp within 0.8 ULP (asm/rows.ts `softmax_rows_f32`: 4.25u at most).
 *
 * Usage: deno run -A bench/peers/softmax_accuracy.ts [--out bench/results/cpu-softmax-accuracy]
 * Error in ULP of the float32 nearest the exact result, over normal (not subnormal) results.
 * @module
 */
import * as gyre from "../../src/mod.ts";
import { normalData } from "./cpu_common.ts";

const g = globalThis as unknown as Record<string, unknown>;
// tfjs-core takes the browser platform where WorkerGlobalScope exists (see tfjs_shim.ts).
if (typeof g.WorkerGlobalScope === "undefined") g.WorkerGlobalScope = class {};
// deno-lint-ignore no-import-prefix
const tf = await import("npm:@tensorflow/tfjs-core@4.22.0");
// deno-lint-ignore no-import-prefix
await import("npm:@tensorflow/tfjs-backend-wasm@4.22.0");
tf.env().set("WASM_HAS_MULTITHREAD_SUPPORT", false);
if (!(await tf.setBackend("wasm"))) {
  throw new Error("tf.setBackend('wasm') failed");
}
await gyre.init({ device: "wasm" });

const ROWS = 256;
const LEN = 1024;

/** The distance from `got` to `want` in ULP of float32 at `want` (a normal float32 result). */
function ulps(got: number, want: number): number {
  return Math.abs(got - want) / 2 ** (Math.floor(Math.log2(want)) - 23);
}

interface Line {
  scale: number;
  tfjs: number;
  tfjsLarge: number;
  gyre: number;
  gyreLarge: number;
}

const lines: Line[] = [];
for (const scale of [1, 4, 16]) {
  const x = normalData(ROWS * LEN).map((v) => Math.fround(v * scale));
  const t = tf.softmax(tf.tensor(x, [ROWS, LEN]));
  const fromTf = await t.data() as Float32Array;
  t.dispose();
  const y = gyre.softmax(
    gyre.tensor(x, { shape: [ROWS, LEN], device: "wasm" }),
  );
  const fromGyre = await y.data();
  y.dispose();
  const line = { scale, tfjs: 0, tfjsLarge: 0, gyre: 0, gyreLarge: 0 };
  for (let r = 0; r < ROWS; r++) {
    const row = x.subarray(r * LEN, (r + 1) * LEN);
    const max = row.reduce((a, b) => Math.max(a, b), -Infinity);
    const sum = row.reduce((a, b) => a + Math.exp(b - max), 0);
    for (let j = 0; j < LEN; j++) {
      const want = Math.exp(row[j] - max) / sum;
      if (want < 2 ** -126) continue;
      const et = ulps(fromTf[r * LEN + j], want);
      const eg = ulps(fromGyre[r * LEN + j], want);
      line.tfjs = Math.max(line.tfjs, et);
      line.gyre = Math.max(line.gyre, eg);
      if (want > 1e-3) {
        line.tfjsLarge = Math.max(line.tfjsLarge, et);
        line.gyreLarge = Math.max(line.gyreLarge, eg);
      }
    }
  }
  lines.push(line);
  console.error(`scale ${scale} done`);
}

const out = [
  "# softmax accuracy on the CPU: gyre WASM vs tfjs-wasm",
  "",
  `${new Date().toISOString()}, Deno ${Deno.version.deno}. ` +
  "`deno run -A bench/peers/softmax_accuracy.ts`.",
  "",
  `Rows of [${ROWS}, ${LEN}] normal float32 data times the scale; the largest error over the ` +
  "normal results in ULP of float32 at the float64 oracle's value (all results, and those above " +
  "1e-3).",
  "",
  "| scale | tfjs-wasm, all | tfjs-wasm, > 1e-3 | gyre, all | gyre, > 1e-3 |",
  "|--:|--:|--:|--:|--:|",
  ...lines.map((l) =>
    `| ${l.scale} | ${l.tfjs.toFixed(2)} | ${l.tfjsLarge.toFixed(2)} | ${l.gyre.toFixed(2)} | ` +
    `${l.gyreLarge.toFixed(2)} |`
  ),
  "",
].join("\n");
console.log(out);
const at = Deno.args.indexOf("--out");
if (at >= 0) Deno.writeTextFileSync(`${Deno.args[at + 1]}.md`, out);
