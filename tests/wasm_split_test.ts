/**
 * WASM work shared among threads (src/wasm/threads.ts `wasmThreads`): tile programs
 * (src/wasm/elementwise.ts) and reductions (src/wasm/reduce.ts), forced onto 1, 2 and 3 threads
 * with small tiles so that small arrays split into many shares, over the whole float32 domain.
 *
 * Tile programs and every reduction but the float32 sum compute each element with the same
 * operations whichever share it falls in, so threads must equal one thread bit for bit. A float32
 * sum split within a row adds f64 partials in another order than one thread's four f64 lanes:
 * both are within n * 2^-53 * sum|x| of the exact sum before rounding to float32, so they agree
 * within one float32 ULP of the result plus 2^-48 * sum|x|. Each case asserts that work went to a
 * worker (the pool's task count grew).
 * @module
 */
import assert from "node:assert/strict";
import fc from "fast-check";
import * as gyre from "../src/mod.ts";
import { mulberry32 } from "./_random.ts";
import * as tuning from "../src/tuning.ts";
import { postedTasks } from "../src/wasm/threads.ts";

const rt = await gyre.init({ device: "wasm" });
const THREADS = await gyre.startWasmThreads();
const threaded = rt.wasm.shared && THREADS > 1;

const SPECIALS = [NaN, Infinity, -Infinity, 0, -0, 2 ** -149, -(2 ** -130), 3.4028234663852886e38];

/** Floats over the whole domain: log-uniform magnitudes 2^-140..2^127, both signs, specials. */
function floats(seed: number, n: number): Float32Array {
  const next = mulberry32(seed);
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    const r = next();
    out[i] = r < 0.05
      ? SPECIALS[Math.floor(next() * SPECIALS.length)]
      : (next() < 0.5 ? -1 : 1) * 2 ** (next() * 40 - 20) *
        (r < 0.1 ? 2 ** (next() * 260 - 140) : 1);
  }
  return out;
}

/** Runs `f` with the WASM threads (and the tile length) forced, returning its values. */
async function withThreads(
  threads: number,
  tile: number,
  f: () => gyre.Tensor,
): Promise<gyre.TypedArray> {
  tuning.setPlanOverride("wasmThreads", { threads });
  tuning.setPlanOverride("wasmElementwise", { tile });
  try {
    const t = f();
    return await t.data();
  } finally {
    tuning.setPlanOverride("wasmThreads", null);
    tuning.setPlanOverride("wasmElementwise", null);
  }
}

function sameBits(a: gyre.TypedArray, b: gyre.TypedArray, what: string): void {
  assert.equal(a.length, b.length, what);
  for (let i = 0; i < a.length; i++) {
    if (Number.isNaN(a[i]) && Number.isNaN(b[i])) continue;
    assert.ok(Object.is(a[i], b[i]), `${what} [${i}]: ${b[i]} on threads, ${a[i]} on one`);
  }
}

Deno.test({
  name: "tile programs on 2 and 3 threads equal one thread bit for bit",
  ignore: !threaded,
  fn: async () => {
    const before = postedTasks();
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 5000 }),
        fc.integer({ min: 1, max: 16 }).map((k) => 4 * k),
        fc.integer({ min: 2, max: 3 }),
        fc.nat(),
        async (n, tile, threads, seed) => {
          const x = gyre.tensor(floats(seed, n));
          const y = gyre.tensor(floats(seed + 1, n));
          const chain = () =>
            gyre.where(
              gyre.greater(x, y),
              gyre.relu(x.mul(2).add(1)),
              gyre.exp(y).sub(x.mul(y)),
            );
          const one = await withThreads(1, tile, chain);
          const many = await withThreads(threads, tile, chain);
          x.dispose();
          y.dispose();
          sameBits(one, many, `n ${n}, tile ${tile}, ${threads} threads`);
        },
      ),
      { numRuns: 60 },
    );
    assert.ok(postedTasks() > before, "no share went to a worker");
  },
});

Deno.test({
  name: "reductions on 2 and 3 threads equal one thread (float32 sums within 1 ULP)",
  ignore: !threaded,
  fn: async () => {
    const before = postedTasks();
    const ops = ["sum", "max", "min"] as const;
    const dtypes = ["float32", "int32", "uint32"] as const;
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...ops),
        fc.constantFrom(...dtypes),
        fc.integer({ min: 1, max: 6 }),
        fc.integer({ min: 0, max: 3000 }),
        fc.boolean(),
        fc.integer({ min: 2, max: 3 }),
        fc.nat(),
        async (op, dtype, rows, length, whole, threads, seed) => {
          const data = floats(seed, rows * length);
          const x = dtype === "float32"
            ? gyre.tensor(data, { shape: [rows, length] })
            : gyre.tensor(
              Array.from(data, (v) => {
                const i = Number.isFinite(v) ? Math.trunc(v) % 2 ** 31 : 7;
                return dtype === "uint32" ? Math.abs(i) * 2 : i;
              }),
              { shape: [rows, length], dtype },
            );
          const reduce = () => gyre[op](x, whole ? {} : { axis: -1 });
          if (length === 0 && op !== "sum") {
            x.dispose();
            return;
          }
          const one = await withThreads(1, 1024, reduce);
          const many = await withThreads(threads, 1024, reduce);
          x.dispose();
          const what = `${op} of ${dtype} [${rows}, ${length}]${whole ? "" : " by rows"}`;
          if (op !== "sum" || dtype !== "float32") return sameBits(one, many, what);
          for (let i = 0; i < one.length; i++) {
            const [a, b] = [one[i], many[i]];
            if (Number.isNaN(a) || !Number.isFinite(a)) {
              assert.ok(
                Object.is(a, b) || (Number.isNaN(a) && Number.isNaN(b)),
                `${what}: ${b} vs ${a}`,
              );
              continue;
            }
            const row = whole ? data : data.subarray(i * length, (i + 1) * length);
            const magnitude = row.reduce((s, v) => s + Math.abs(v), 0);
            const ulp = 2 ** (Math.floor(Math.log2(Math.max(Math.abs(a), 2 ** -126))) - 23);
            assert.ok(Math.abs(a - b) <= ulp + 2 ** -48 * magnitude, `${what}: ${b} vs ${a}`);
          }
        },
      ),
      { numRuns: 150 },
    );
    assert.ok(postedTasks() > before, "no share went to a worker");
  },
});

/** The sequential f64 prefix sums of `xs` (the one-chain kernel's), in scan order, as float32. */
function sequentialSums(xs: Float32Array, exclusive: boolean, reverse: boolean): Float64Array {
  const n = xs.length;
  const out = new Float64Array(n);
  let acc = -0;
  for (let s = 0; s < n; s++) {
    const i = reverse ? n - 1 - s : s;
    if (exclusive) out[i] = s === 0 ? 0 : Math.fround(acc);
    acc += xs[i];
    if (!exclusive) out[i] = Math.fround(acc);
  }
  return out;
}

Deno.test({
  name: "scans: threads equal one thread; float32 sums of long rows within 1 ULP of one f64 chain",
  ignore: !threaded,
  fn: async () => {
    const before = postedTasks();
    const ops = ["cumsum", "cummax", "cumprod"] as const;
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...ops),
        fc.integer({ min: 1, max: 3 }),
        fc.integer({ min: 1, max: 3000 }),
        fc.boolean(),
        fc.boolean(),
        fc.integer({ min: 2, max: 3 }),
        fc.nat(),
        async (op, rows, length, exclusive, reverse, threads, seed) => {
          const data = floats(seed, rows * length);
          const x = gyre.tensor(data, { shape: [rows, length] });
          const scan = () => gyre[op](x, { exclusive, reverse });
          const one = await withThreads(1, 1024, scan);
          const many = await withThreads(threads, 1024, scan);
          x.dispose();
          const what = `${op} of [${rows}, ${length}]${exclusive ? " exclusive" : ""}${
            reverse ? " reversed" : ""
          } on ${threads} threads`;
          if (op !== "cumsum") return sameBits(one, many, what);
          for (let r = 0; r < rows; r++) {
            const row = data.subarray(r * length, (r + 1) * length);
            const want = sequentialSums(row, exclusive, reverse);
            let magnitude = 0;
            for (let s = 0; s < length; s++) {
              const i = reverse ? length - 1 - s : s;
              magnitude += Math.abs(row[i]);
              for (const [got, who] of [[one, "one thread"], [many, "threads"]] as const) {
                const [a, b] = [want[i], got[r * length + i]];
                if (!Number.isFinite(a)) {
                  assert.ok(Object.is(a, b), `${what}, ${who} [${r}, ${i}]: ${b}, expected ${a}`);
                  continue;
                }
                const ulp = 2 ** (Math.floor(Math.log2(Math.max(Math.abs(a), 2 ** -126))) - 23);
                // Rows shorter than a chain's minimum are one chain: the same bits.
                const tol = length < 256 && who === "one thread" ? 0 : ulp + 2 ** -48 * magnitude;
                assert.ok(
                  Object.is(a, b) || Math.abs(a - b) <= tol,
                  `${what}, ${who} [${r}, ${i}]: ${b}, expected ${a}`,
                );
              }
            }
          }
        },
      ),
      { numRuns: 120 },
    );
    assert.ok(postedTasks() > before, "no share went to a worker");
  },
});
