/**
 * The plan of compiled residuals (issue 26): from the instances of each topology — their keys,
 * parameter indices and constants, as the front end traced them — the program every device runs
 * (src/contract/residuals.ts): tapes lowered from the keys, constants equal in every instance
 * baked in as literals, instance data slot-major, and the Jacobian's columns (CSC). Pure.
 * @module
 */
import { SCALAR_OPS, type ScalarOp } from "../ir/scalar_table.ts";

/** One lowered instruction: a leaf or an op of the table over earlier instructions. */
export interface Instruction {
  op: ScalarOp | "param" | "const" | "literal";
  /** Operands: indices of earlier instructions. */
  args: number[];
  /** Leaves: the parameter slot or the constant's data slot. */
  slot: number;
  /** Literals: the value (a constant equal in every instance, or a lowering's 0 or n). */
  value: number;
}

/** Residuals of one topology. */
export interface ResidualGroup {
  /** The topology key with the literal constants' values: equal keys, equal kernels. */
  key: string;
  /** Lowered instructions; the last computes the residual. */
  tape: Instruction[];
  /** Parameter slots per instance (the Jacobian row's entries). */
  paramSlots: number;
  /** Constant slots that vary between instances (data). */
  constantSlots: number;
  /** Instances. */
  count: number;
  /** The first instance's residual row; rows are contiguous. */
  firstRow: number;
  /** Parameter index of slot s of instance i at s * count + i. */
  paramIndex: Int32Array;
  /** Constant of data slot s of instance i at s * count + i. */
  constants: Float64Array;
  /** The flat Jacobian entry of slot s of instance i is entryBase + s * count + i. */
  entryBase: number;
}

/** Residuals grouped into kernels, and the Jacobian's structure. */
export interface ResidualProgram {
  parameters: number;
  residuals: number;
  /** Jacobian entries (structural nonzeros). */
  entries: number;
  groups: ResidualGroup[];
  /** The row of each residual, in the order the residual function returned them. */
  rowOf: Int32Array;
  /** CSC: parameter j's entries are colEntry[colStart[j] .. colStart[j + 1]), rows in colRow. */
  colStart: Int32Array;
  colEntry: Int32Array;
  colRow: Int32Array;
}

/**
 * The lowered tape of a topology key: leaves become loads (constants in `literal`, indexed by
 * constant slot, are baked in), `sum` and `mean` become chains of `add` from 0 (the order the
 * eager graph sums in), `mean` then a division by its count.
 */
export function lowerTape(key: string, literal: readonly (number | null)[]): Instruction[] {
  const tape: Instruction[] = [];
  const at: number[] = [];
  const dataSlot: number[] = [];
  let data = 0;
  literal.forEach((v, s) => (dataSlot[s] = v === null ? data++ : -1));
  const push = (i: Instruction) => tape.push(i) - 1;
  for (const entry of key.split(";")) {
    const kind = entry[0];
    if (kind === "P" && /^P\d+$/.test(entry)) {
      at.push(push({ op: "param", args: [], slot: Number(entry.slice(1)), value: 0 }));
      continue;
    }
    if (kind === "C" && /^C\d+$/.test(entry)) {
      const s = Number(entry.slice(1));
      const v = literal[s];
      at.push(
        push(
          v === null ? { op: "const", args: [], slot: dataSlot[s], value: 0 } : {
            op: "literal",
            args: [],
            slot: -1,
            value: v,
          },
        ),
      );
      continue;
    }
    const open = entry.indexOf("(");
    const op = entry.slice(0, open);
    const args = entry.slice(open + 1, -1).split(",").filter((x) => x !== "").map((x) =>
      at[Number(x)]
    );
    if (op === "sum" || op === "mean") {
      let acc = push({ op: "literal", args: [], slot: -1, value: 0 });
      for (const a of args) acc = push({ op: "add", args: [acc, a], slot: -1, value: 0 });
      if (op === "mean") {
        const n = push({ op: "literal", args: [], slot: -1, value: args.length });
        acc = push({ op: "div", args: [acc, n], slot: -1, value: 0 });
      }
      at.push(acc);
      continue;
    }
    if (!(op in SCALAR_OPS)) throw new Error(`internal: unknown scalar op ${op}`);
    at.push(push({ op: op as ScalarOp, args, slot: -1, value: 0 }));
  }
  return tape;
}

/** The instances of one topology, as traced: per instance its parameters and constants. */
export interface TracedGroup {
  key: string;
  /** Instance-major: instance i's parameter slots at i * slots ... */
  params: ArrayLike<number>;
  /** Instance-major, as `params`. */
  constants: ArrayLike<number>;
  /** The residual index (in the residual function's order) of each instance. */
  rows: ArrayLike<number>;
}

/**
 * The program of `traced` groups over `n` parameters and `residuals` residuals.
 *
 * @example
 * ```ts
 * import { planResiduals } from "./residuals.ts";
 * // r_i = x[i + 1] - x[i] - 1 for i = 0, 1: one topology, the constant 1 baked in.
 * const program = planResiduals(3, 2, [
 *   { key: "P0;P1;sub(0,1);C0;sub(2,3)", params: [1, 0, 2, 1], constants: [1, 1], rows: [0, 1] },
 * ]);
 * program.entries; // 4
 * ```
 */
export function planResiduals(
  n: number,
  residuals: number,
  traced: readonly TracedGroup[],
): ResidualProgram {
  const groups: ResidualGroup[] = [];
  const rowOf = new Int32Array(residuals);
  let row = 0, entries = 0;
  const firstRow = new Map<TracedGroup, number>();
  for (const b of traced) {
    const count = b.rows.length;
    const paramSlots = b.params.length / count;
    const constantSlots = b.constants.length / count;
    // A constant equal in every instance is baked into the kernel instead of read.
    const literal: (number | null)[] = [];
    for (let s = 0; s < constantSlots; s++) {
      const v = b.constants[s];
      let same = true;
      for (let i = 1; i < count && same; i++) {
        same = Object.is(b.constants[i * constantSlots + s], v);
      }
      literal.push(same ? v : null);
    }
    const dataSlots = literal.map((v, s) => (v === null ? s : -1)).filter((s) => s >= 0);
    // Interleaved (instance-major) in the builder, slot-major here.
    const paramIndex = new Int32Array(paramSlots * count);
    for (let i = 0; i < count; i++) {
      for (let s = 0; s < paramSlots; s++) {
        paramIndex[s * count + i] = b.params[i * paramSlots + s];
      }
    }
    const constants = new Float64Array(dataSlots.length * count);
    dataSlots.forEach((s, d) => {
      for (let i = 0; i < count; i++) constants[d * count + i] = b.constants[i * constantSlots + s];
    });
    const literalKey = literal.map((v) => (v === null ? "" : String(v))).join(",");
    groups.push({
      key: `${b.key}|${literalKey}`,
      tape: lowerTape(b.key, literal),
      paramSlots,
      constantSlots: dataSlots.length,
      count,
      firstRow: row,
      paramIndex,
      constants,
      entryBase: entries,
    });
    firstRow.set(b, row);
    row += count;
    entries += paramSlots * count;
  }
  for (const b of traced) {
    const first = firstRow.get(b)!;
    for (let i = 0; i < b.rows.length; i++) rowOf[b.rows[i]] = first + i;
  }
  const colStart = new Int32Array(n + 1);
  for (const g of groups) {
    const index = g.paramIndex;
    for (let k = 0; k < index.length; k++) colStart[index[k] + 1]++;
  }
  for (let j = 0; j < n; j++) colStart[j + 1] += colStart[j];
  const fill = colStart.slice(0, n);
  const colEntry = new Int32Array(entries);
  const colRow = new Int32Array(entries);
  for (const g of groups) {
    for (let s = 0; s < g.paramSlots; s++) {
      for (let i = 0; i < g.count; i++) {
        const e = g.entryBase + s * g.count + i;
        const at = fill[g.paramIndex[s * g.count + i]]++;
        colEntry[at] = e;
        colRow[at] = g.firstRow + i;
      }
    }
  }
  return {
    parameters: n,
    residuals,
    entries,
    groups,
    rowOf,
    colStart,
    colEntry,
    colRow,
  };
}
