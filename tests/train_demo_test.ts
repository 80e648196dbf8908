/**
 * `deno task train` (scripts/train.ts) learns the two spirals to at least 99% held-out accuracy on
 * WASM, run as a user runs it. (On a GPU it takes a minute on lavapipe: it is run on the GPU
 * hosts, bench/README.md.)
 */
import assert from "node:assert/strict";

Deno.test("deno task train: the two spirals to >= 99% held-out accuracy [wasm]", async () => {
  const out = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      new URL("../scripts/train.ts", import.meta.url).pathname,
      "--device",
      "wasm",
      "--quiet",
    ],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(out.stdout);
  assert.equal(out.code, 0, text + new TextDecoder().decode(out.stderr));
  const final = text.match(/final accuracy: train ([\d.]+)%, held-out ([\d.]+)%/);
  assert.ok(final, text);
  assert.ok(Number(final[2]) >= 99, final[0]);
});
