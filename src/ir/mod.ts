/**
 * The IR: the scalar expression every elementwise kernel is built from, the op table both devices
 * and the AssemblyScript generator (scripts/gen_asm.ts) read, and the scan operators. Modules here
 * import only core and each other.
 * @module
 */
export * from "./elementwise_table.ts";
export * from "./expr.ts";
export * from "./scan.ts";
