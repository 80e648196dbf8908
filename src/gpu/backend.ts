/**
 * The GPU device: the backend contract (src/contract/) over WebGPU. The device's own machinery
 * (buffers, pipelines, dispatch) is in host.ts; each kernel family's host code and WGSL generator
 * sit beside it under the family's stem (rows.ts and _codegen_rows.ts, matmul.ts and
 * _codegen_matmul.ts, ...). Modules here may import core, ir, contract and plans; never the front
 * end (tensors, ops).
 * @module
 */
import type { PoolJob, PoolResult } from "../contract/pool.ts";
import type { View } from "../core/view.ts";
import type { CaptureSession } from "../contract/capture.ts";
import type { MatmulJob, MatmulResult } from "../contract/matmul.ts";
import type { Storage } from "../core/view.ts";
import type { Backend } from "../contract/backend.ts";
import type { ElementwiseJob } from "../contract/elementwise.ts";
import type { ReduceJob } from "../contract/reduce.ts";
import { runElementwiseGpu } from "./elementwise.ts";
import { runReduceGpu } from "./reduce.ts";
import type { RowsBackwardJob, RowsJob, RowsResult } from "../contract/rows.ts";
import type { ScanJob, ScanResult } from "../contract/scan.ts";
import { GpuHost } from "./host.ts";
import { startCapture } from "./capture.ts";
import { runPoolGpu } from "./pool.ts";
import { runMatmulGpu } from "./matmul.ts";
import { runRowsBackwardGpu, runRowsGpu } from "./rows.ts";
import { runAdamGpu } from "./optim.ts";
import { prepareResidualsGpu } from "./residuals.ts";
import type { PreparedResiduals, ResidualProgram } from "../contract/residuals.ts";
import type { AdamJob, AdamResult } from "../contract/optim.ts";
import { runScanGpu } from "./scan.ts";
import { timedForOnline } from "./online.ts";
import type {
  QuantileJob,
  QuantileResult,
  SearchJob,
  SearchResult,
  SortJob,
  SortResult,
} from "../contract/sort.ts";
import { runQuantileGpu, runSearchGpu, runSortGpu } from "./sort.ts";
import type { GatherJob, GatherResult, ScatterJob, ScatterResult } from "../contract/indexing.ts";
import { runGatherGpu, runScatterGpu } from "./indexing.ts";

/**
 * The GPU backend over one WebGPU device. The tunable families' entry points run under
 * {@link timedForOnline}, which times them for online tuning when that mode is on.
 */
export class GpuBackend extends GpuHost implements Backend {
  evaluate(job: ElementwiseJob): Storage {
    return timedForOnline(this, () => runElementwiseGpu(this, job));
  }
  reduce(job: ReduceJob): Storage | null {
    return timedForOnline(this, () => runReduceGpu(this, job));
  }
  rows(job: RowsJob): RowsResult | null {
    return timedForOnline(this, () => runRowsGpu(this, job));
  }
  rowsBackward(job: RowsBackwardJob): Storage | null {
    return runRowsBackwardGpu(this, job);
  }
  adam(job: AdamJob): AdamResult | null {
    return runAdamGpu(this, job);
  }
  prepareResiduals(
    program: ResidualProgram,
    accumulation: "gather" | "atomic",
  ): PreparedResiduals {
    return prepareResidualsGpu(this, program, accumulation);
  }
  scan(job: ScanJob): ScanResult {
    return timedForOnline(this, () => runScanGpu(this, job));
  }
  pool(job: PoolJob): PoolResult {
    return timedForOnline(this, () => runPoolGpu(this, job));
  }
  sort(job: SortJob): SortResult {
    return timedForOnline(this, () => runSortGpu(this, job));
  }
  quantile(job: QuantileJob): QuantileResult {
    return runQuantileGpu(this, job);
  }
  searchsorted(job: SearchJob): SearchResult {
    return runSearchGpu(this, job);
  }
  gather(job: GatherJob): GatherResult | null {
    return runGatherGpu(this, job);
  }
  scatter(job: ScatterJob): ScatterResult {
    return runScatterGpu(this, job);
  }
  matmul(job: MatmulJob): MatmulResult | null {
    return timedForOnline(this, () => runMatmulGpu(this, job));
  }
  capture(inputs: readonly View[]): CaptureSession {
    return startCapture(this, inputs);
  }
}
