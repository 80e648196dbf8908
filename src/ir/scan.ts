/**
 * The scan operators' vocabulary, shared by the plans, the contract's scan job and both devices.
 * @module
 */

/** Scan operators. */
export type ScanOp = "sum" | "prod" | "max" | "min";

/**
 * What the scan computes in: its register type and identities. "bool" computes in u32 with the
 * identities of "any" (max) and "all" (min).
 */
export type ScanType = "f32" | "i32" | "u32" | "bool";
