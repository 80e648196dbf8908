/**
 * Topology keys of scalar graphs (src/scalar/topology.ts): equal structure gives equal keys and
 * hashes whatever the values; any structural difference (an op, an operand's order, a parameter
 * where a constant was, a shared node where two were, a different parameter) gives another key;
 * the instance data comes out in slot order.
 */
import assert from "node:assert/strict";
import { V, type Value } from "../src/scalar/value.ts";
import { Vec3 } from "../src/scalar/vec.ts";
import { topology } from "../src/scalar/topology.ts";

const edgeLength = (a: Vec3, b: Vec3, rest: number) => V.square(V.sub(a.sub(b).length(), rest));
const point = (x: number, y: number, z: number) => new Vec3(V.W(x), V.W(y), V.W(z));

Deno.test("scalar topology: equal structure, equal key and hash; data in slot order", () => {
  const one = topology(edgeLength(point(0, 0, 0), point(1, 2, 3), 1.5));
  const two = topology(edgeLength(point(4, 5, 6), point(-1, 0, 2), 0.25));
  assert.equal(one.key, two.key);
  assert.equal(one.hash, two.hash);
  assert.deepEqual(one.params.map((p) => p.data), [0, 1, 0, 2, 0, 3]);
  assert.deepEqual(two.constants, [0.25]);
  assert.equal(one.params.length, 6);
});

Deno.test("scalar topology: every structural difference changes the key", () => {
  const x = () => V.W(1), c = () => V.C(2);
  const keys = new Map<string, string>();
  const add = (name: string, root: Value) => {
    const k = topology(root).key;
    assert.ok(!keys.has(k), `${name} has the key of ${keys.get(k)}`);
    keys.set(k, name);
  };
  add("a + b", V.add(x(), x()));
  add("a - b", V.sub(x(), x()));
  add("a + c", V.add(x(), c()));
  add("c + a", V.add(c(), x()));
  const shared = x();
  add("a + a (shared)", V.add(shared, shared));
  add(
    "(a + b) * a",
    (() => {
      const a = x();
      return V.mul(V.add(a, x()), a);
    })(),
  );
  add("(a + b) * c", V.mul(V.add(x(), x()), x()));
  add("sin(a + b)", V.sin(V.add(x(), x())));
  add("cos(a + b)", V.cos(V.add(x(), x())));
  add("edge", edgeLength(point(0, 0, 0), point(1, 2, 3), 1));
  // The same graph built twice: the same key (no new entry).
  assert.equal(topology(V.add(x(), c())).key, topology(V.add(V.W(9), V.C(-4))).key);
});

Deno.test("scalar topology: a parameter shared between terms is one slot", () => {
  const p = V.W(2);
  const t = topology(V.add(V.mul(p, V.W(3)), V.sin(p)));
  assert.equal(t.params.length, 2);
  assert.equal(t.params[0], p);
  const separate = topology(V.add(V.mul(V.W(2), V.W(3)), V.sin(V.W(2))));
  assert.notEqual(t.key, separate.key);
  assert.equal(separate.params.length, 3);
});
