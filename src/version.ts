/**
 * gyre's version (deno.json's; a test keeps them equal): part of a device fingerprint, so tuning
 * results of one version are not taken for another's.
 * @module
 */

/**
 * The version of this gyre.
 *
 * @example
 * ```ts
 * import { VERSION } from "@gyre/gyre";
 * console.log(VERSION); // "0.1.0"
 * ```
 */
export const VERSION = "0.1.0";
