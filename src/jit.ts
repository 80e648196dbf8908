/**
 * `jit`: trace a function of tensors once per input signature, then replay it. The trace runs the
 * function normally (lazy fusion included) while the inputs' device captures the work it issues
 * (src/contract/capture.ts; the GPU's is src/gpu/capture.ts); a replay asks the device to re-issue
 * it over the new inputs. No op code, no expression building and no pipeline lookup runs on a
 * replay. A transformation of functions of tensors: it uses the contract, never a device.
 * @module
 */
import type { Capture } from "./contract/capture.ts";
import { checkFunction, DisposedError } from "./core/errors.ts";
import { backendFor } from "./runtime.ts";
import { Tensor, viewOf } from "./tensor.ts";
import { tidy } from "./tidy.ts";

/** A function compiled by {@link jit}: call it like the original; `dispose` frees its constants. */
export interface JittedFunction<A extends Tensor[]> {
  (...inputs: A): Tensor | Tensor[];
  /**
   * Releases the constants every trace holds (data the function uploaded, tensors it closes
   * over) and forgets the traces; calling the function afterwards throws {@link DisposedError}.
   */
  dispose(): void;
  /** Same as `dispose`, for `using`. */
  [Symbol.dispose](): void;
  /** Traces recorded so far (one per input signature), replayable or not. For tests. */
  readonly traces: number;
}

function signature(inputs: readonly Tensor[]): string {
  return inputs.map((t) => {
    const v = viewOf(t, "jit", "input");
    return `${v.storage.backend.name}:${v.dtype}:${v.shape.join("x")}:${
      v.strides.join(",")
    }@${v.offset}`;
  }).join("|");
}

/**
 * Compiles `fn` (a function of tensors returning a tensor or an array of tensors) into a function
 * that traces it once per input signature (device, dtype, shape, strides, offset) and replays the
 * recorded GPU dispatches on later calls. Tensors `fn` closes over, and tensors it creates from
 * data (`tensor`, uploads), are captured as constants of the trace: the replay sees their values
 * as of the trace, and the jitted function holds them until its `dispose()`. Tensors computed by
 * kernels inside `fn` (`full`, `eye`, `arange`, `random` with a seed) are recomputed by each
 * replay. On the WASM device, for traces that use a kernel keeping state across calls (the
 * look-back scan, one-dispatch reductions), and for functions that read tensors back, `fn` simply
 * runs each time.
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * const step = gyre.jit((x: gyre.Tensor) => gyre.relu(x.mul(gyre.tensor([2, -1]))).sum());
 * const out = step(gyre.ones([2])); // traces; later calls with a [2] float32 input replay
 * console.log(await (out as gyre.Tensor).data()); // Float32Array [2]
 * step.dispose(); // frees the constant [2, -1]
 * ```
 */
export function jit<A extends Tensor[]>(
  fn: (...inputs: A) => Tensor | Tensor[],
): JittedFunction<A> {
  checkFunction("jit", "fn", fn, "a function");
  // One capture per input signature; null where the trace could not be replayed.
  const plans = new Map<string, { capture: Capture; single: boolean } | null>();
  let disposed = false;
  const jitted = (...inputs: A): Tensor | Tensor[] => {
    if (disposed) {
      throw new DisposedError({
        op: "jit",
        argument: "function",
        expected: "a jitted function that was not disposed",
        received: "a disposed one",
      });
    }
    const device = inputs[0]?.device;
    if (!device || inputs.some((t) => t.device !== device)) return fn(...inputs);
    const backend = backendFor(device, "jit", "inputs");
    for (const t of inputs) t.realize();
    const key = signature(inputs);
    const plan = plans.get(key);
    if (plan) {
      const views = plan.capture.replay(inputs.map((t) => viewOf(t, "jit", "inputs")));
      const tensors = views.map((v) => new Tensor(v));
      return plan.single ? tensors[0] : tensors;
    }
    if (plan === null) return fn(...inputs);
    const session = backend.capture(inputs.map((t) => viewOf(t, "jit", "inputs")));
    // A device that cannot replay runs the function each time.
    if (!session) return fn(...inputs);
    let result: Tensor | Tensor[];
    try {
      result = tidy(() => {
        const out = fn(...inputs);
        for (const t of Array.isArray(out) ? out : [out]) t.realize();
        return out;
      });
    } catch (e) {
      session.finish(null);
      throw e;
    }
    const outputs = (Array.isArray(result) ? result : [result]).map((t) => viewOf(t, "jit"));
    const capture = session.finish(outputs);
    plans.set(key, capture ? { capture, single: !Array.isArray(result) } : null);
    return result;
  };
  const dispose = () => {
    if (disposed) return;
    disposed = true;
    for (const plan of plans.values()) plan?.capture.release();
    plans.clear();
  };
  return Object.defineProperties(jitted, {
    dispose: { value: dispose },
    [Symbol.dispose]: { value: dispose },
    traces: { get: () => plans.size },
  }) as unknown as JittedFunction<A>;
}
