/**
 * The tunable kernel families: each one's key (the SpiralK variables a rule reads and the table
 * is keyed by), its choice fields with the values a tuner tries, and the bridge to its plan (the
 * override a choice becomes, and the choice a plan's result is). Pure: a candidate is legal when
 * the plan, given its override, makes exactly that choice (so the plan's own checks of the
 * device's limits prune the space, and nothing the device cannot run is ever proposed).
 * @module
 */
import type { DeviceCaps } from "../core/caps.ts";
import { ValueError } from "../core/errors.ts";
import {
  MATMUL_TILES,
  type MatmulChoice,
  planMatmul,
  planWasmGemm,
  type WasmGemmChoice,
} from "../plans/matmul.ts";
import { planReduce, type ReduceChoice } from "../plans/reduce.ts";
import { planScan, SCAN_VARIANTS, type ScanChoice } from "../plans/scan.ts";
import { planSort, type SortChoice, type SortVariant } from "../plans/sort.ts";
import { planRows, ROWS_VARIANTS, type RowsChoice } from "../plans/rows.ts";
import { planPool, POOL_VARIANTS, type PoolChoice } from "../plans/pool.ts";
import {
  ELEMENTWISE_VARIANTS,
  type ElementwiseChoice,
  planElementwise,
} from "../plans/elementwise.ts";
import type { RuleType } from "./spiralk.ts";

/** A family a tuner measures and a chooser decides. */
export type TuneFamilyName =
  | "rankk"
  | "sort"
  | "scan"
  | "reduce"
  | "matmul"
  | "rows"
  | "pool"
  | "elementwise"
  | "wasmGemm";

/**
 * The families a tuner measures and a chooser decides.
 *
 * @example
 * ```ts
 * import { TUNE_FAMILIES } from "@gyre/gyre/tuning";
 * TUNE_FAMILIES.includes("matmul"); // true
 * ```
 */
export const TUNE_FAMILIES: readonly TuneFamilyName[] = [
  "rankk",
  "sort",
  "scan",
  "reduce",
  "matmul",
  "rows",
  "pool",
  "elementwise",
  "wasmGemm",
];

/** A family's key at one problem: its SpiralK variables' values. */
export type TuneKey = Readonly<Record<string, number | boolean>>;
/** A choice: a value for each of the family's fields (booleans as 0 and 1). */
export type TuneChoice = Readonly<Record<string, number>>;

/** A key variable. */
export interface TuneKeyVar {
  /** Its name in rules and tables. */
  name: string;
  /** Its SpiralK type. */
  type: RuleType;
  /** What it is. */
  doc: string;
}

/** A choice field and the values a tuner tries. */
export interface TuneField {
  /** Its name in rules and tables. */
  name: string;
  /** The values tried (a plan's own choice may hold others). */
  values: readonly number[];
  /** Names of the values, where they stand for named forms (index = value). */
  labels?: readonly string[];
  /** What it is. */
  doc: string;
}

/** A tunable family: key, fields, and the bridge to its plan. */
export interface TuneFamily {
  /** The family's name. */
  name: TuneFamilyName;
  /** The plan override family its choices become. */
  plan: "sort" | "scan" | "reduce" | "matmul" | "rows" | "pool" | "elementwise" | "wasmGemm";
  /**
   * The device whose plan it is: the GPU (absent), or the WASM device (measured by wall clock,
   * decided with no GPU's capabilities, its tuning cached under the WASM device's fingerprint).
   */
  device?: "wasm";
  /** What the family decides. */
  summary: string;
  /** Its key variables. */
  keys: readonly TuneKeyVar[];
  /** Its choice fields. */
  fields: readonly TuneField[];
  /**
   * Whether a tuner measures `choice` at `key` (default: every legal one); a narrower set than
   * the legal one, where some fields matter only in a few of their values.
   */
  tries?(key: TuneKey, choice: TuneChoice): boolean;
  /** The choice the plan makes at `key` under `override` (null where the plan refuses it). */
  realize(caps: DeviceCaps | undefined, key: TuneKey, override: object | null): TuneChoice | null;
  /** The plan override a choice becomes. */
  override(choice: TuneChoice): object;
  /**
   * How well a choice's tiles fit the key, in [0, 1] (1: no padded or idle work): a metric
   * SoftLogic and the consensus add to soft rules' weights.
   */
  fit(caps: DeviceCaps | undefined, key: TuneKey, choice: TuneChoice): number;
}

/**
 * Rank-K's merge kinds, by the value of its `mk` field (the numbering: 2 streams).
 *
 * @example
 * ```ts
 * import { MERGE_KINDS } from "@gyre/gyre/tuning";
 * MERGE_KINDS[2]; // "subgroup"
 * ```
 */
export const MERGE_KINDS: readonly SortVariant[] = [
  "radix-ballot",
  "radix-select",
  "subgroup",
  "merge",
  "bitonic-tree",
  "bitonic-local",
  "radix",
  "bitonic",
];

const SORT_TILES = [512, 1024, 2048, 4096];

const num = (key: TuneKey, name: string) => key[name] as number;

/** The share of `padded` that `used` fills. */
const fill = (used: number, padded: number) => (padded > 0 ? Math.min(1, used / padded) : 1);

/** Rank-K and sort share the fields: a merge kind and its tile. */
function sortFamily(name: "rankk" | "sort"): TuneFamily {
  const rank = name === "rankk";
  return {
    name,
    plan: "sort",
    summary: rank
      ? "Rank-K (top, bottom, mid k of rows): the merge kind and its tile"
      : "sorting whole rows: the form and its tile",
    keys: [
      { name: "r", type: "number", doc: "rows" },
      { name: "c", type: "number", doc: "columns (the row length)" },
      ...(rank
        ? [{ name: "k", type: "number" as const, doc: "the window's end (k for top-k)" }]
        : []),
      { name: "sg", type: "bool", doc: "subgroup operations available" },
    ],
    fields: [
      {
        name: "mk",
        values: rank ? [0, 1, 2, 3, 4, 5, 6] : [0, 4, 5, 6],
        labels: MERGE_KINDS,
        doc: "the merge kind (0 radix-ballot, 1 radix-select, 2 subgroup, 3 merge, 4 " +
          "bitonic-tree, 5 bitonic-local, 6 radix, 7 bitonic)",
      },
      {
        name: "tile",
        values: SORT_TILES,
        doc: "pairs of a tree segment, stream buffer or radix tile",
      },
    ],
    realize(caps, key, override) {
      const c = num(key, "c");
      const keep = rank ? num(key, "k") : c;
      const choice = planSort(caps, { rows: num(key, "r"), length: c, keep }, override);
      return { mk: MERGE_KINDS.indexOf(choice.variant), tile: choice.tile };
    },
    override(choice): Partial<SortChoice> {
      return { variant: MERGE_KINDS[choice.mk], tile: choice.tile };
    },
    fit(_caps, key, choice) {
      // The tree and the streaming buffers pad a row's last segment; the rest stream every pair.
      const c = num(key, "c");
      const form = MERGE_KINDS[choice.mk];
      if (form === "bitonic-tree") return fill(c, Math.ceil(c / choice.tile) * choice.tile);
      if (form === "bitonic" || form === "bitonic-local") {
        return fill(c, 2 ** Math.ceil(Math.log2(c)));
      }
      return 1;
    },
  };
}

/** The key of scans and reductions along contiguous rows. */
const ROWS_KEYS: readonly TuneKeyVar[] = [
  { name: "r", type: "number", doc: "rows" },
  { name: "n", type: "number", doc: "the row length" },
  { name: "sg", type: "bool", doc: "subgroup operations available" },
  { name: "al", type: "bool", doc: "rows a multiple of 4 long (vector loads)" },
];

const SCAN_SIZES = [256, 512];
const SCAN_PER_THREAD = [16, 32];

const scanFamily: TuneFamily = {
  name: "scan",
  plan: "scan",
  summary: "cumulative sums along rows: the form and its tile",
  keys: ROWS_KEYS,
  fields: [
    {
      name: "variant",
      values: [0, 1, 2],
      labels: SCAN_VARIANTS,
      doc: "0 row, 1 lookback, 2 multipass",
    },
    { name: "wg", values: SCAN_SIZES, doc: "invocations of a workgroup" },
    { name: "ept", values: SCAN_PER_THREAD, doc: "elements an invocation scans" },
  ],
  realize(caps, key, override) {
    const choice = planScan(
      caps,
      { rows: num(key, "r"), rowLength: num(key, "n"), op: "sum" },
      override as Partial<ScanChoice>,
    );
    return {
      variant: SCAN_VARIANTS.indexOf(choice.variant),
      wg: choice.workgroupSize,
      ept: choice.elementsPerThread,
    };
  },
  override(choice): Partial<ScanChoice> {
    return {
      variant: SCAN_VARIANTS[choice.variant],
      workgroupSize: choice.wg,
      elementsPerThread: choice.ept,
    };
  },
  fit(_caps, key, choice) {
    const n = num(key, "n");
    const tile = choice.wg * choice.ept;
    return fill(n, Math.ceil(n / tile) * tile);
  },
};

const REDUCE_FORMS = ["workgroup", "thread"] as const;

const reduceFamily: TuneFamily = {
  name: "reduce",
  plan: "reduce",
  summary: "sums along contiguous rows: one workgroup or one invocation a row, subgroups or not",
  keys: ROWS_KEYS,
  fields: [
    { name: "variant", values: [0, 1], labels: REDUCE_FORMS, doc: "0 workgroup, 1 thread" },
    { name: "subgroups", values: [0, 1], doc: "combine by subgroup operations (1) or memory" },
  ],
  realize(caps, key, override) {
    const choice = planReduce(
      caps,
      { rows: num(key, "r"), rowLength: num(key, "n"), aligned: num(key, "n") % 4 === 0 },
      override as Partial<ReduceChoice>,
    );
    return { variant: REDUCE_FORMS.indexOf(choice.variant), subgroups: Number(choice.subgroups) };
  },
  override(choice): Partial<ReduceChoice> {
    return { variant: REDUCE_FORMS[choice.variant], subgroups: choice.subgroups === 1 };
  },
  fit(_caps, key, choice) {
    // A workgroup of 256 on a short row idles most of its invocations.
    return choice.variant === 0 ? fill(num(key, "n"), 256) : 1;
  },
};

const matmulFamily: TuneFamily = {
  name: "matmul",
  plan: "matmul",
  summary: "float32 matrix products: the tile, K splits and stream-K",
  keys: [
    { name: "m", type: "number", doc: "rows of the product" },
    { name: "n", type: "number", doc: "columns of the product" },
    { name: "k", type: "number", doc: "the shared dimension" },
    { name: "al", type: "bool", doc: "n and k multiples of 4 (vector loads)" },
  ],
  fields: [
    {
      name: "tile",
      values: MATMUL_TILES.map((_, i) => i),
      labels: MATMUL_TILES.map((t) => `${t.tileM}x${t.tileN}x${t.tileK}/${t.threadM}x${t.threadN}`),
      doc: "the output tile (0 the largest, 128x128)",
    },
    { name: "split", values: [1, 2, 4, 8], doc: "splits of K (1: none)" },
    { name: "sk", values: [0, 1], doc: "stream-K (1) over the last wave" },
  ],
  realize(caps, key, override) {
    let choice: MatmulChoice;
    try {
      choice = planMatmul(
        caps,
        { m: num(key, "m"), n: num(key, "n"), k: num(key, "k"), batch: 1, dtype: "float32" },
        override as Partial<MatmulChoice>,
      );
    } catch (e) {
      if (e instanceof ValueError) return null;
      throw e;
    }
    if (choice.variant === "gemv") return null;
    const tile = MATMUL_TILES.findIndex((t) =>
      t.tileM === choice.tileM && t.tileN === choice.tileN && t.tileK === choice.tileK &&
      t.threadM === choice.threadM && t.threadN === choice.threadN
    );
    if (tile < 0) return null;
    return { tile, split: choice.splitK, sk: Number(choice.variant === "streamK") };
  },
  override(choice): Partial<MatmulChoice> {
    const t = MATMUL_TILES[choice.tile];
    return {
      tileM: t.tileM,
      tileN: t.tileN,
      tileK: t.tileK,
      threadM: t.threadM,
      threadN: t.threadN,
      laneColumns: t.laneColumns,
      variant: choice.split > 1 ? "splitK" : choice.sk ? "streamK" : "tiled",
      splitK: choice.split,
    };
  },
  fit(_caps, key, choice) {
    const t = MATMUL_TILES[choice.tile];
    const m = num(key, "m"), n = num(key, "n");
    return fill(m * n, Math.ceil(m / t.tileM) * t.tileM * Math.ceil(n / t.tileN) * t.tileN);
  },
};

/** Invocations a workgroup may hold on a device (256 where none is known). */
const maxInvocations = (caps: DeviceCaps | undefined) =>
  caps?.limits.maxComputeInvocationsPerWorkgroup ?? 256;

const rowsFamily: TuneFamily = {
  name: "rows",
  plan: "rows",
  summary:
    "softmax and the norms along contiguous rows: one pass or chunks, lanes a row, units a lane",
  keys: [
    { name: "r", type: "number", doc: "rows" },
    { name: "n", type: "number", doc: "the row length" },
    { name: "sg", type: "bool", doc: "subgroup operations available" },
    { name: "al", type: "bool", doc: "rows of whole aligned vec4 units (vector loads)" },
  ],
  fields: [
    { name: "variant", values: [0, 1], labels: ROWS_VARIANTS, doc: "0 single, 1 chunked" },
    {
      name: "tpr",
      values: [1, 4, 16, 32, 64, 128, 256, 512, 1024],
      doc: "invocations sharing a row",
    },
    {
      name: "reg",
      values: [0, 4, 8],
      doc: "units a lane keeps in registers, chunked (0: a single pass's, derived from the lanes)",
    },
  ],
  // Lanes past the row's units would only idle (a row of 17 on 1024 lanes took 17 s on
  // lavapipe, against 1.8 ms on 4); chunks want a workgroup's worth of lanes.
  tries(key, choice) {
    const units = Math.ceil(num(key, "n") / (key.al ? 4 : 1));
    if (choice.tpr > Math.max(4, 2 ** Math.ceil(Math.log2(units)))) return false;
    return choice.variant === 0 || choice.tpr >= 64;
  },
  realize(caps, key, override) {
    const choice = planRows(
      caps,
      { rows: num(key, "r"), rowLength: num(key, "n"), vec4: key.al === true },
      override as Partial<RowsChoice>,
    );
    return {
      variant: ROWS_VARIANTS.indexOf(choice.variant),
      tpr: choice.threadsPerRow,
      reg: choice.variant === "single" ? 0 : choice.registers,
    };
  },
  override(choice): Partial<RowsChoice> {
    return {
      variant: ROWS_VARIANTS[choice.variant],
      threadsPerRow: choice.tpr,
      ...(choice.reg ? { registers: choice.reg } : {}),
      workgroupSize: Math.max(256, choice.tpr),
    };
  },
  fit(_caps, key, choice) {
    const units = Math.ceil(num(key, "n") / (key.al ? 4 : 1));
    const tile = choice.tpr * (choice.reg || 2 ** Math.ceil(Math.log2(units / choice.tpr)));
    return fill(units, Math.ceil(units / tile) * tile);
  },
};

/** A square window of side `k` at stride `s` over output rows `w` wide: the plan's problem. */
function poolProblem(key: TuneKey) {
  const [k, s, w] = [num(key, "k"), num(key, "s"), num(key, "w")];
  return {
    window: "regular" as const,
    kernel: [k, k] as const,
    stride: [s, s] as const,
    padding: [0, 0] as const,
    dilation: [1, 1] as const,
    inWidth: (w - 1) * s + k,
    outWidth: w,
    alignedOffset: true,
    totalOutputs: num(key, "o"),
  };
}

const poolFamily: TuneFamily = {
  name: "pool",
  plan: "pool",
  summary: "2-D pooling of square windows without padding: the form and outputs an invocation",
  keys: [
    { name: "k", type: "number", doc: "the window's side" },
    { name: "s", type: "number", doc: "the stride" },
    { name: "w", type: "number", doc: "the output's width" },
    { name: "o", type: "number", doc: "outputs in all (planes x height x width)" },
  ],
  // The workgroup stays the plan's: on an H200 its best size moved between 128, 256 and 512 by a
  // few percent from key to key, and a table of it (each unrolled window and size a shader to
  // compile) missed more held-out keys than it won (38% within 5%, tuning in 84 s).
  fields: [
    {
      name: "variant",
      values: [0, 1, 2],
      labels: POOL_VARIANTS,
      doc: "0 unrolled, 1 looped, 2 team",
    },
    { name: "opi", values: [1, 2, 4], doc: "neighbouring outputs an invocation (unrolled)" },
  ],
  realize(caps, key, override) {
    const choice = planPool(caps, poolProblem(key), override as Partial<PoolChoice>);
    return { variant: POOL_VARIANTS.indexOf(choice.variant), opi: choice.outputsPerInvocation };
  },
  override(choice): Partial<PoolChoice> {
    return {
      variant: POOL_VARIANTS[choice.variant],
      outputsPerInvocation: choice.opi as 1 | 2 | 4,
    };
  },
  fit(_caps, key, choice) {
    const w = num(key, "w");
    return fill(w, Math.ceil(w / choice.opi) * choice.opi);
  },
};

const ELEMENTWISE_WORKGROUPS = [64, 128, 256, 512, 1024];

const elementwiseFamily: TuneFamily = {
  name: "elementwise",
  plan: "elementwise",
  summary: "elementwise kernels: vector or scalar loads, tiles for transposed operands, workgroup",
  keys: [
    { name: "e", type: "number", doc: "elements of the result" },
    { name: "v", type: "bool", doc: "every operand allows vec4 loads" },
    { name: "t", type: "bool", doc: "a transposed matrix among the operands" },
  ],
  fields: [
    {
      name: "variant",
      values: [0, 1, 3],
      labels: ELEMENTWISE_VARIANTS,
      doc: "0 vec4, 1 scalar, 3 tiled (2, the transposing copy, is a plain copy's own)",
    },
    { name: "wg", values: ELEMENTWISE_WORKGROUPS, doc: "invocations of a workgroup" },
  ],
  realize(caps, key, override) {
    const choice = planElementwise(
      caps,
      { elements: num(key, "e"), vec4Eligible: key.v === true, transposedOperands: Number(key.t) },
      override as Partial<ElementwiseChoice>,
    );
    if (choice.workgroupSize > maxInvocations(caps)) return null;
    return { variant: ELEMENTWISE_VARIANTS.indexOf(choice.variant), wg: choice.workgroupSize };
  },
  override(choice): Partial<ElementwiseChoice> {
    return { variant: ELEMENTWISE_VARIANTS[choice.variant], workgroupSize: choice.wg };
  },
  fit(_caps, key, choice) {
    const e = num(key, "e");
    const per = choice.wg * (choice.variant === 0 ? 4 : 1);
    return fill(e, Math.ceil(e / per) * per);
  },
};

const WASM_GEMM_SPLITS = ["rows", "columns"] as const;

const wasmGemmFamily: TuneFamily = {
  name: "wasmGemm",
  plan: "wasmGemm",
  device: "wasm",
  summary: "float32 products on the WASM device: threads, and the side of C they split",
  keys: [
    { name: "m", type: "number", doc: "rows of the product (over the batch)" },
    { name: "n", type: "number", doc: "columns of the product" },
    { name: "k", type: "number", doc: "the shared dimension" },
    { name: "t", type: "number", doc: "threads the WASM device can run (1 without shared memory)" },
  ],
  fields: [
    { name: "threads", values: [1, 2, 4, 8, 16], doc: "threads sharing the product" },
    { name: "split", values: [0, 1], labels: WASM_GEMM_SPLITS, doc: "0 rows of C, 1 columns" },
  ],
  realize(_caps, key, override) {
    const t = num(key, "t");
    const choice = planWasmGemm(
      { m: num(key, "m"), n: num(key, "n"), k: num(key, "k"), batch: 1, cores: t },
      override as Partial<WasmGemmChoice>,
    );
    if (choice.threads > Math.max(1, t)) return null;
    return { threads: choice.threads, split: WASM_GEMM_SPLITS.indexOf(choice.split) };
  },
  override(choice): Partial<WasmGemmChoice> {
    return { threads: choice.threads, split: WASM_GEMM_SPLITS[choice.split] };
  },
  fit(_caps, key, choice) {
    // Threads share C's rows or columns in tiles: a side shorter than the threads idles some.
    const side = choice.split === 0 ? num(key, "m") : num(key, "n");
    return fill(side, Math.max(side, choice.threads * 8));
  },
};

/**
 * Every tunable family, by name.
 *
 * @example
 * ```ts
 * import { TUNE_FAMILY } from "@gyre/gyre/tuning";
 * TUNE_FAMILY.rankk.keys.map((k) => k.name); // ["r", "c", "k", "sg"]
 * ```
 */
export const TUNE_FAMILY: Readonly<Record<TuneFamilyName, TuneFamily>> = {
  rankk: sortFamily("rankk"),
  sort: sortFamily("sort"),
  scan: scanFamily,
  reduce: reduceFamily,
  matmul: matmulFamily,
  rows: rowsFamily,
  pool: poolFamily,
  elementwise: elementwiseFamily,
  wasmGemm: wasmGemmFamily,
};

/**
 * Whether `family` is the WASM device's (measured by wall clock, decided with no GPU's
 * capabilities, cached under the WASM device's fingerprint) rather than a GPU's.
 *
 * @example
 * ```ts
 * import { onWasmDevice } from "@gyre/gyre/tuning";
 * onWasmDevice("wasmGemm"); // true
 * onWasmDevice("matmul"); // false
 * ```
 */
export function onWasmDevice(family: TuneFamilyName): boolean {
  return TUNE_FAMILY[family].device === "wasm";
}

/**
 * A family's SpiralK variables (its key's names and types).
 *
 * @example
 * ```ts
 * import { familyVariables } from "@gyre/gyre/tuning";
 * familyVariables("rankk"); // { r: "number", c: "number", k: "number", sg: "bool" }
 * ```
 */
export function familyVariables(family: TuneFamilyName): Record<string, RuleType> {
  return Object.fromEntries(TUNE_FAMILY[family].keys.map((k) => [k.name, k.type]));
}

/**
 * The text of a choice, for comparing and printing (fields in name order).
 *
 * @example
 * ```ts
 * import { choiceText } from "@gyre/gyre/tuning";
 * choiceText({ tile: 512, mk: 1 }); // "mk=1 tile=512"
 * ```
 */
export function choiceText(choice: TuneChoice): string {
  return Object.keys(choice).sort().map((f) => `${f}=${choice[f]}`).join(" ");
}

/**
 * Every legal choice of `family` at `key` on a device: the product of its fields' values, kept
 * where the plan makes exactly that choice when asked for it, with the plan's own choice first.
 *
 * @example
 * ```ts
 * import { familyCandidates } from "@gyre/gyre/tuning";
 * familyCandidates("scan", undefined, { r: 1, n: 1 << 20, sg: false, al: true }).length > 1; // true
 * ```
 */
export function familyCandidates(
  family: TuneFamilyName,
  caps: DeviceCaps | undefined,
  key: TuneKey,
): TuneChoice[] {
  const f = TUNE_FAMILY[family];
  const planned = f.realize(caps, key, null);
  const out = new Map<string, TuneChoice>();
  if (planned) out.set(choiceText(planned), planned);
  let product: Record<string, number>[] = [{}];
  for (const field of f.fields) {
    product = product.flatMap((c) => field.values.map((v) => ({ ...c, [field.name]: v })));
  }
  for (const choice of product) {
    if (f.tries && !f.tries(key, choice)) continue;
    if (legalChoice(family, caps, key, choice)) out.set(choiceText(choice), choice);
  }
  return [...out.values()];
}

/**
 * Whether the plan makes exactly `choice` at `key` when asked for it (so the device can run it).
 *
 * @example
 * ```ts
 * import { legalChoice } from "@gyre/gyre/tuning";
 * legalChoice("reduce", undefined, { r: 1, n: 4096, sg: false, al: true }, {
 *   variant: 0,
 *   subgroups: 1,
 * });
 * // false: no device with subgroups is known
 * ```
 */
export function legalChoice(
  family: TuneFamilyName,
  caps: DeviceCaps | undefined,
  key: TuneKey,
  choice: TuneChoice,
): boolean {
  const f = TUNE_FAMILY[family];
  if (!f.fields.every((field) => Number.isFinite(choice[field.name]))) return false;
  const realized = f.realize(caps, key, f.override(choice));
  return realized !== null && choiceText(realized) === choiceText(choice);
}

/**
 * The tunable family and key of a sort of `rows` rows of `length` whose window ends at `keep`:
 * Rank-K where the window ends before the row does, else a whole sort.
 *
 * @example
 * ```ts
 * import { sortTuneKey } from "@gyre/gyre/tuning";
 * sortTuneKey(undefined, 8, 65536, 64).family; // "rankk"
 * ```
 */
export function sortTuneKey(
  caps: DeviceCaps | undefined,
  rows: number,
  length: number,
  keep: number,
): { family: "rankk" | "sort"; key: TuneKey } {
  const sg = Boolean(caps?.subgroups);
  return keep < length
    ? { family: "rankk", key: { r: rows, c: length, k: keep, sg } }
    : { family: "sort", key: { r: rows, c: length, sg } };
}

/**
 * The key of a scan or reduction of `rows` contiguous rows of `length`.
 *
 * @example
 * ```ts
 * import { rowsTuneKey } from "@gyre/gyre/tuning";
 * rowsTuneKey(undefined, 1, 1 << 20); // { r: 1, n: 1048576, sg: false, al: true }
 * ```
 */
export function rowsTuneKey(caps: DeviceCaps | undefined, rows: number, length: number): TuneKey {
  return { r: rows, n: length, sg: Boolean(caps?.subgroups), al: length % 4 === 0 };
}

/**
 * The key of a float32 product of [m, k] and [k, n].
 *
 * @example
 * ```ts
 * import { matmulTuneKey } from "@gyre/gyre/tuning";
 * matmulTuneKey(1000, 1000, 1001); // { m: 1000, n: 1000, k: 1001, al: false }
 * ```
 */
export function matmulTuneKey(m: number, n: number, k: number): TuneKey {
  return { m, n, k, al: n % 4 === 0 && k % 4 === 0 };
}

/**
 * Checks that every name in `families` is a tunable family; a ValueError naming `op`, the
 * `argument` and the first name that is not otherwise.
 *
 * @example
 * ```ts
 * import { checkTuneFamilies } from "@gyre/gyre/tuning";
 * checkTuneFamilies("tune", "families", ["scan", "matmul"]); // passes
 * ```
 */
export function checkTuneFamilies(
  op: string,
  argument: string,
  families: readonly unknown[],
): void {
  for (const family of families) {
    if (!TUNE_FAMILIES.includes(family as TuneFamilyName)) {
      throw new ValueError({
        op,
        argument,
        expected: `families of ${TUNE_FAMILIES.join(", ")}`,
        received: String(family),
      });
    }
  }
}

/**
 * Checks that `family` is a tunable family and `key` gives each of its variables, of its type
 * (numbers: integers from 0 to 2^31 - 1); a ValueError naming `op` and the variable otherwise.
 *
 * @example
 * ```ts
 * import { checkTuneKey } from "@gyre/gyre/tuning";
 * checkTuneKey("explain", "scan", { r: 1, n: 4096, sg: true, al: true }); // passes
 * ```
 */
export function checkTuneKey(op: string, family: unknown, key: unknown): void {
  if (!TUNE_FAMILIES.includes(family as TuneFamilyName)) {
    throw new ValueError({
      op,
      argument: "family",
      expected: TUNE_FAMILIES.map((f) => `"${f}"`).join(", "),
      received: String(family),
    });
  }
  if (typeof key !== "object" || key === null || Array.isArray(key)) {
    throw new ValueError({
      op,
      argument: "key",
      expected: "an object of the family's key variables",
      received: key === null ? "null" : typeof key,
    });
  }
  for (const v of TUNE_FAMILY[family as TuneFamilyName].keys) {
    const value = (key as Record<string, unknown>)[v.name];
    const ok = v.type === "bool"
      ? typeof value === "boolean"
      : typeof value === "number" && Number.isInteger(value) && value >= 0 && value < 2 ** 31;
    if (!ok) {
      throw new ValueError({
        op,
        argument: `key.${v.name}`,
        expected: v.type === "bool" ? "a boolean" : "an integer in [0, 2^31)",
        received: value === undefined ? "undefined" : String(value),
      });
    }
  }
}

/**
 * The key of a row kernel (softmax, a norm) over `rows` contiguous rows of `length`, `vec4`
 * where the layout gives whole aligned vec4 units.
 *
 * @example
 * ```ts
 * import { rowsKernelTuneKey } from "@gyre/gyre/tuning";
 * rowsKernelTuneKey(undefined, 4096, 4096, true); // { r: 4096, n: 4096, sg: false, al: true }
 * ```
 */
export function rowsKernelTuneKey(
  caps: DeviceCaps | undefined,
  rows: number,
  length: number,
  vec4: boolean,
): TuneKey {
  return { r: rows, n: length, sg: Boolean(caps?.subgroups), al: vec4 };
}

/**
 * The key of a pooling of square `k` x `k` windows at stride `s` (both axes, no padding or
 * dilation) into `outputs` outputs of rows `width` wide; null for other poolings (not tuned).
 *
 * @example
 * ```ts
 * import { poolTuneKey } from "@gyre/gyre/tuning";
 * poolTuneKey([3, 3], [2, 2], [0, 0], [1, 1], 56, 64 * 56 * 56); // { k: 3, s: 2, w: 56, o: 200704 }
 * ```
 */
export function poolTuneKey(
  kernel: readonly [number, number],
  stride: readonly [number, number],
  padding: readonly [number, number],
  dilation: readonly [number, number],
  width: number,
  outputs: number,
): TuneKey | null {
  const square = kernel[0] === kernel[1] && stride[0] === stride[1];
  const plain = padding[0] === 0 && padding[1] === 0 && dilation[0] === 1 && dilation[1] === 1;
  return square && plain ? { k: kernel[0], s: stride[0], w: width, o: outputs } : null;
}

/**
 * The key of an elementwise kernel of `elements` outputs: whether every operand allows vec4
 * loads, and whether a transposed matrix is among them.
 *
 * @example
 * ```ts
 * import { elementwiseTuneKey } from "@gyre/gyre/tuning";
 * elementwiseTuneKey(1 << 20, true, false); // { e: 1048576, v: true, t: false }
 * ```
 */
export function elementwiseTuneKey(elements: number, vec4: boolean, transposed: boolean): TuneKey {
  return { e: elements, v: vec4, t: transposed };
}

/**
 * The key of a float32 product of `m` rows (over the batch), `n` columns and depth `k` on the
 * WASM device with `threads` threads available.
 *
 * @example
 * ```ts
 * import { wasmGemmTuneKey } from "@gyre/gyre/tuning";
 * wasmGemmTuneKey(512, 512, 512, 2); // { m: 512, n: 512, k: 512, t: 2 }
 * ```
 */
export function wasmGemmTuneKey(m: number, n: number, k: number, threads: number): TuneKey {
  return { m, n, k, t: threads };
}
