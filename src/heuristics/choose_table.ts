/**
 * The choose table's data: rows of tuned choices over key ranges, as the tuner writes them (JSON)
 * and as the WASM chooser reads them (i32 words). The generator (scripts/gen_choose.ts) compiles
 * the reference devices' tables into AssemblyScript; a user's own tuning results load as rows at
 * run time into the same chooser (src/heuristics/chooser.ts).
 * @module
 */
import { ValueError } from "../core/errors.ts";
import { sizeBucket } from "./fingerprint.ts";
import {
  choiceText,
  TUNE_FAMILIES,
  TUNE_FAMILY,
  type TuneChoice,
  type TuneFamilyName,
} from "./families.ts";

/**
 * One row of a family's table: for each numeric key variable `v` an optional range `v_min`,
 * `v_max` (inclusive; missing: unbounded) or an exact `v`; for a boolean one its value; and a
 * value for each choice field. E.g. `{"r_min": 1, "r_max": 1, "c_min": 65536, "c_max": 131071,
 * "k_max": 127, "sg": true, "mk": 2, "tile": 2048}`.
 */
export type ChooseRow = Readonly<Record<string, number | boolean>>;

/** A device's table, as committed under src/heuristics/tables/ and compiled into WASM. */
export interface ChooseTable {
  /** The device: a short name and a pattern its adapter description matches. */
  device: { name: string; match: string; description: string };
  /** Where the measurements came from (tool, commit, date). */
  source: string;
  /** Rows by family, first match wins. */
  families: Partial<Record<TuneFamilyName, ChooseRow[]>>;
}

/** Key variables and fields a family may have in the WASM chooser. */
export const CHOOSE_SLOTS = 4;
/** i32 words of a row in the chooser: family, low and high bounds, field values. */
export const CHOOSE_ROW_WORDS: number = 1 + 3 * CHOOSE_SLOTS;
/** The largest bound (i32). */
export const CHOOSE_MAX = 2147483647;

/** A row as the chooser matches it: key bounds and field values, in the family's order. */
export interface ChooseBounds {
  /** Low bounds of the key variables. */
  low: number[];
  /** High bounds of the key variables. */
  high: number[];
  /** The choice's field values. */
  values: number[];
}

/**
 * The bounds and values of a table row for `family` (a ValueError for a row that lacks a field
 * or has a field or bound that is not a 32-bit integer).
 *
 * @example
 * ```ts
 * import { rowBounds } from "@gyre/gyre/tuning";
 * rowBounds("scan", { r: 1, n_min: 1024, n_max: 2047, sg: true, variant: 0, wg: 256, ept: 16 });
 * // { low: [1, 1024, 1], high: [1, 2047, 1], values: [0, 256, 16] }
 * ```
 */
export function rowBounds(family: TuneFamilyName, row: ChooseRow): ChooseBounds {
  const f = TUNE_FAMILY[family];
  const bad = (what: string, received: unknown) =>
    new ValueError({
      op: "chooseTable",
      argument: `${family} row ${JSON.stringify(row)}`,
      expected: what,
      received: String(received),
    });
  const int = (v: unknown, name: string) => {
    if (typeof v === "boolean") return Number(v);
    if (typeof v !== "number" || !Number.isInteger(v) || v < 0 || v > CHOOSE_MAX) {
      throw bad(`${name}: an integer in [0, 2^31)`, v);
    }
    return v;
  };
  const low: number[] = [];
  const high: number[] = [];
  for (const k of f.keys) {
    if (row[k.name] !== undefined) {
      const v = int(row[k.name], k.name);
      low.push(v);
      high.push(v);
    } else {
      low.push(row[`${k.name}_min`] === undefined ? 0 : int(row[`${k.name}_min`], `${k.name}_min`));
      high.push(
        row[`${k.name}_max`] === undefined
          ? CHOOSE_MAX
          : int(row[`${k.name}_max`], `${k.name}_max`),
      );
    }
  }
  const values = f.fields.map((field) => {
    if (row[field.name] === undefined) throw bad(`a value of the field ${field.name}`, "none");
    return int(row[field.name], field.name);
  });
  return { low, high, values };
}

/**
 * The chooser's words of rows (user rows: family index, low bounds, high bounds, values).
 *
 * @example
 * ```ts
 * import { CHOOSE_ROW_WORDS, rowWords } from "@gyre/gyre/tuning";
 * rowWords("reduce", [{ r: 1, n: 64, sg: true, al: true, variant: 0, subgroups: 1 }]).length ===
 *   CHOOSE_ROW_WORDS; // true
 * ```
 */
export function rowWords(family: TuneFamilyName, rows: readonly ChooseRow[]): Int32Array {
  const words = new Int32Array(rows.length * CHOOSE_ROW_WORDS);
  rows.forEach((row, i) => {
    const { low, high, values } = rowBounds(family, row);
    const at = i * CHOOSE_ROW_WORDS;
    words[at] = TUNE_FAMILIES.indexOf(family);
    for (let s = 0; s < CHOOSE_SLOTS; s++) {
      words[at + 1 + s] = low[s] ?? 0;
      words[at + 1 + CHOOSE_SLOTS + s] = high[s] ?? CHOOSE_MAX;
      words[at + 1 + 2 * CHOOSE_SLOTS + s] = values[s] ?? 0;
    }
  });
  return words;
}

/**
 * Table rows from a grid of measured keys and their winners: each numeric variable's range runs
 * from the geometric midpoint with the grid's previous value to that with its next (open at the
 * grid's ends), so any key between grid points takes its nearest point's winner; a variable the
 * grid holds at one value covers its power-of-two bucket; booleans are exact, and each
 * combination of them has its own grid.
 *
 * @example
 * ```ts
 * import { gridRows } from "@gyre/gyre/tuning";
 * const choice = { variant: 1, wg: 256, ept: 32 };
 * const keys = [1024, 4096].map((n) => ({ r: 1, n, sg: true, al: true }));
 * gridRows("scan", keys, [choice, choice])
 *   .map((row) => [row.n_min, row.n_max]); // [[0, 2047], [2048, 2147483647]]
 * ```
 */
export function gridRows(
  family: TuneFamilyName,
  keys: readonly Readonly<Record<string, number | boolean>>[],
  choices: readonly TuneChoice[],
): Record<string, number | boolean>[] {
  const f = TUNE_FAMILY[family];
  // Each combination of the flags has its own grid (unaligned keys sit beside aligned ones).
  const flagsOf = (key: Readonly<Record<string, number | boolean>>) =>
    JSON.stringify(f.keys.filter((k) => k.type === "bool").map((k) => key[k.name]));
  const gridOf = (flags: string, name: string) =>
    [...new Set(keys.filter((key) => flagsOf(key) === flags).map((key) => key[name] as number))]
      .sort((a, b) => a - b);
  return keys.map((key, i) => {
    const row: Record<string, number | boolean> = {};
    for (const k of f.keys) {
      const v = key[k.name];
      if (typeof v === "boolean") {
        row[k.name] = v;
        continue;
      }
      const grid = gridOf(flagsOf(key), k.name);
      const at = grid.indexOf(v);
      if (grid.length === 1) {
        const bucket = sizeBucket(v);
        row[`${k.name}_min`] = bucket;
        row[`${k.name}_max`] = Math.min(CHOOSE_MAX, Math.max(bucket, 2 * bucket - 1));
        continue;
      }
      row[`${k.name}_min`] = at === 0 ? 0 : Math.ceil(Math.sqrt(grid[at - 1] * v));
      row[`${k.name}_max`] = at === grid.length - 1
        ? CHOOSE_MAX
        : Math.min(CHOOSE_MAX, Math.ceil(Math.sqrt(v * grid[at + 1])) - 1);
    }
    for (const field of f.fields) row[field.name] = choices[i][field.name];
    return row;
  });
}

/** One measured key: its candidates' median times (microseconds), by choice. */
export interface MeasuredKey {
  /** The key. */
  key: Readonly<Record<string, number | boolean>>;
  /** Each candidate measured there and its median time. */
  timings: readonly { choice: TuneChoice; us: number }[];
  /** The hand-written plan's choice there (a cell where it keeps up gets no row). */
  plan?: TuneChoice;
  /**
   * The spread of the plan's samples there (median absolute deviation over median): a row must
   * beat the plan by more than this too, or a noisy device's tables follow its noise.
   */
  noise?: number;
}

/**
 * How much worse on average over a cell's corners than the cell's best the plan may be and keep
 * the cell (no row): a row must win clearly, since a choice best at the corners can lose between
 * them, where the plan, deciding key by key, adapts.
 */
export const PLAN_MARGIN = 0.03;

/**
 * The median of timing samples (the mean of the middle two for an even count).
 *
 * @example
 * ```ts
 * import { sampleMedian } from "@gyre/gyre/tuning";
 * sampleMedian([3, 1, 2, 10]); // 2.5
 * ```
 */
export function sampleMedian(values: readonly number[]): number {
  const s = [...values].sort((a, b) => a - b);
  const h = s.length >> 1;
  return s.length % 2 ? s[h] : (s[h - 1] + s[h]) / 2;
}

/**
 * The relative spread of timing samples: their median absolute deviation over their median.
 *
 * @example
 * ```ts
 * import { sampleSpread } from "@gyre/gyre/tuning";
 * sampleSpread([9, 10, 11]); // 0.1
 * ```
 */
export function sampleSpread(values: readonly number[]): number {
  const m = sampleMedian(values);
  return m > 0 ? sampleMedian(values.map((v) => Math.abs(v - m))) / m : 0;
}

/** What a candidate unmeasured at a corner costs in a cell's score (twice the corner's best). */
const UNMEASURED = 2;

/**
 * Table rows for the cells between a grid of measured keys: each numeric variable's range runs
 * from one grid value to the next (the first cell from 0, the last to the largest i32, so keys
 * past the grid take its edge), and the cell's choice is the candidate whose time relative to
 * each measured corner's fastest is lowest on average: good across the cell, not only at one
 * corner. A variable the grid holds at one value covers its power-of-two bucket; booleans are
 * exact. Cells with no measured corner get no row, and neither do cells where the plan's own
 * choices (where the measurements name them) come within 3% of the best on average, or within
 * their samples' spread where that is wider: there the plan decides.
 *
 * @example
 * ```ts
 * import { cellRows } from "@gyre/gyre/tuning";
 * const a = { variant: 1, wg: 256, ept: 32 }, b = { variant: 2, wg: 256, ept: 16 };
 * const rows = cellRows("scan", [
 *   { key: { r: 1, n: 1024, sg: true, al: true }, timings: [{ choice: a, us: 10 }, { choice: b, us: 12 }] },
 *   { key: { r: 1, n: 4096, sg: true, al: true }, timings: [{ choice: a, us: 30 }, { choice: b, us: 20 }] },
 * ]);
 * rows.map((row) => [row.n_min, row.n_max, row.variant]); // [[0, 2147483647, 2]]
 * ```
 */
export function cellRows(
  family: TuneFamilyName,
  measured: readonly MeasuredKey[],
): Record<string, number | boolean>[] {
  const f = TUNE_FAMILY[family];
  const numeric = f.keys.filter((k) => k.type === "number").map((k) => k.name);
  const flags = f.keys.filter((k) => k.type === "bool").map((k) => k.name);
  const groups = new Map<string, MeasuredKey[]>();
  for (const m of measured) {
    const text = JSON.stringify(flags.map((x) => m.key[x]));
    groups.set(text, [...(groups.get(text) ?? []), m]);
  }
  const rows: Record<string, number | boolean>[] = [];
  // Each combination of the flags has its own grid (unaligned keys sit beside aligned ones).
  for (const [flagText, group] of groups) {
    const flagKey = JSON.parse(flagText) as boolean[];
    rows.push(...mergeRows(family, groupCells(f, numeric, flags, flagKey, group)));
  }
  return rows;
}

/** The cells of one combination of the flags (see {@link cellRows}). */
function groupCells(
  f: (typeof TUNE_FAMILY)[TuneFamilyName],
  numeric: readonly string[],
  flags: readonly string[],
  flagKey: readonly boolean[],
  measured: readonly MeasuredKey[],
): Record<string, number | boolean>[] {
  const grid = new Map(
    numeric.map((
      n,
    ) => [n, [...new Set(measured.map((m) => m.key[n] as number))].sort((a, b) => a - b)]),
  );
  const byKey = new Map(measured.map((m) => [JSON.stringify(f.keys.map((k) => m.key[k.name])), m]));
  let cells: Record<string, number>[] = [{}];
  for (const n of numeric) {
    const g = grid.get(n)!;
    const intervals = Math.max(1, g.length - 1);
    cells = cells.flatMap((c) => Array.from({ length: intervals }, (_, i) => ({ ...c, [n]: i })));
  }
  const rows: Record<string, number | boolean>[] = [];
  for (const cell of cells) {
    // The cell's corners: each variable at its interval's low or high grid value.
    let corners: Record<string, number>[] = [{}];
    for (const n of numeric) {
      const g = grid.get(n)!;
      const ends = g.length === 1 ? [g[0]] : [g[cell[n]], g[cell[n] + 1]];
      corners = corners.flatMap((c) => ends.map((v) => ({ ...c, [n]: v })));
    }
    const found = corners.flatMap((c) => {
      const key = f.keys.map((
        k,
      ) => (k.type === "bool" ? flagKey[flags.indexOf(k.name)] : c[k.name]));
      const m = byKey.get(JSON.stringify(key));
      return m ? [m] : [];
    });
    if (!found.length) continue;
    const scores = new Map<string, { choice: TuneChoice; score: number }>();
    for (const m of found) {
      for (const t of m.timings) scores.set(choiceText(t.choice), { choice: t.choice, score: 0 });
    }
    for (const m of found) {
      const best = Math.min(...m.timings.map((t) => t.us));
      const at = new Map(m.timings.map((t) => [choiceText(t.choice), t.us / best]));
      for (const [text, s] of scores) s.score += at.get(text) ?? UNMEASURED;
    }
    const winner = [...scores.values()].reduce((a, b) => (b.score < a.score ? b : a));
    if (found.every((m) => m.plan)) {
      // The plan's own choice at each corner (it may differ from corner to corner).
      const planScore = found.reduce((sum, m) => {
        const best = Math.min(...m.timings.map((t) => t.us));
        const own = m.timings.find((t) => choiceText(t.choice) === choiceText(m.plan!));
        return sum + (own ? own.us / best : UNMEASURED);
      }, 0);
      const margin = found.reduce((sum, m) => sum + Math.max(PLAN_MARGIN, m.noise ?? 0), 0);
      if (planScore <= winner.score + margin) continue;
    }
    const row: Record<string, number | boolean> = {};
    for (const k of f.keys) {
      if (k.type === "bool") {
        row[k.name] = flagKey[flags.indexOf(k.name)];
        continue;
      }
      const g = grid.get(k.name)!;
      if (g.length === 1) {
        const bucket = sizeBucket(g[0]);
        row[`${k.name}_min`] = bucket;
        row[`${k.name}_max`] = Math.min(CHOOSE_MAX, Math.max(bucket, 2 * bucket - 1));
        continue;
      }
      const i = cell[k.name];
      row[`${k.name}_min`] = i === 0 ? 0 : g[i];
      row[`${k.name}_max`] = i === g.length - 2 ? CHOOSE_MAX : g[i + 1] - 1;
    }
    for (const field of f.fields) row[field.name] = winner.choice[field.name];
    rows.push(row);
  }
  return rows;
}

/**
 * The same table in fewer rows: consecutive rows that choose alike and differ only in one
 * numeric variable whose ranges meet become one row (first-match order is kept, so every key
 * gets the choice it got before).
 *
 * @example
 * ```ts
 * import { mergeRows } from "@gyre/gyre/tuning";
 * const a = { variant: 1, wg: 256, ept: 32 };
 * mergeRows("scan", [
 *   { r: 1, n_min: 0, n_max: 99, sg: true, al: true, ...a },
 *   { r: 1, n_min: 100, n_max: 199, sg: true, al: true, ...a },
 * ]).length; // 1
 * ```
 */
export function mergeRows(
  family: TuneFamilyName,
  rows: readonly ChooseRow[],
): Record<string, number | boolean>[] {
  const f = TUNE_FAMILY[family];
  const out: Record<string, number | boolean>[] = [];
  for (const row of rows) {
    const last = out.at(-1);
    if (last && f.fields.every((x) => last[x.name] === row[x.name])) {
      const a = rowBounds(family, last), b = rowBounds(family, row);
      const differ = f.keys.map((_, i) => i).filter((i) =>
        a.low[i] !== b.low[i] || a.high[i] !== b.high[i]
      );
      if (differ.length === 1 && f.keys[differ[0]].type === "number") {
        const i = differ[0];
        const name = f.keys[i].name;
        if (a.high[i] + 1 === b.low[i] || b.high[i] + 1 === a.low[i]) {
          const merged = { ...last };
          delete merged[name];
          merged[`${name}_min`] = Math.min(a.low[i], b.low[i]);
          merged[`${name}_max`] = Math.max(a.high[i], b.high[i]);
          out[out.length - 1] = merged;
          continue;
        }
      }
    }
    out.push({ ...row });
  }
  return out;
}

/**
 * A key inside a table row's cell: each size the geometric mean of its bounds, or the point
 * `at` of the way between them on a log scale (the smallest
 * and largest measured sizes standing for the table's edges, which reach 0 and 2^31 - 1), no
 * power of two, a multiple of 4 where the row is for aligned keys and odd where it is for
 * unaligned ones; a size the grid never varied keeps its one value. Null where a cell is too
 * narrow for such a size. The tuner measures a row's
 * choice beside the plan's there before it keeps the row.
 *
 * @example
 * ```ts
 * import { cellInterior } from "@gyre/gyre/tuning";
 * const row = { m_min: 64, m_max: 127, n_min: 128, n_max: 255, k_min: 64, k_max: 127, al: false };
 * const grid = [64, 128, 256].map((v) => ({ key: { m: v, n: v, k: v, al: false }, timings: [] }));
 * cellInterior("matmul", row, grid); // { m: 91, n: 181, k: 91, al: false }
 * cellInterior("matmul", row, grid, 0.25); // { m: 77, n: 153, k: 77, al: false }
 * ```
 */
export function cellInterior(
  family: TuneFamilyName,
  row: Readonly<Record<string, number | boolean>>,
  measured: readonly MeasuredKey[],
  at = 0.5,
): Record<string, number | boolean> | null {
  const key: Record<string, number | boolean> = {};
  for (const k of TUNE_FAMILY[family].keys) {
    if (k.type === "bool") {
      key[k.name] = row[k.name] as boolean;
      continue;
    }
    const values = [...new Set(measured.map((m) => m.key[k.name] as number))];
    if (values.length === 1) {
      key[k.name] = values[0];
      continue;
    }
    const low = Math.max(1, row[`${k.name}_min`] as number, Math.min(...values));
    const high = Math.max(low, Math.min(row[`${k.name}_max`] as number, Math.max(...values)));
    let v = Math.round(low ** (1 - at) * high ** at);
    if (row.al === true) v = Math.max(4, Math.ceil(v / 4) * 4);
    else if (row.al === false) v |= 1;
    if (v > 2 && (v & (v - 1)) === 0) v += row.al === true ? 4 : row.al === false ? 2 : 1;
    // A cell too narrow for such a size has no interior to check.
    if (v < low || v > (row[`${k.name}_max`] as number)) return null;
    key[k.name] = v;
  }
  return key;
}
