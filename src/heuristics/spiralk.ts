/**
 * SpiralK: the small rule language in which users (and Self-Rewrite) state how a kernel family's
 * plan should choose. A program is a list of statements:
 *
 * - hard assignments, `field: expression;`, which later statements may read by the field's name;
 * - soft rules, `soft(field, value, weight, condition);`: while `condition` holds, `field`
 *   taking `value` earns `weight` (the solver adds them up).
 *
 * Expressions: numbers (`2`, `15.0`, `1e3`), `true` and `false`, the family's key variables
 * (Rank-K: `r` rows, `c` cols, `k`, `sg` subgroups available), `+ - * /`, comparisons
 * (`< <= > >= == !=`), `&& || !`, `sel(condition, a, b)`, `log2(x)`, `min(a, b)`, `max(a, b)`
 * and parentheses; `#` starts a comment to the end of the line. Every expression is typed
 * (number or boolean) when the program is read: a syntax or type error is a {@link RuleError}
 * naming its line and column, and nothing of a program that fails is used.
 *
 * Parsing ({@link parseRules}), printing in a canonical form ({@link printRules}: parsing what it
 * prints gives the same program) and evaluation at a key ({@link evaluateRules}) are pure.
 * @module
 */
import { RuleError } from "../core/errors.ts";

/** The type of a SpiralK value. */
export type RuleType = "number" | "bool";

/** A SpiralK value: a number or a boolean. */
export type RuleValue = number | boolean;

/** An expression, as parsed (each node keeps where it starts, for errors). */
export type RuleExpr =
  | { kind: "number"; value: number; at: Position }
  | { kind: "bool"; value: boolean; at: Position }
  | { kind: "name"; name: string; at: Position }
  | { kind: "unary"; op: "!" | "-"; x: RuleExpr; at: Position }
  | { kind: "binary"; op: BinaryRuleOp; a: RuleExpr; b: RuleExpr; at: Position }
  | { kind: "call"; fn: RuleFunction; args: RuleExpr[]; at: Position };

/** SpiralK's binary operators. */
export type BinaryRuleOp =
  | "||"
  | "&&"
  | "<"
  | "<="
  | ">"
  | ">="
  | "=="
  | "!="
  | "+"
  | "-"
  | "*"
  | "/";

/** SpiralK's functions. */
export type RuleFunction = "sel" | "log2" | "min" | "max";

/** A place in the source. */
export interface Position {
  /** The line, from 1. */
  line: number;
  /** The column, from 1. */
  column: number;
}

/** A statement of a program. */
export type RuleStatement =
  | { kind: "assign"; field: string; value: RuleExpr; at: Position }
  | {
    kind: "soft";
    field: string;
    value: RuleExpr;
    weight: RuleExpr;
    condition: RuleExpr;
    at: Position;
  };

/** A parsed, type-checked program. */
export interface RuleProgram {
  /** The statements, in order. */
  statements: RuleStatement[];
  /** The variables it was checked against. */
  variables: Readonly<Record<string, RuleType>>;
}

/** A soft rule at a key: the field, the value it favours, its weight, and whether it holds. */
export interface SoftHint {
  /** The field the rule is about. */
  field: string;
  /** The value it favours. */
  value: RuleValue;
  /** What the value earns while the rule holds. */
  weight: number;
  /** Whether its condition holds at the key. */
  holds: boolean;
}

/** What a program says at one key. */
export interface RuleDecision {
  /** The hard assignments, in program order (a field assigned twice keeps the last). */
  assignments: Record<string, RuleValue>;
  /** Every soft rule, with whether its condition holds at the key. */
  soft: SoftHint[];
}

const FUNCTIONS: Readonly<Record<RuleFunction, number>> = { sel: 3, log2: 1, min: 2, max: 2 };
const RESERVED = new Set(["soft", "true", "false", ...Object.keys(FUNCTIONS)]);

interface Token {
  kind: "number" | "name" | "op" | "end";
  text: string;
  at: Position;
}

/** The source as tokens; a character that starts no token is a RuleError. */
function tokenize(source: string): Token[] {
  const tokens: Token[] = [];
  let line = 1;
  let lineStart = 0;
  let i = 0;
  const at = (k: number): Position => ({ line, column: k - lineStart + 1 });
  while (i < source.length) {
    const ch = source[i];
    if (ch === "\n") {
      line++;
      lineStart = ++i;
      continue;
    }
    if (ch === " " || ch === "\t" || ch === "\r") {
      i++;
      continue;
    }
    if (ch === "#") {
      while (i < source.length && source[i] !== "\n") i++;
      continue;
    }
    const number = /^(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?/.exec(source.slice(i, i + 64));
    if (number) {
      tokens.push({ kind: "number", text: number[0], at: at(i) });
      i += number[0].length;
      continue;
    }
    const name = /^[A-Za-z_][A-Za-z0-9_]*/.exec(source.slice(i, i + 256));
    if (name) {
      tokens.push({ kind: "name", text: name[0], at: at(i) });
      i += name[0].length;
      continue;
    }
    const two = source.slice(i, i + 2);
    if (["<=", ">=", "==", "!=", "&&", "||"].includes(two)) {
      tokens.push({ kind: "op", text: two, at: at(i) });
      i += 2;
      continue;
    }
    if ("<>+-*/!(),;:".includes(ch)) {
      tokens.push({ kind: "op", text: ch, at: at(i) });
      i++;
      continue;
    }
    throw ruleError(at(i), "a number, a name, an operator or a comment", JSON.stringify(ch));
  }
  tokens.push({ kind: "end", text: "the end", at: at(i) });
  return tokens;
}

function ruleError(at: Position, expected: string, received: string): RuleError {
  return new RuleError({
    op: "heuristics",
    argument: "rules",
    expected,
    received: `${received} at line ${at.line}, column ${at.column}`,
    line: at.line,
    column: at.column,
  });
}

function shown(t: Token): string {
  return t.kind === "end" ? "the end" : JSON.stringify(t.text);
}

/**
 * A recursive-descent parser over the tokens (precedence, loosest first: ||, &&, comparisons,
 * + and -, * and /, unary ! and -).
 */
class Parser {
  #k = 0;
  constructor(private readonly tokens: Token[]) {}

  get next(): Token {
    return this.tokens[this.#k];
  }
  take(): Token {
    return this.tokens[this.#k++];
  }
  accept(text: string): boolean {
    if (this.next.kind === "op" && this.next.text === text) {
      this.#k++;
      return true;
    }
    return false;
  }
  expect(text: string, what = JSON.stringify(text)): Token {
    const t = this.next;
    if (t.kind !== "op" || t.text !== text) throw ruleError(t.at, what, shown(t));
    return this.take();
  }
  name(what: string): Token {
    const t = this.next;
    if (t.kind !== "name" || RESERVED.has(t.text)) throw ruleError(t.at, what, shown(t));
    return this.take();
  }

  statements(): RuleStatement[] {
    const out: RuleStatement[] = [];
    while (this.next.kind !== "end") out.push(this.statement());
    return out;
  }

  statement(): RuleStatement {
    const t = this.next;
    if (t.kind === "name" && t.text === "soft") {
      this.take();
      this.expect("(", '"(" after soft (a reserved word: soft(field, value, weight, condition))');
      const field = this.name("the field a soft rule favours a value of").text;
      this.expect(",");
      const value = this.expr();
      this.expect(",");
      const weight = this.expr();
      this.expect(",");
      const condition = this.expr();
      this.expect(")");
      this.expect(";", '";" after a soft rule');
      return { kind: "soft", field, value, weight, condition, at: t.at };
    }
    const field = this.name('a field to assign, or "soft(...)"').text;
    this.expect(":", `":" after the field ${field}`);
    const value = this.expr();
    this.expect(";", `";" after the assignment of ${field}`);
    return { kind: "assign", field, value, at: t.at };
  }

  expr(): RuleExpr {
    return this.binary(0);
  }

  binary(level: number): RuleExpr {
    const levels: readonly (readonly BinaryRuleOp[])[] = [
      ["||"],
      ["&&"],
      ["<", "<=", ">", ">=", "==", "!="],
      ["+", "-"],
      ["*", "/"],
    ];
    if (level === levels.length) return this.unary();
    let a = this.binary(level + 1);
    const comparison = level === 2;
    while (
      this.next.kind === "op" && (levels[level] as readonly string[]).includes(this.next.text)
    ) {
      const t = this.take();
      const b = this.binary(level + 1);
      a = { kind: "binary", op: t.text as BinaryRuleOp, a, b, at: t.at };
      // Comparisons do not chain (a < b < c is an error, as its meaning is unclear).
      if (comparison) break;
    }
    return a;
  }

  unary(): RuleExpr {
    const t = this.next;
    if (t.kind === "op" && (t.text === "!" || t.text === "-")) {
      this.take();
      return { kind: "unary", op: t.text, x: this.unary(), at: t.at };
    }
    return this.primary();
  }

  primary(): RuleExpr {
    const t = this.take();
    if (t.kind === "number") {
      const value = Number(t.text);
      if (!Number.isFinite(value)) throw ruleError(t.at, "a finite number", t.text);
      return { kind: "number", value, at: t.at };
    }
    if (t.kind === "name") {
      if (t.text === "true" || t.text === "false") {
        return { kind: "bool", value: t.text === "true", at: t.at };
      }
      if (t.text in FUNCTIONS) {
        const fn = t.text as RuleFunction;
        this.expect("(", `"(" after ${fn}`);
        const args: RuleExpr[] = [this.expr()];
        while (this.accept(",")) args.push(this.expr());
        this.expect(")", `")" closing ${fn}(...)`);
        if (args.length !== FUNCTIONS[fn]) {
          throw ruleError(t.at, `${FUNCTIONS[fn]} arguments to ${fn}`, `${args.length}`);
        }
        return { kind: "call", fn, args, at: t.at };
      }
      if (t.text === "soft") throw ruleError(t.at, "an expression", '"soft"');
      return { kind: "name", name: t.text, at: t.at };
    }
    if (t.kind === "op" && t.text === "(") {
      const e = this.expr();
      this.expect(")", '")"');
      return e;
    }
    throw ruleError(t.at, "an expression", shown(t));
  }
}

/** The type of an expression, given the variables' and earlier fields' types. */
function typeOf(e: RuleExpr, scope: ReadonlyMap<string, RuleType>): RuleType {
  const want = (x: RuleExpr, type: RuleType, what: string): void => {
    const got = typeOf(x, scope);
    if (got !== type) {
      throw ruleError(
        x.at,
        `${type === "bool" ? "a boolean" : "a number"} ${what}`,
        `a ${got === "bool" ? "boolean" : "number"}`,
      );
    }
  };
  switch (e.kind) {
    case "number":
      return "number";
    case "bool":
      return "bool";
    case "name": {
      const type = scope.get(e.name);
      if (!type) {
        const known = [...scope.keys()].join(", ") || "none";
        throw ruleError(e.at, `a variable or an earlier field (${known})`, JSON.stringify(e.name));
      }
      return type;
    }
    case "unary":
      want(e.x, e.op === "!" ? "bool" : "number", `after "${e.op}"`);
      return e.op === "!" ? "bool" : "number";
    case "binary": {
      if (e.op === "||" || e.op === "&&") {
        want(e.a, "bool", `around "${e.op}"`);
        want(e.b, "bool", `around "${e.op}"`);
        return "bool";
      }
      if (e.op === "==" || e.op === "!=") {
        const a = typeOf(e.a, scope);
        want(e.b, a, `on both sides of "${e.op}"`);
        return "bool";
      }
      want(e.a, "number", `around "${e.op}"`);
      want(e.b, "number", `around "${e.op}"`);
      return ["<", "<=", ">", ">="].includes(e.op) ? "bool" : "number";
    }
    case "call": {
      if (e.fn === "sel") {
        want(e.args[0], "bool", "as sel's condition");
        const a = typeOf(e.args[1], scope);
        want(e.args[2], a, "in both of sel's branches");
        return a;
      }
      for (const x of e.args) want(x, "number", `as ${e.fn}'s argument`);
      return "number";
    }
  }
}

/**
 * Reads and type-checks a SpiralK program against a family's key variables; a field assigned
 * becomes a variable of the statements after it (of its expression's type). Throws a
 * {@link RuleError} with the line and column of the first error.
 *
 * @example
 * ```ts
 * import { parseRules } from "@gyre/gyre/tuning";
 * const rules = parseRules("mk: sel(sg && (k <= 128), 2, 1);", { k: "number", sg: "bool" });
 * rules.statements.length; // 1
 * ```
 */
export function parseRules(
  source: string,
  variables: Readonly<Record<string, RuleType>>,
): RuleProgram {
  if (typeof source !== "string") {
    throw new RuleError({
      op: "heuristics",
      argument: "rules",
      expected: "SpiralK source text",
      received: typeof source,
      line: 0,
      column: 0,
    });
  }
  const statements = new Parser(tokenize(source)).statements();
  const scope = new Map<string, RuleType>(Object.entries(variables));
  for (const s of statements) {
    if (s.kind === "assign") {
      if (s.field in variables) {
        throw ruleError(s.at, "a field name, not a key variable", JSON.stringify(s.field));
      }
      scope.set(s.field, typeOf(s.value, scope));
      continue;
    }
    const type = scope.get(s.field) ?? typeOf(s.value, scope);
    const valueType = typeOf(s.value, scope);
    if (valueType !== type) {
      throw ruleError(s.value.at, `a ${type} for the field ${s.field}`, `a ${valueType}`);
    }
    if (typeOf(s.weight, scope) !== "number") {
      throw ruleError(s.weight.at, "a number as the soft rule's weight", "a boolean");
    }
    if (typeOf(s.condition, scope) !== "bool") {
      throw ruleError(s.condition.at, "a boolean as the soft rule's condition", "a number");
    }
  }
  return { statements, variables: { ...variables } };
}

const PRECEDENCE: Readonly<Record<BinaryRuleOp, number>> = {
  "||": 0,
  "&&": 1,
  "<": 2,
  "<=": 2,
  ">": 2,
  ">=": 2,
  "==": 2,
  "!=": 2,
  "+": 3,
  "-": 3,
  "*": 4,
  "/": 4,
};

/** An expression's canonical text (parenthesised only where precedence needs it). */
function printExpr(e: RuleExpr, context = -1, right = false): string {
  switch (e.kind) {
    case "number":
      // JavaScript's shortest round-trip form (1e21, 1e-7): the tokenizer reads it back exactly.
      return String(e.value);
    case "bool":
      return String(e.value);
    case "name":
      return e.name;
    case "unary": {
      const inner = printExpr(e.x, 5);
      return `${e.op}${e.op === "-" && inner.startsWith("-") ? " " : ""}${inner}`;
    }
    case "call":
      return `${e.fn}(${e.args.map((a) => printExpr(a)).join(", ")})`;
    case "binary": {
      const p = PRECEDENCE[e.op];
      // Left-associative: a right operand at the same level keeps its parentheses; comparisons
      // never chain, so any comparison operand of a comparison keeps them.
      const text = `${printExpr(e.a, p, false)} ${e.op} ${printExpr(e.b, p, true)}`;
      const needs = p < context || (p === context && (right || p === 2));
      return needs ? `(${text})` : text;
    }
  }
}

/**
 * A program's canonical text: one statement a line, single spaces around binary operators,
 * parentheses only where needed; comments are not kept. Parsing it gives the same program.
 *
 * @example
 * ```ts
 * import { parseRules, printRules } from "@gyre/gyre/tuning";
 * printRules(parseRules("tile:sel(c>4096,1024,(256));", { c: "number" }));
 * // "tile: sel(c > 4096, 1024, 256);\n"
 * ```
 */
export function printRules(program: RuleProgram): string {
  return program.statements.map((s) =>
    s.kind === "assign"
      ? `${s.field}: ${printExpr(s.value)};\n`
      : `soft(${s.field}, ${printExpr(s.value)}, ${printExpr(s.weight)}, ${
        printExpr(s.condition)
      });\n`
  ).join("");
}

function evaluate(e: RuleExpr, env: ReadonlyMap<string, RuleValue>): RuleValue {
  switch (e.kind) {
    case "number":
    case "bool":
      return e.value;
    case "name":
      return env.get(e.name)!;
    case "unary": {
      const x = evaluate(e.x, env);
      return e.op === "!" ? !x : -(x as number);
    }
    case "call": {
      if (e.fn === "sel") {
        return evaluate(e.args[0], env) ? evaluate(e.args[1], env) : evaluate(e.args[2], env);
      }
      const [a, b] = e.args.map((x) => evaluate(x, env) as number);
      return e.fn === "log2" ? Math.log2(a) : e.fn === "min" ? Math.min(a, b) : Math.max(a, b);
    }
    case "binary": {
      if (e.op === "&&") return Boolean(evaluate(e.a, env)) && Boolean(evaluate(e.b, env));
      if (e.op === "||") return Boolean(evaluate(e.a, env)) || Boolean(evaluate(e.b, env));
      const a = evaluate(e.a, env);
      const b = evaluate(e.b, env);
      switch (e.op) {
        case "==":
          return a === b;
        case "!=":
          return a !== b;
        case "<":
          return (a as number) < (b as number);
        case "<=":
          return (a as number) <= (b as number);
        case ">":
          return (a as number) > (b as number);
        case ">=":
          return (a as number) >= (b as number);
        case "+":
          return (a as number) + (b as number);
        case "-":
          return (a as number) - (b as number);
        case "*":
          return (a as number) * (b as number);
        case "/":
          return (a as number) / (b as number);
      }
    }
  }
}

/**
 * What a program says at one key: its hard assignments in order (each visible to the statements
 * after it) and its soft rules with whether each holds. The key must give every variable the
 * program was checked against, of its type (else a RuleError naming it, at line 0).
 *
 * @example
 * ```ts
 * import { evaluateRules, parseRules } from "@gyre/gyre/tuning";
 * const rules = parseRules("mk: sel(sg && (k <= 128), 2, 1);\nsoft(mk, 2, 0.25, sg);", {
 *   k: "number",
 *   sg: "bool",
 * });
 * evaluateRules(rules, { k: 64, sg: true }).assignments; // { mk: 2 }
 * ```
 */
export function evaluateRules(
  program: RuleProgram,
  key: Readonly<Record<string, RuleValue>>,
): RuleDecision {
  const env = new Map<string, RuleValue>();
  for (const [name, type] of Object.entries(program.variables)) {
    const v = key[name];
    if (type === "bool" ? typeof v !== "boolean" : typeof v !== "number") {
      throw new RuleError({
        op: "heuristics",
        argument: `key.${name}`,
        expected: type === "bool" ? "a boolean" : "a number",
        received: v === undefined ? "undefined" : String(v),
        line: 0,
        column: 0,
      });
    }
    env.set(name, v);
  }
  const assignments: Record<string, RuleValue> = {};
  const soft: SoftHint[] = [];
  for (const s of program.statements) {
    if (s.kind === "assign") {
      const v = evaluate(s.value, env);
      assignments[s.field] = v;
      env.set(s.field, v);
    } else {
      soft.push({
        field: s.field,
        value: evaluate(s.value, env),
        weight: evaluate(s.weight, env) as number,
        holds: evaluate(s.condition, env) as boolean,
      });
    }
  }
  return { assignments, soft };
}
