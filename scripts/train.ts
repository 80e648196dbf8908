/**
 * `deno task train`: an MLP learns the two-spirals problem (two interleaved spirals, one per class,
 * generated here) with `grad`, `jit` and `optim.adam`, printing one line per epoch and the final
 * accuracy on the training points and on points it never saw.
 *
 * Usage: deno task train [--device gpu|wasm|auto] [--epochs N] [--seed S] [--quiet]
 * Exits with status 1 when the held-out accuracy stays under 99%.
 * @module
 */
import * as gyre from "../src/mod.ts";
import { mulberry32 } from "../tests/_random.ts";

const args = Deno.args;
const option = (name: string, fallback: string) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 && i + 1 < args.length ? args[i + 1] : fallback;
};
const device = option("device", "auto") as gyre.DevicePreference;
const epochs = Number(option("epochs", "150"));
const seed = Number(option("seed", "1"));
const quiet = args.includes("--quiet");

/** Two spirals of `perClass` points each, 1.75 turns, radius growing from 0.1 to 1, noise 0.02. */
function spirals(perClass: number, rand: () => number): { points: number[]; labels: number[] } {
  const points: number[] = [], labels: number[] = [];
  for (let i = 0; i < perClass; i++) {
    for (const k of [0, 1]) {
      const t = 0.1 + 0.9 * rand();
      const angle = t * 3.5 * Math.PI + k * Math.PI;
      points.push(
        t * Math.cos(angle) + 0.02 * (rand() - 0.5),
        t * Math.sin(angle) + 0.02 * (rand() - 0.5),
      );
      labels.push(k);
    }
  }
  return { points, labels };
}

const rt = await gyre.init({ device });
const on = rt.device;
const rand = mulberry32(seed);
const train = spirals(500, rand);
const test = spirals(500, rand);
const n = train.labels.length;
const batch = 200;

const upload = (d: { points: number[]; labels: number[] }) => ({
  x: gyre.tensor(d.points, { shape: [d.labels.length, 2], device: on }),
  y: gyre.oneHot(gyre.tensor(d.labels, { dtype: "int32", device: on }), 2),
  labels: gyre.tensor(d.labels, { dtype: "int32", device: on }),
});
const trainSet = upload(train), testSet = upload(test);

const width = 64;
const init = (shape: number[], fanIn: number, s: number) =>
  gyre.random.uniform(shape, {
    seed: seed * 100 + s,
    low: -1 / Math.sqrt(fanIn),
    high: 1 / Math.sqrt(fanIn),
    device: on,
  }).realize();
const params = {
  w1: init([width, 2], 2, 1),
  b1: gyre.zeros([width], { device: on }),
  w2: init([width, width], width, 2),
  b2: gyre.zeros([width], { device: on }),
  w3: init([2, width], width, 3),
  b3: gyre.zeros([2], { device: on }),
};
type Params = typeof params;

const logits = (p: Params, x: gyre.Tensor) => {
  const h1 = gyre.linear(x, p.w1, { bias: p.b1, activation: "tanh" });
  const h2 = gyre.linear(h1, p.w2, { bias: p.b2, activation: "tanh" });
  return gyre.linear(h2, p.w3, { bias: p.b3 });
};
/** Mean cross-entropy of the softmax of the logits against one-hot labels. */
const loss = (p: Params, x: gyre.Tensor, y: gyre.Tensor) =>
  gyre.logSoftmax(logits(p, x)).mul(y).sum({ axis: 1 }).mean().neg();

const names = Object.keys(params) as (keyof Params)[];
const valueAndGrad = gyre.valueAndGrad(loss);
// One jitted function per batch shape: traced once, then replayed.
const step = gyre.jit((x: gyre.Tensor, y: gyre.Tensor, ...flat: gyre.Tensor[]) => {
  const p = Object.fromEntries(names.map((k, i) => [k, flat[i]])) as Params;
  const [value, g] = valueAndGrad(p, x, y) as [gyre.Tensor, Params];
  return [value, ...names.map((k) => g[k])];
});
const opt = gyre.optim.adam(params, { lr: 0.01 });

const accuracy = (set: typeof trainSet) =>
  gyre.tidy(() =>
    gyre.argmax(logits(params, set.x), { axis: 1 }).equal(set.labels).cast("float32").mean()
  );

console.log(`two spirals: ${n} training points, MLP 2-${width}-${width}-2 (tanh), Adam, ${on}`);
const started = performance.now();
let trainAcc = 0, testAcc = 0;
for (let epoch = 1; epoch <= epochs; epoch++) {
  // A fresh order each epoch, from the seeded generator.
  const order = Array.from({ length: n }, (_, i) => i);
  for (let i = n - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [order[i], order[j]] = [order[j], order[i]];
  }
  const losses: gyre.Tensor[] = [];
  for (let start = 0; start < n; start += batch) {
    const value = gyre.tidy(() => {
      const at = gyre.tensor(order.slice(start, start + batch), { dtype: "int32", device: on });
      const x = gyre.take(trainSet.x, at, { axis: 0 }).realize();
      const y = gyre.take(trainSet.y, at, { axis: 0 }).realize();
      const [value, ...grads] = step(x, y, ...names.map((k) => params[k])) as gyre.Tensor[];
      opt.step(Object.fromEntries(names.map((k, i) => [k, grads[i]])) as Params);
      return value;
    });
    losses.push(value);
  }
  const read = [gyre.tidy(() => gyre.stack(losses).mean()), accuracy(trainSet), accuracy(testSet)];
  const [lossValue, accTrain, accTest] = await gyre.readAll(read);
  for (const t of [...losses, ...read]) t.dispose();
  trainAcc = accTrain[0];
  testAcc = accTest[0];
  if (!quiet || epoch === epochs) {
    console.log(
      `epoch ${String(epoch).padStart(3)}  loss ${lossValue[0].toFixed(4)}  ` +
        `train ${(100 * trainAcc).toFixed(1)}%  held-out ${(100 * testAcc).toFixed(1)}%`,
    );
  }
}
const seconds = (performance.now() - started) / 1000;
console.log(
  `final accuracy: train ${(100 * trainAcc).toFixed(1)}%, held-out ${
    (100 * testAcc).toFixed(1)
  }% ` +
    `(${epochs} epochs, ${seconds.toFixed(1)} s on ${on})`,
);
if (testAcc < 0.99) {
  console.error("held-out accuracy under 99%");
  Deno.exit(1);
}
