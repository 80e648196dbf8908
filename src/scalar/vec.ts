/**
 * 2-D and 3-D vectors of scalar `Value`s (issue 26): sums, scaling, dot and cross products,
 * lengths, and a normalisation that is safe at zero length (the zero vector, with zero gradient,
 * where a plain v / |v| would be NaN).
 * @module
 */
import { type Scalar, V, Value } from "./value.ts";

const lift = (x: Scalar): Value => (x instanceof Value ? x : V.C(x));

/** |v| where it is positive, else 0: the gradient never meets 0 / 0. */
function safeNormalize(parts: readonly Value[]): Value[] {
  const length = V.sqrt(V.sum(parts.map((p) => V.mul(p, p))));
  const positive = V.greater(length, 0);
  // Divided by 1 where the length is 0: that branch is never taken, but its gradient is computed.
  const divisor = V.where(positive, length, 1);
  return parts.map((p) => V.where(positive, V.div(p, divisor), 0));
}

/**
 * A vector of two scalars.
 *
 * @example
 * ```ts
 * import { Vec2 } from "./vec.ts";
 * import { V } from "./value.ts";
 * const a = Vec2.of(V.W(3), V.W(4));
 * a.length().data; // 5
 * ```
 */
export class Vec2 {
  /** Components. */
  constructor(readonly x: Value, readonly y: Value) {}
  /** A vector from numbers or Values (numbers become constants). */
  static of(x: Scalar, y: Scalar): Vec2 {
    return new Vec2(lift(x), lift(y));
  }
  /** this + b. */
  add(b: Vec2): Vec2 {
    return new Vec2(V.add(this.x, b.x), V.add(this.y, b.y));
  }
  /** this - b. */
  sub(b: Vec2): Vec2 {
    return new Vec2(V.sub(this.x, b.x), V.sub(this.y, b.y));
  }
  /** s * this. */
  scale(s: Scalar): Vec2 {
    return new Vec2(V.mul(this.x, s), V.mul(this.y, s));
  }
  /** The dot product. */
  dot(b: Vec2): Value {
    return V.add(V.mul(this.x, b.x), V.mul(this.y, b.y));
  }
  /** The z component of the 3-D cross product: x1 y2 - y1 x2. */
  cross(b: Vec2): Value {
    return V.sub(V.mul(this.x, b.y), V.mul(this.y, b.x));
  }
  /** The Euclidean length. */
  length(): Value {
    return V.sqrt(this.dot(this));
  }
  /** this / |this|, or the zero vector at zero length. */
  normalize(): Vec2 {
    const [x, y] = safeNormalize([this.x, this.y]);
    return new Vec2(x, y);
  }
}

/**
 * A vector of three scalars.
 *
 * @example
 * ```ts
 * import { Vec3 } from "./vec.ts";
 * import { V } from "./value.ts";
 * const n = Vec3.of(1, 0, 0).cross(Vec3.of(0, 1, 0)); // (0, 0, 1)
 * ```
 */
export class Vec3 {
  /** Components. */
  constructor(readonly x: Value, readonly y: Value, readonly z: Value) {}
  /** A vector from numbers or Values (numbers become constants). */
  static of(x: Scalar, y: Scalar, z: Scalar): Vec3 {
    return new Vec3(lift(x), lift(y), lift(z));
  }
  /** this + b. */
  add(b: Vec3): Vec3 {
    return new Vec3(V.add(this.x, b.x), V.add(this.y, b.y), V.add(this.z, b.z));
  }
  /** this - b. */
  sub(b: Vec3): Vec3 {
    return new Vec3(V.sub(this.x, b.x), V.sub(this.y, b.y), V.sub(this.z, b.z));
  }
  /** s * this. */
  scale(s: Scalar): Vec3 {
    return new Vec3(V.mul(this.x, s), V.mul(this.y, s), V.mul(this.z, s));
  }
  /** The dot product. */
  dot(b: Vec3): Value {
    return V.sum([V.mul(this.x, b.x), V.mul(this.y, b.y), V.mul(this.z, b.z)]);
  }
  /** The cross product. */
  cross(b: Vec3): Vec3 {
    return new Vec3(
      V.sub(V.mul(this.y, b.z), V.mul(this.z, b.y)),
      V.sub(V.mul(this.z, b.x), V.mul(this.x, b.z)),
      V.sub(V.mul(this.x, b.y), V.mul(this.y, b.x)),
    );
  }
  /** The Euclidean length. */
  length(): Value {
    return V.sqrt(this.dot(this));
  }
  /** this / |this|, or the zero vector at zero length. */
  normalize(): Vec3 {
    const [x, y, z] = safeNormalize([this.x, this.y, this.z]);
    return new Vec3(x, y, z);
  }
}
