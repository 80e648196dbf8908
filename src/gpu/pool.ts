/**
 * The pooling family on the GPU: host code for the kernels that _codegen_pool.ts generates, as
 * `planPool` chooses. The kernels read contiguous planes: strided views are copied first. (The
 * pool of GPU buffers is ./buffer_pool.ts.)
 * @module
 */
import type { DType } from "../core/dtype.ts";
import { contiguousStrides, isContiguous } from "../core/shape.ts";
import type { View } from "../core/view.ts";
import type { Pair, PoolJob, PoolResult } from "../contract/pool.ts";
import { E } from "../ir/expr.ts";
import { observePlan } from "../contract/backend.ts";
import { planPool } from "../plans/mod.ts";
import { tunedOverride } from "../heuristics/consensus.ts";
import { poolTuneKey } from "../heuristics/families.ts";
import type { GpuHost, GpuStorage } from "./host.ts";
import {
  generatePool,
  type PoolDivisor,
  type PoolGeometry,
  poolInvocations,
  poolKey,
  type PoolSpec,
  poolUniforms,
} from "./_codegen_pool.ts";

/** The GPU path: the values and, when asked, the indices, one dispatch each. */
export function runPoolGpu(backend: GpuHost, job: PoolJob): PoolResult {
  const { op, problem: p, indices } = job;
  backend.checkLive(op, [p.dtype]);
  const outputs = p.planes * p.outHeight * p.outWidth;
  const kinds: ("values" | "indices")[] = indices ? ["values", "indices"] : ["values"];
  if (outputs === 0) {
    const [values, index] = kinds.map((k) => {
      const dtype = k === "indices" ? "int32" : p.dtype;
      return backend.alloc(op, dtype, 0);
    });
    return { values, indices: index ?? null };
  }
  const source = job.x;
  // The kernels read contiguous planes: strided views are copied first (as `clone` does).
  const copy = isContiguous(source.shape, source.strides) ? null : backend.evaluate({
    op: "clone",
    expr: E.input(0, source.dtype),
    inputs: [source],
    shape: source.shape,
    overrides: job.overrides,
  }) as GpuStorage;
  try {
    const view: View = copy
      ? {
        storage: copy,
        dtype: source.dtype,
        shape: source.shape,
        strides: contiguousStrides(source.shape),
        offset: 0,
      }
      : source;
    // Adaptive bins that divide the input evenly are regular windows (kernel = stride), which
    // get the multi-output and vec4 forms; their averages still divide twice, as PyTorch's.
    const even = p.adaptive && p.inHeight % p.outHeight === 0 && p.inWidth % p.outWidth === 0;
    const window = p.adaptive && !even ? "adaptive" : "regular";
    const kernel: Pair = even ? [p.inHeight / p.outHeight, p.inWidth / p.outWidth] : p.kernel;
    const stride: Pair = even ? kernel : p.stride;
    const choice = observePlan(
      "gpu",
      "pool",
      op,
      planPool(
        backend.caps,
        {
          window,
          kernel,
          stride,
          padding: p.padding,
          dilation: p.dilation,
          inWidth: p.inWidth,
          outWidth: p.outWidth,
          alignedOffset: view.offset % 4 === 0,
          totalOutputs: outputs,
        },
        // Regular square windows without padding or dilation: what the tuner measured.
        window === "regular" ? tunedPool(backend, job, kernel, stride) : job.overrides.pool,
      ),
      job.overrides.pool,
    );
    const divisor: PoolDivisor = p.adaptive
      ? "bins"
      : p.divisor !== 0
      ? "override"
      : p.countIncludePad
      ? "padded"
      : "valid";
    const geometry: PoolGeometry = {
      planes: p.planes,
      inHeight: p.inHeight,
      inWidth: p.inWidth,
      outHeight: p.outHeight,
      outWidth: p.outWidth,
      offset: view.offset,
      kernel,
      stride,
      padding: p.padding,
      dilation: p.dilation,
      divisor: p.divisor,
    };
    const v = choice.outputsPerInvocation;
    // Two dispatches for values and indices: the batch's layouts have one writable binding.
    const [values, index] = kinds.map((output) => {
      const spec: PoolSpec = {
        op: p.op,
        output,
        dtype: p.dtype,
        window,
        variant: choice.variant,
        kernel,
        stride,
        padding: p.padding,
        dilation: p.dilation,
        outputsPerInvocation: v,
        vec4: choice.vec4,
        vectorStore: v > 1 && p.outWidth % v === 0,
        divisor,
        workgroupSize: choice.workgroupSize,
        teamSize: choice.teamSize,
      };
      const dtype: DType = output === "indices" ? "int32" : p.dtype;
      const pipeline = backend.pipeline(poolKey(spec), 2, () => generatePool(spec));
      const out = backend.alloc(op, dtype, outputs);
      backend.dispatch(
        op,
        pipeline,
        [(view.storage as GpuStorage).buffer, out.buffer],
        poolUniforms(spec, geometry),
        backend.grid(poolInvocations(spec, geometry), spec.workgroupSize),
      );
      return out;
    });
    return { values, indices: index ?? null };
  } finally {
    if (copy) backend.free(copy);
  }
}

/** The tuned choice for a regular pooling, where its key is one the tuner measures. */
function tunedPool(backend: GpuHost, job: PoolJob, kernel: Pair, stride: Pair) {
  const p = job.problem;
  const outputs = p.planes * p.outHeight * p.outWidth;
  const key = poolTuneKey(kernel, stride, p.padding, p.dilation, p.outWidth, outputs);
  return key ? tunedOverride("pool", backend.caps, key, job.overrides.pool) : job.overrides.pool;
}
