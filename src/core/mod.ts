/**
 * Core: the vocabulary every layer shares — dtypes, typed errors, shapes, views and storage,
 * device capabilities and allocation size classes. Modules here import only each other: no IR,
 * plan, contract, device or front-end module.
 * @module
 */
export * from "./caps.ts";
export * from "./dtype.ts";
export * from "./errors.ts";
export * from "./shape.ts";
export * from "./size_class.ts";
export * from "./view.ts";
export * from "./options.ts";
