/**
 * Writes the inputs of the gradient cases (tests/_grad_cases.ts) for PyTorch to answer:
 *
 * ```sh
 * deno run -A tests/torch/grad_check.ts /tmp/grad_cases.jsonl
 * python3 tests/torch/grad_expected.py /tmp/grad_cases.jsonl tests/torch/grad_expected.jsonl
 * ```
 *
 * `tests/torch_grad_test.ts` then judges gyre's gradients (both devices) by the committed answers.
 * @module
 */
import { CASES, problem } from "../_grad_cases.ts";

if (import.meta.main) {
  const path = Deno.args[0];
  if (!path) throw new Error("usage: grad_check.ts OUT.jsonl");
  const lines = CASES.map((c) => {
    const p = problem(c);
    return JSON.stringify({
      name: c.name,
      inputs: c.inputs.map((spec, i) => ({ shape: spec.shape, values: p.xs[i] })),
      w: p.w,
      outShape: p.outShape,
    });
  });
  await Deno.writeTextFile(path, lines.join("\n") + "\n");
  console.log(`${lines.length} cases written to ${path}`);
}
