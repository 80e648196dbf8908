/**
 * The mesh problem of `deno task mesh` and bench/residuals.ts: an icosphere, perturbed, restored
 * by least squares over its vertex positions (edge lengths equal to the unperturbed sphere's
 * mean, each vertex at the mean of its neighbours (umbrella smoothness), each on the unit sphere).
 * @module
 */
import { V, type Value, Vec3 } from "../src/mod.ts";
import { mulberry32 } from "../tests/_random.ts";

/** A triangle mesh: positions (x, y, z per vertex), triangles and unique edges. */
export interface Mesh {
  positions: Float64Array;
  triangles: [number, number, number][];
  edges: [number, number][];
  /** Each vertex's neighbours. */
  neighbours: number[][];
}

/**
 * The geodesic sphere of `frequency`: each face of an icosahedron cut into frequency^2
 * triangles, every vertex pushed out to length 1; 10 f^2 + 2 vertices (an icosphere of `level`
 * subdivisions is frequency 2^level).
 */
export function geodesicSphere(frequency: number): Mesh {
  const t = (1 + Math.sqrt(5)) / 2;
  const corners: number[][] = [
    [-1, t, 0],
    [1, t, 0],
    [-1, -t, 0],
    [1, -t, 0],
    [0, -1, t],
    [0, 1, t],
    [0, -1, -t],
    [0, 1, -t],
    [t, 0, -1],
    [t, 0, 1],
    [-t, 0, -1],
    [-t, 0, 1],
  ];
  const faces = [
    [0, 11, 5],
    [0, 5, 1],
    [0, 1, 7],
    [0, 7, 10],
    [0, 10, 11],
    [1, 5, 9],
    [5, 11, 4],
    [11, 10, 2],
    [10, 7, 6],
    [7, 1, 8],
    [3, 9, 4],
    [3, 4, 2],
    [3, 2, 6],
    [3, 6, 8],
    [3, 8, 9],
    [4, 9, 5],
    [2, 4, 11],
    [6, 2, 10],
    [8, 6, 7],
    [9, 8, 1],
  ];
  const f = frequency;
  const points: number[] = [];
  const ids = new Map<string, number>();
  // A point on an icosahedron edge is shared by two faces: keyed by its exact lattice position
  // on the icosahedron (corner indices and weights), sorted so both faces find it.
  const pointAt = (face: number[], i: number, j: number): number => {
    const w = [f - i - j, i, j];
    const parts = face.map((c, k) => [c, w[k]]).filter(([, wk]) => wk > 0).sort((x, y) =>
      x[0] - y[0]
    );
    const key = parts.map(([c, wk]) => `${c}:${wk}`).join(",");
    let id = ids.get(key);
    if (id === undefined) {
      const p = [0, 1, 2].map((d) => parts.reduce((s, [c, wk]) => s + corners[c][d] * wk, 0));
      const len = Math.hypot(p[0], p[1], p[2]);
      id = points.push(p[0] / len, p[1] / len, p[2] / len) / 3 - 1;
      ids.set(key, id);
    }
    return id;
  };
  const triangles: [number, number, number][] = [];
  for (const face of faces) {
    for (let i = 0; i < f; i++) {
      for (let j = 0; j < f - i; j++) {
        triangles.push([pointAt(face, i, j), pointAt(face, i + 1, j), pointAt(face, i, j + 1)]);
        if (i + j < f - 1) {
          triangles.push([
            pointAt(face, i + 1, j),
            pointAt(face, i + 1, j + 1),
            pointAt(face, i, j + 1),
          ]);
        }
      }
    }
  }
  const seen = new Set<number>();
  const n = points.length / 3;
  const edges: [number, number][] = [];
  const neighbours: number[][] = Array.from({ length: n }, () => []);
  for (const [a, b, c] of triangles) {
    for (const [p, q] of [[a, b], [b, c], [c, a]]) {
      const key = Math.min(p, q) * n + Math.max(p, q);
      if (seen.has(key)) continue;
      seen.add(key);
      edges.push([p, q]);
      neighbours[p].push(q);
      neighbours[q].push(p);
    }
  }
  return { positions: Float64Array.from(points), triangles, edges, neighbours };
}

/** The icosphere after `level` subdivisions: 10 * 4^level + 2 vertices. */
export function icosphere(level: number): Mesh {
  return geodesicSphere(2 ** level);
}

/** The mesh's positions moved by up to `amount` times the mean edge length in each coordinate. */
export function perturbed(mesh: Mesh, amount: number, seed = 1): Float64Array {
  const next = mulberry32(seed);
  const step = amount * meanEdgeLength(mesh);
  return mesh.positions.map((v) => v + (2 * next() - 1) * step);
}

/** The mean edge length. */
export function meanEdgeLength(mesh: Mesh): number {
  const p = mesh.positions;
  let sum = 0;
  for (const [a, b] of mesh.edges) {
    sum += Math.hypot(
      p[3 * a] - p[3 * b],
      p[3 * a + 1] - p[3 * b + 1],
      p[3 * a + 2] - p[3 * b + 2],
    );
  }
  return sum / mesh.edges.length;
}

/** Parameters: three per vertex, from `start`. */
export function meshParams(start: Float64Array): Value[] {
  return Array.from(start, (v) => V.W(v));
}

/**
 * The residuals over parameters `p` (x, y, z per vertex): per edge |p_a - p_b| - target; per
 * vertex and coordinate `smooth` (p_v - mean of its neighbours); per vertex |p_v| - 1.
 */
export function meshResiduals(
  mesh: Mesh,
  target: number,
  smooth = 0.5,
): (p: readonly Value[]) => Value[] {
  return (p) => {
    const vertex = (i: number) => new Vec3(p[3 * i], p[3 * i + 1], p[3 * i + 2]);
    const out: Value[] = [];
    for (const [a, b] of mesh.edges) out.push(V.sub(vertex(a).sub(vertex(b)).length(), target));
    mesh.neighbours.forEach((ns, v) => {
      for (let c = 0; c < 3; c++) {
        const mean = V.mean(ns.map((n) => p[3 * n + c]));
        out.push(V.mul(smooth, V.sub(p[3 * v + c], mean)));
      }
    });
    mesh.neighbours.forEach((_, v) => out.push(V.sub(vertex(v).length(), 1)));
    return out;
  };
}

/** The edge-length residuals alone (the energy sum r^2 of bench/residuals.ts). */
export function edgeResiduals(mesh: Mesh, target: number): (p: readonly Value[]) => Value[] {
  return (p) => {
    const vertex = (i: number) => new Vec3(p[3 * i], p[3 * i + 1], p[3 * i + 2]);
    return mesh.edges.map(([a, b]) => V.sub(vertex(a).sub(vertex(b)).length(), target));
  };
}
