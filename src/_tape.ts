/**
 * The gradient tapes: while `grad`, `vjp` or `jvp` (src/autograd/) runs a function, every op whose
 * inputs include a tensor the tape follows is recorded on it, with its inputs, outputs and options.
 * Ops call {@link taped}; with no tape open that is one length check. Tapes nest (one per level of
 * differentiation), and an op is recorded on every open tape that follows one of its inputs, so a
 * backward pass run under an outer tape is itself recorded there: that is how `grad(grad(f))` works.
 * This module knows no ops and no tensors' internals (it sees them as objects), so ops may import it.
 * @module
 */

/** One recorded op. */
export interface TapeNode {
  /** The op's name, which selects its gradient rule. */
  op: string;
  /** The op's operands as it received them (tensors, numbers, null for an absent optional one). */
  inputs: readonly unknown[];
  /** The op's tensor results, in the order its rule expects cotangents. */
  outputs: readonly object[];
  /** The op's options, as its rule needs them. */
  attrs: Readonly<Record<string, unknown>>;
}

/** A tape: the tensors it follows and the ops recorded on it, in the order they ran. */
export interface Tape {
  /** The watched inputs and every recorded float output: what gradients can flow through. */
  readonly followed: Set<object>;
  readonly nodes: TapeNode[];
  /** Every tensor its nodes read or made: kept alive while the tape is open (see `holds`). */
  readonly held: Set<object>;
}

const open: Tape[] = [];
// Above zero while an op's own implementation runs: the ops it is built from are not recorded,
// since its rule covers them.
let inside = 0;

/** Opens a tape following `watched`. Close it with {@link closeTape}. */
export function openTape(watched: Iterable<object>): Tape {
  const tape: Tape = { followed: new Set(watched), nodes: [], held: new Set() };
  open.push(tape);
  return tape;
}

/** Stops recording on `tape` (tapes may close out of order: a pullback outlives its tape). */
export function closeTape(tape: Tape): void {
  const at = open.lastIndexOf(tape);
  if (at >= 0) open.splice(at, 1);
}

/** True when `t` is followed by an open tape (a gradient can flow from it). */
export function isFollowed(t: object): boolean {
  return open.some((tape) => tape.followed.has(t));
}

/**
 * True when an open tape's nodes use `t`: a `tidy` scope closing inside a differentiated function
 * (an op's own, or an inner `grad`'s) hands such a tensor to the enclosing scope instead of
 * disposing it, since the backward pass will read it.
 */
export function holds(t: object): boolean {
  for (const tape of open) if (tape.held.has(t)) return true;
  return false;
}

/** Runs `fn` with recording suspended on every tape (`stopGradient`, optimizer updates). */
export function untaped<T>(fn: () => T): T {
  inside++;
  try {
    return fn();
  } finally {
    inside--;
  }
}

function floatOutput(t: object): boolean {
  const dtype = (t as { dtype?: unknown }).dtype;
  return dtype === "float32" || dtype === "float16";
}

/** The tensors of an op's result, in a fixed order (a tensor, an array, or an object's values). */
export function resultTensors(result: unknown): object[] {
  if (result === null || typeof result !== "object") return [];
  if ("dispose" in result && "dtype" in result) return [result];
  const values = Array.isArray(result) ? result : Object.values(result);
  return values.filter((v) =>
    v !== null && typeof v === "object" && "dispose" in v && "dtype" in v
  );
}

/**
 * Runs an op's implementation `run` and records it on each open tape that follows one of its
 * `inputs` (ops inside `run` are not recorded). `attrs` are what its gradient rule needs.
 */
export function taped<T>(
  op: string,
  inputs: readonly unknown[],
  attrs: Readonly<Record<string, unknown>>,
  run: () => T,
): T {
  if (open.length === 0 || inside > 0) return run();
  const tapes = open.filter((tape) => inputs.some((i) => tape.followed.has(i as object)));
  if (tapes.length === 0) return run();
  inside++;
  let result: T;
  try {
    result = run();
  } finally {
    inside--;
  }
  const outputs = resultTensors(result);
  const node: TapeNode = { op, inputs: [...inputs], outputs, attrs };
  for (const tape of tapes) {
    tape.nodes.push(node);
    for (const out of outputs) {
      tape.held.add(out);
      if (floatOutput(out)) tape.followed.add(out);
    }
    for (const input of inputs) {
      if (input !== null && typeof input === "object") tape.held.add(input);
    }
  }
  return result;
}
